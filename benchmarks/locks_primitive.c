/*
 * locks_primitive: improper primitive (SyncPerf's fluidanimate-I). A grid of
 * `cells` cells, each with its own mutex (all initialized on one line), is
 * updated by `threads` threads. Each operation works `outside` steps on its
 * own (line OUTSIDE), picks a random cell, and adds to it under the cell's
 * lock: a critical section of two instructions (line ADD).
 *
 * The bug is the default atomic=0: tens of millions of acquisitions a second
 * over thousands of locks, none contended, each held for a few instructions
 * (coz locks: improper-primitive, Q4; no single lock stands out, the call
 * site does). The fix is atomic=1: one atomic add instead of lock, add,
 * unlock. benchmarks/locks.py measures the gain on the machine at hand.
 *
 * Usage: locks_primitive [threads=N] [ops=N] [cells=N] [atomic=0|1]
 *                        [outside=STEPS] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define MAX_THREADS 64

struct cell {
  pthread_mutex_t lock;
  uint64_t density;
};

static struct cell *grid;
static long ops, ncells, outside, atomic;

static void *worker(void *arg) {
  uint64_t x = 1009 + (uint64_t)(uintptr_t)arg * 2027;
  for (long n = 0; n < ops; n++) {
    BENCH_SPIN(x, outside); /* KEY:OUTSIDE */
    struct cell *c = &grid[(x >> 33) % (uint64_t)ncells];
    if (atomic) {
      __atomic_fetch_add(&c->density, 1, __ATOMIC_RELAXED); /* KEY:ATOMIC */
    } else {
      pthread_mutex_lock(&c->lock); /* KEY:LOCK */
      c->density++; /* KEY:ADD */
      pthread_mutex_unlock(&c->lock);
    }
    COZ_PROGRESS_NAMED("locks_primitive.op");
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"threads", "ops", "cells", "atomic", "outside", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long threads = bench_arg(argc, argv, "threads", 2);
  ops = bench_arg(argc, argv, "ops", quick ? 200000 : 15000000);
  ncells = bench_arg(argc, argv, "cells", 4096);
  atomic = bench_arg(argc, argv, "atomic", 0);
  outside = bench_arg(argc, argv, "outside", 12);
  if (threads < 1 || threads > MAX_THREADS || ncells < 1 || atomic > 1) {
    fprintf(stderr, "locks_primitive: threads must be 1..%d, cells >= 1, atomic 0 or 1\n",
            MAX_THREADS);
    return 2;
  }
  grid = calloc((size_t)ncells, sizeof *grid);
  if (!grid) return 1;
  for (long i = 0; i < ncells; i++) pthread_mutex_init(&grid[i].lock, NULL);

  double start = bench_now();
  pthread_t th[MAX_THREADS];
  for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
  for (long t = 0; t < threads; t++) pthread_join(th[t], NULL);
  uint64_t total = 0;
  for (long i = 0; i < ncells; i++) total += grid[i].density;
  if (total != (uint64_t)(threads * ops)) {
    fprintf(stderr, "locks_primitive: %llu additions counted, %ld expected\n",
            (unsigned long long)total, threads * ops);
    return 1;
  }
  bench_report("locks_primitive", bench_now() - start, threads * ops, total);
  free(grid);
  return 0;
}
