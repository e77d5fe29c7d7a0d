/* One thread; each round calls chain_work() (chain_work.c) twice, from line
 * CALL_A with about A steps and from line CALL_B with about B steps, then
 * counts a progress point. Runs for SECONDS of wall time, whatever the
 * machine's speed. Known answer, measured by the program itself: the CPU
 * time of each call (CLOCK_THREAD_CPUTIME_ID around it), printed at the
 * end with the thread's total; speeding up CALL_A by x speeds the program
 * up by x times CALL_A's share of the round's time.
 *
 * Each round scales both step counts by one factor drawn from [0.75, 1.25)
 * (the mean stays A and B): rounds of one fixed length fall in step with a
 * fixed sampling period that is close to a multiple of them, and the
 * samples then split the calls as the phase of that lock decides, not as
 * their times do. Sampling-only's turns of periods make that unbiased but
 * more spread (docs/runtime.md, "Periods"); the tests' bounds are those of
 * independent samples.
 *
 * Usage: chain SECONDS [A B]
 * Prints: chain X cpu_ms=TOTAL a_us=CALL_A b_us=CALL_B */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "spin.h"

unsigned long chain_work(unsigned long x, long steps);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  long a = argc > 3 ? atol(argv[2]) : 200000, b = argc > 3 ? atol(argv[3]) : 100000;
  unsigned long x = 7937, rng = 0x9e3779b97f4a7c15ul;
  uint64_t a_ns = 0, b_ns = 0;
  double end = now() + seconds;
  while (now() < end) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;  /* xorshift64 */
    double f = 0.75 + 0.5 * (double)(rng >> 11) / (double)(1ul << 53);
    uint64_t t0 = thread_cpu_ns();
    x = chain_work(x, (long)(a * f)); /* CALL_A */
    uint64_t t1 = thread_cpu_ns();
    x = chain_work(x, (long)(b * f)); /* CALL_B */
    uint64_t t2 = thread_cpu_ns();
    a_ns += t1 - t0;
    b_ns += t2 - t1;
    COZ_PROGRESS_NAMED("round");
  }
  printf("chain %lu cpu_ms=%llu a_us=%llu b_us=%llu\n", x % 1000, (unsigned long long)(thread_cpu_ns() / 1000000),
         (unsigned long long)(a_ns / 1000), (unsigned long long)(b_ns / 1000));
  return 0;
}
