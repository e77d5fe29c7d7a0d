/* Off-CPU time with a known answer. Each round (SECONDS of wall time in all):
 *   serial   - one thread computes (LINE_CPU) then sleeps (LINE_SLEEP): a
 *              shorter sleep shortens the round by as much;
 *   parallel - the main thread starts a thread that sleeps (LINE_SIDE_SLEEP)
 *              while it computes for longer itself (LINE_CPU), then joins it:
 *              the sleep is off the critical path, a shorter one gains nothing.
 * Prints its CPU time.  Usage: offcpu MODE SECONDS [CPU_STEPS SLEEP_US] */
#include <coz.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long cpu_steps = 3000000, sleep_us = 2000;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* side(void* arg) {
  struct timespec d = {0, sleep_us * 1000};
  nanosleep(&d, NULL); /* LINE_SIDE_SLEEP */
  return arg;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int parallel = !strcmp(argv[1], "parallel");
  double end = now() + atof(argv[2]);
  if (argc > 4) {
    cpu_steps = atol(argv[3]);
    sleep_us = atol(argv[4]);
  }
  unsigned long x = 7949;
  while (now() < end) {
    pthread_t t;
    if (parallel) pthread_create(&t, NULL, side, NULL);
    for (long i = 0; i < cpu_steps; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* LINE_CPU */
    if (parallel) {
      pthread_join(t, NULL);
    } else {
      struct timespec d = {0, sleep_us * 1000};
      nanosleep(&d, NULL); /* LINE_SLEEP */
    }
    COZ_PROGRESS_NAMED("round");
  }
  struct timespec cpu;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  printf("offcpu %lu cpu_ms=%ld\n", x % 1000, (long)(cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000));
  return 0;
}
