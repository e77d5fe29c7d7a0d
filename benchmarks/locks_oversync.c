/*
 * locks_oversync: over-synchronization (SyncPerf section 2.1.3, case 1: a
 * lock around thread-local data). Each of `threads` threads keeps its own
 * accumulator, guarded by a mutex of its own (all initialized on one line)
 * "in case" another thread reads it; none ever does. Each operation computes
 * `outside` steps (line OUTSIDE), then locks its accumulator, adds the result
 * (line LOCAL), and unlocks.
 *
 * The bug is the default, lock=1: millions of acquisitions a second, none
 * contended, each lock used by a single thread (coz locks:
 * over-synchronization, Q4). The fix is lock=0: the same additions without
 * the lock. benchmarks/locks.py measures the gain on the machine at hand.
 *
 * Usage: locks_oversync [threads=N] [ops=N] [lock=0|1] [outside=STEPS] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define MAX_THREADS 64

struct accumulator {
  pthread_mutex_t lock;
  uint64_t sum, count;
  char pad[64];
};

static struct accumulator acc[MAX_THREADS];
static long ops, outside, locked;

static void *worker(void *arg) {
  struct accumulator *a = &acc[(uintptr_t)arg];
  uint64_t x = 6151 + (uint64_t)(uintptr_t)arg * 3079;
  for (long n = 0; n < ops; n++) {
    BENCH_SPIN(x, outside); /* KEY:OUTSIDE */
    if (locked) pthread_mutex_lock(&a->lock); /* KEY:LOCK */
    a->sum += x >> 7, a->count++; /* KEY:LOCAL */
    if (locked) pthread_mutex_unlock(&a->lock);
    COZ_PROGRESS_NAMED("locks_oversync.op");
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"threads", "ops", "lock", "outside", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long threads = bench_arg(argc, argv, "threads", 2);
  ops = bench_arg(argc, argv, "ops", quick ? 200000 : 20000000);
  locked = bench_arg(argc, argv, "lock", 1);
  outside = bench_arg(argc, argv, "outside", 12);
  if (threads < 1 || threads > MAX_THREADS || locked > 1) {
    fprintf(stderr, "locks_oversync: threads must be 1..%d and lock 0 or 1\n", MAX_THREADS);
    return 2;
  }
  for (long t = 0; t < threads; t++) pthread_mutex_init(&acc[t].lock, NULL);

  double start = bench_now();
  pthread_t th[MAX_THREADS];
  for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
  for (long t = 0; t < threads; t++) pthread_join(th[t], NULL);
  uint64_t sum = 0;
  for (long t = 0; t < threads; t++) sum += acc[t].sum + acc[t].count;
  bench_report("locks_oversync", bench_now() - start, threads * ops, sum);
  return 0;
}
