/*
 * locks_asymmetric: asymmetric contention (SyncPerf's dedup-I). A table of 16
 * buckets, each with its own lock (all initialized on one line), shared by
 * `threads` threads (default 4: they wait for the hot bucket whether they run
 * side by side or take turns on a busy machine's CPUs). Each operation hashes
 * a random key to a bucket, locks
 * it, updates the bucket (line BUCKET: `inside` steps), unlocks, and works
 * `outside` steps on its own (line OUTSIDE).
 *
 * The bug is the default hash=0: the table once had 256 buckets and the hash
 * still reduces keys modulo 256, clamping what falls beyond the 16th bucket to
 * the last one; that bucket takes 241/256 of the operations and its lock is
 * contended while the other 15 barely are (coz locks: asymmetric-contention).
 * The fix is hash=1: keys modulo 16, every bucket alike.
 * benchmarks/locks.py measures the gain on the machine at hand.
 *
 * Usage: locks_asymmetric [threads=N] [ops=N] [hash=0|1] [inside=STEPS]
 *                         [outside=STEPS] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define BUCKETS 16
#define OLD_BUCKETS 256
#define MAX_THREADS 64

struct bucket {
  pthread_mutex_t lock;
  uint64_t items, value;
  char pad[64];
};

static struct bucket table[BUCKETS];
static long ops, inside, outside, good_hash;

static unsigned hash(uint64_t key) {
  if (good_hash) return (unsigned)(key % BUCKETS);
  unsigned h = (unsigned)(key % OLD_BUCKETS);
  return h < BUCKETS ? h : BUCKETS - 1;
}

static void *worker(void *arg) {
  uint64_t x = 2713 + (uint64_t)(uintptr_t)arg * 7207;
  for (long n = 0; n < ops; n++) {
    struct bucket *b = &table[hash(x >> 31)];
    pthread_mutex_lock(&b->lock);
    uint64_t v = b->value;
    BENCH_SPIN(v, inside); /* KEY:BUCKET */
    b->value = v, b->items++;
    pthread_mutex_unlock(&b->lock);
    BENCH_SPIN(x, outside); /* KEY:OUTSIDE */
    COZ_PROGRESS_NAMED("locks_asymmetric.op");
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"threads", "ops", "hash", "inside", "outside", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long threads = bench_arg(argc, argv, "threads", 4);
  ops = bench_arg(argc, argv, "ops", quick ? 50000 : 1000000);
  good_hash = bench_arg(argc, argv, "hash", 0);
  inside = bench_arg(argc, argv, "inside", 100);
  outside = bench_arg(argc, argv, "outside", 40);
  if (threads < 1 || threads > MAX_THREADS || good_hash > 1) {
    fprintf(stderr, "locks_asymmetric: threads must be 1..%d and hash 0 or 1\n", MAX_THREADS);
    return 2;
  }
  for (int b = 0; b < BUCKETS; b++) pthread_mutex_init(&table[b].lock, NULL);

  double start = bench_now();
  pthread_t th[MAX_THREADS];
  for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
  for (long t = 0; t < threads; t++) pthread_join(th[t], NULL);
  uint64_t items = 0;
  for (int b = 0; b < BUCKETS; b++) items += table[b].items;
  if (items != (uint64_t)(threads * ops)) {
    fprintf(stderr, "locks_asymmetric: %llu items counted, %ld expected\n", (unsigned long long)items,
            threads * ops);
    return 1;
  }
  bench_report("locks_asymmetric", bench_now() - start, threads * ops, items);
  return 0;
}
