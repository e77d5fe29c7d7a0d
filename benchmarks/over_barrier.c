/*
 * over_barrier: more runnable threads than cores (issue 15). `threads`
 * CPU-bound threads (default 3, meant for a 2-core machine) meet at a
 * pthread_barrier every round. Thread 0 spends w0 on line WORK_SLOW per
 * round, every other thread w1 on line WORK_FAST. One progress point per
 * round.
 *
 * Known answer: MEASURED, not derived. With 3 threads on 2 cores the round
 * is neither w0 (one core per thread) nor the total CPU over 2 cores: it
 * depends on how the scheduler shares the cores while all three threads
 * run, so speeding WORK_SLOW gains less than min(x, 1 - w1/w0) at small x
 * and the real curve is convex (the measurement on a 2-vCPU VM:
 * +0.3% at 10%, +4% at 20%, +21% at 50%, +45% at 90%). WORK_FAST, worth 0
 * when every thread has its own core, gains here: the fast threads take CPU
 * that thread 0 would get. accuracy.py measures both curves by really
 * lowering w0 (WORK_SLOW) and w1 (WORK_FAST) on the machine at hand.
 *
 * Usage: over_barrier [rounds=N] [threads=N] [w0=] [w1=] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define MAX_THREADS 64

static pthread_barrier_t barrier;
static long nthreads, rounds, w0, w1;
static uint64_t results[MAX_THREADS];

static void *worker(void *arg) {
  long id = (long)(intptr_t)arg;
  uint64_t x = 92821 + (uint64_t)id;
  for (long r = 0; r < rounds; r++) {
    if (id == 0) {
      BENCH_SPIN(x, w0); /* KEY:WORK_SLOW */
    } else {
      BENCH_SPIN(x, w1); /* KEY:WORK_FAST */
    }
    pthread_barrier_wait(&barrier);
    if (id == 0) COZ_PROGRESS_NAMED("over_barrier.round");
  }
  results[id] = x;
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"rounds", "threads", "w0", "w1", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  rounds = bench_arg(argc, argv, "rounds", quick ? 60 : 1200);
  nthreads = bench_arg(argc, argv, "threads", 3);
  w0 = bench_arg(argc, argv, "w0", 2000000);
  w1 = bench_arg(argc, argv, "w1", 1200000);
  if (nthreads < 1 || nthreads > MAX_THREADS) {
    fprintf(stderr, "over_barrier: threads must be 1..%d\n", MAX_THREADS);
    return 2;
  }
  pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);

  double start = bench_now();
  pthread_t th[MAX_THREADS];
  for (long k = 0; k < nthreads; k++) pthread_create(&th[k], NULL, worker, (void *)(intptr_t)k);
  uint64_t sum = 0;
  for (long k = 0; k < nthreads; k++) {
    pthread_join(th[k], NULL);
    sum ^= results[k];
  }
  pthread_barrier_destroy(&barrier);
  bench_report("over_barrier", bench_now() - start, rounds, sum);
  return 0;
}
