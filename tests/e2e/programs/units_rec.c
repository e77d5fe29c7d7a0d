/* A recursive function called from two lines: CALL_BIG and CALL_SMALL each
 * round. Runs for SECONDS of wall time; prints the CPU time each call site
 * took, measured around the calls.  Usage: units_rec SECONDS [N_BIG N_SMALL] */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) unsigned long fib(int n) {
  if (n < 2) return (unsigned long)n;
  return fib(n - 1) + fib(n - 2); /* RECURSE */
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  int big = argc > 3 ? atoi(argv[2]) : 24, small = argc > 3 ? atoi(argv[3]) : 23;
  double tb = 0, ts = 0, end = now(CLOCK_MONOTONIC) + seconds;
  unsigned long x = 0;
  while (now(CLOCK_MONOTONIC) < end) {
    double t0 = now(CLOCK_THREAD_CPUTIME_ID);
    x += fib(big); /* CALL_BIG */
    double t1 = now(CLOCK_THREAD_CPUTIME_ID);
    x += fib(small); /* CALL_SMALL */
    double t2 = now(CLOCK_THREAD_CPUTIME_ID);
    tb += t1 - t0;
    ts += t2 - t1;
    COZ_PROGRESS_NAMED("round");
  }
  printf("units_rec big_ms=%.0f small_ms=%.0f cpu_ms=%.0f check=%lu\n", tb * 1e3, ts * 1e3,
         now(CLOCK_THREAD_CPUTIME_ID) * 1e3, x % 1000);
  return 0;
}
