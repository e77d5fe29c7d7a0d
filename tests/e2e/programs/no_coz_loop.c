/* No coz.h at all: progress is given on the command line with
 * --progress no_coz_loop.c:LINE (a hardware breakpoint).
 * Usage: no_coz_loop ITEMS */
#include <stdio.h>
#include <stdlib.h>

volatile unsigned long sink_3571;

__attribute__((noinline)) static void item_done(long i) {
  sink_3571 += (unsigned long)i; /* LINE_ITEM_DONE */
}

int main(int argc, char** argv) {
  long items = argc > 1 ? atol(argv[1]) : 1000;
  for (long i = 0; i < items; i++) {
    for (unsigned long k = 0; k < 20000; k++) sink_3571 += k; /* LINE_WORK */
    item_done(i);
  }
  printf("%ld items\n", items);
  return 0;
}
