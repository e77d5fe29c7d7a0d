/* Says whether the runtime hands this program a counter for its progress
 * points (coz.h's lookup, as COZ_PROGRESS makes it), and counts a few. */
#include <stdio.h>

#include "coz.h"

int main(void) {
  coz_counter_t* c = _coz_counter_for(COZ_COUNTER_TYPE_THROUGHPUT, "progress_counter.op");
  for (int i = 0; i < 1000; i++) COZ_PROGRESS_NAMED("progress_counter.op");
  printf("counter %s\n", c ? "given" : "none");
  return 0;
}
