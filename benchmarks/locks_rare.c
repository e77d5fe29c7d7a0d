/*
 * locks_rare: a rare lock around a long computation (SyncPerf's canneal: Q1).
 * Each of `threads` threads does `rounds` rounds: `outside` steps of its own
 * work (line OUTSIDE), then takes the one global lock to draw a new seed from
 * a shared counter. Deriving the generator from the seed (line DERIVE:
 * `inside` steps) touches nothing shared, yet the bug (shrink=0, the default)
 * does it inside the critical section.
 *
 * With the default sizes the lock is taken a few hundred times a second at
 * most (each critical section is millions of steps, serialized), found taken
 * most of the time, and held for milliseconds (coz locks:
 * improper-granularity, Q1). The fix is shrink=1: only the counter update
 * stays under the lock. benchmarks/locks.py measures the gain on the machine
 * at hand.
 *
 * Usage: locks_rare [threads=N] [rounds=N] [inside=STEPS] [outside=STEPS]
 *                   [shrink=0|1] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define MAX_THREADS 64

static pthread_mutex_t seed_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seed = 1;
static long rounds, inside, outside, shrink;

static void *worker(void *arg) {
  uint64_t x = 4409 + (uint64_t)(uintptr_t)arg * 9001, sum = 0;
  for (long r = 0; r < rounds; r++) {
    BENCH_SPIN(x, outside); /* KEY:OUTSIDE */
    uint64_t g;
    if (shrink) {
      pthread_mutex_lock(&seed_lock);
      g = seed++;
      pthread_mutex_unlock(&seed_lock);
      BENCH_SPIN(g, inside); /* KEY:DERIVE_OUT */
    } else {
      pthread_mutex_lock(&seed_lock);
      g = seed++;
      BENCH_SPIN(g, inside); /* KEY:DERIVE */
      pthread_mutex_unlock(&seed_lock);
    }
    sum += g;
    COZ_PROGRESS_NAMED("locks_rare.round");
  }
  return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"threads", "rounds", "inside", "outside", "shrink", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long threads = bench_arg(argc, argv, "threads", 2);
  rounds = bench_arg(argc, argv, "rounds", quick ? 8 : 120);
  inside = bench_arg(argc, argv, "inside", 3000000);
  outside = bench_arg(argc, argv, "outside", 1000000);
  shrink = bench_arg(argc, argv, "shrink", 0);
  if (threads < 1 || threads > MAX_THREADS || shrink > 1) {
    fprintf(stderr, "locks_rare: threads must be 1..%d and shrink 0 or 1\n", MAX_THREADS);
    return 2;
  }

  double start = bench_now();
  pthread_t th[MAX_THREADS];
  for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
  uint64_t sum = 0;
  for (long t = 0; t < threads; t++) {
    void *r;
    pthread_join(th[t], &r);
    sum += (uint64_t)(uintptr_t)r;
  }
  bench_report("locks_rare", bench_now() - start, threads * rounds, sum);
  return 0;
}
