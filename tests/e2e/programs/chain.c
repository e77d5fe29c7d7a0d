/* One thread; each round calls chain_work() (chain_work.c) twice, from line
 * CALL_A with A steps and from line CALL_B with B steps, then counts a
 * progress point. Runs for SECONDS of wall time, whatever the machine's
 * speed. Known answer, from the run's own samples: speeding up CALL_A by x
 * speeds the program up by x times CALL_A's share of the round's samples.
 * Prints its CPU time.  Usage: chain SECONDS [A B] */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

unsigned long chain_work(unsigned long x, long steps);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  long a = argc > 3 ? atol(argv[2]) : 200000, b = argc > 3 ? atol(argv[3]) : 100000;
  unsigned long x = 7937, rounds = 0;
  double end = now() + seconds;
  while (now() < end) {
    x = chain_work(x, a); /* CALL_A */
    x = chain_work(x, b); /* CALL_B */
    rounds++;
    COZ_PROGRESS_NAMED("round");
  }
  struct timespec cpu;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  printf("chain %lu cpu_ms=%ld\n", x % 1000, (long)(cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000));
  return 0;
}
