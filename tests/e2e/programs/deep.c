/* Spins at the bottom of a recursion DEPTH calls deep for SECONDS of wall
 * time, then prints the CPU time it used. Perf records of such stacks are
 * longer than 1 KiB.
 * Usage: deep SECONDS DEPTH */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static unsigned long down(int depth, double end, unsigned long x) {
  if (depth > 0) return down(depth - 1, end, x) + 1;
  while (now(CLOCK_MONOTONIC) < end)
    for (int i = 0; i < 20000; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* BOTTOM */
  return x;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  int depth = argc > 2 ? atoi(argv[2]) : 300;
  unsigned long x = down(depth, now(CLOCK_MONOTONIC) + seconds, 7951);
  printf("deep %lu cpu_ms=%ld\n", x % 1000, (long)(now(CLOCK_PROCESS_CPUTIME_ID) * 1000));
  return 0;
}
