/* The COZ paper's example: each round, thread 1 runs line LONG and thread 2
 * runs line SHORT (half as long), and the main thread joins both. Known
 * answer: speeding SHORT does nothing (the round waits for LONG); speeding
 * LONG by x speeds rounds by x until LONG is as short as SHORT (at most 50%
 * of the round here, i.e. program speedup up to 50% at x >= 0.5).
 * Usage: two_threads ROUNDS [LONG_STEPS SHORT_STEPS] */
#include <coz.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned long long_steps = 2000000, short_steps = 1000000;
/* On separate cache lines: sharing one would make each thread slow the other
 * down (false sharing), and speeding up the short thread would then really
 * speed up the long one. */
volatile unsigned long sink_long_6151 __attribute__((aligned(128)));
volatile unsigned long sink_short_6163 __attribute__((aligned(128)));

static void* run_long(void* arg) {
  for (unsigned long i = 0; i < long_steps; i++) sink_long_6151 += i; /* LINE_LONG */
  return arg;
}

static void* run_short(void* arg) {
  for (unsigned long i = 0; i < short_steps; i++) sink_short_6163 += i; /* LINE_SHORT */
  return arg;
}

int main(int argc, char** argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 500;
  if (argc > 3) {
    long_steps = strtoul(argv[2], 0, 10);
    short_steps = strtoul(argv[3], 0, 10);
  }
  for (long r = 0; r < rounds; r++) {
    pthread_t t1, t2;
    pthread_create(&t1, 0, run_long, 0);
    pthread_create(&t2, 0, run_short, 0);
    pthread_join(t1, 0);
    pthread_join(t2, 0);
    COZ_PROGRESS_NAMED("round");
  }
  printf("two_threads %ld rounds\n", rounds);
  return 0;
}
