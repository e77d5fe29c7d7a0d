/* A program whose work is done by a library's own thread, as xz's by
 * liblzma's compressing threads: lib_compress (lib_threads_lib.c, a shared
 * library built -O2 -fomit-frame-pointer without debug information, outside
 * the binary scope) starts a thread of its own that computes `steps` and
 * joins it. No frame of that thread is in scope: its samples belong to the
 * line that called the library (CALL_LIB). The program's own work: OWN.
 * Usage: lib_threads [ROUNDS] */
#include <coz.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

void lib_compress(long steps);

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  const long steps = 2000000;
  uint64_t x = 1;
  for (int r = 0; r < rounds; r++) {
    lib_compress(steps); /* CALL_LIB */
    SPIN(x, steps / 2); /* OWN */
    COZ_PROGRESS;
  }
  printf("%llu\n", (unsigned long long)x);
  return 0;
}
