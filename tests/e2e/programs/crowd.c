/* More runnable threads than CPUs: THREADS workers each run for MS
 * milliseconds of wall time, passing the progress point "crowd.round" after
 * each round of line WORK_A (STEPS_A steps of the spin.h kernel) then line
 * WORK_B (STEPS_B steps). They never block, so with more workers than CPUs
 * each waits for a CPU about (THREADS - CPUs) / THREADS of its time.
 * With PACER_US > 0, one more thread, the pacer, sleeps PACER_US
 * microseconds then runs line PACE (STEPS_A / 10 steps), over and over:
 * asleep most of the time, it rarely waits for a CPU itself.
 * Printed at exit: crowd threads=T rounds=N checksum=C
 * Usage: crowd THREADS MS STEPS_A STEPS_B [PACER_US] */
#include <coz.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "spin.h"

static long ms, steps_a, steps_b;
static uint64_t end_ns;

struct worker {
  pthread_t thread;
  uint64_t x;
  long rounds;
};

static void *work(void *arg) {
  struct worker *w = arg;
  while (wall_ns() < end_ns) {
    SPIN(w->x, steps_a); /* WORK_A */
    SPIN(w->x, steps_b); /* WORK_B */
    COZ_PROGRESS_NAMED("crowd.round");
    w->rounds++;
  }
  return NULL;
}

static long pacer_us;
static uint64_t pacer_x = 7;

static void *pace(void *arg) {
  (void)arg;
  struct timespec ts = {pacer_us / 1000000, (pacer_us % 1000000) * 1000};
  while (wall_ns() < end_ns) {
    nanosleep(&ts, NULL);
    SPIN(pacer_x, steps_a / 10); /* PACE */
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: crowd THREADS MS STEPS_A STEPS_B [PACER_US]\n");
    return 2;
  }
  pacer_us = argc == 6 ? atol(argv[5]) : 0;
  int threads = atoi(argv[1]);
  ms = atol(argv[2]);
  steps_a = atol(argv[3]);
  steps_b = atol(argv[4]);
  if (threads < 1 || threads > 1024 || ms < 1) return 2;
  struct worker *w = calloc((size_t)threads, sizeof *w);
  end_ns = wall_ns() + (uint64_t)ms * 1000000ull;
  for (int i = 0; i < threads; i++) {
    w[i].x = (uint64_t)i + 1;
    pthread_create(&w[i].thread, NULL, work, &w[i]);
  }
  pthread_t pacer;
  if (pacer_us > 0) pthread_create(&pacer, NULL, pace, NULL);
  long rounds = 0;
  uint64_t sum = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(w[i].thread, NULL);
    rounds += w[i].rounds;
    sum ^= w[i].x;
  }
  if (pacer_us > 0) {
    pthread_join(pacer, NULL);
    sum ^= pacer_x;
  }
  printf("crowd threads=%d rounds=%ld checksum=%llu\n", threads, rounds, (unsigned long long)sum);
  free(w);
  return 0;
}
