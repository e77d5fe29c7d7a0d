/* A program in step with the default sampling period: each round is exactly
 * 1 ms of this thread's CPU time, by its own CPU clock, 0.5 ms on LINE_A and
 * then 0.5 ms on LINE_B (rounds start where the last one was due to end, so
 * that the phase never drifts). A sampler with a fixed 1 ms period of CPU
 * time samples each round at the same phase, and puts nearly every sample on
 * one of the two lines; randomized periods (DCPI's remedy) share them about
 * equally, as the lines share the CPU time.
 * Usage: aliasing MS (rounds for MS milliseconds of its CPU time, so that
 * a busy machine gives as many samples, later). Prints
 *   aliasing rounds=N */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

uint64_t sink_6007;

int main(int argc, char** argv) {
  uint64_t run_ns = (argc > 1 ? strtoull(argv[1], 0, 10) : 1000) * 1000000ull;
  uint64_t x = 6007, rounds = 0, t0 = thread_cpu_ns(), t = t0;
  while (t - t0 < run_ns) {
    uint64_t half = t + 500000, end = t + 1000000;
    do { SPIN(x, 2000); } while (thread_cpu_ns() < half); /* LINE_A */
    do { SPIN(x, 2000); } while (thread_cpu_ns() < end);  /* LINE_B */
    t = end;
    rounds++;
    COZ_PROGRESS_NAMED("round");
  }
  sink_6007 = x;
  printf("aliasing rounds=%llu\n", (unsigned long long)rounds);
  return 0;
}
