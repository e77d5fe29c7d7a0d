/*
 * locks_granularity: improper granularity (SyncPerf's memcached-II). A
 * chained hash table of 4099 buckets is shared by `threads` threads; the
 * buckets are guarded by `stripes` locks (bucket b by lock b % stripes), all
 * initialized on one line. Each operation picks a key, locks its stripe, finds
 * the key's entry and updates it (line TABLE: `inside` steps of work on the
 * entry), unlocks, then works `outside` steps on its own (line OUTSIDE).
 *
 * The bug is the default, stripes=1: one lock over the whole table, around
 * three quarters of each operation's work, so that the lock, not the CPUs,
 * bounds the program from two CPUs on; its 4 threads (the default) wait for
 * it whether they run side by side or take turns on a busy machine's CPUs
 * (coz locks: improper-granularity, Q2). The fix is stripes=64: the same
 * critical sections under 64 locks, which threads rarely share.
 * benchmarks/locks.py measures the gain on the machine at hand.
 *
 * Usage: locks_granularity [threads=N] [ops=N] [stripes=N] [inside=STEPS]
 *                          [outside=STEPS] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define BUCKETS 4099
#define KEYS 16411
#define MAX_THREADS 64
#define MAX_STRIPES 1024

struct entry {
  uint64_t key, value;
  struct entry *next;
};

static struct entry *table[BUCKETS];
static pthread_mutex_t stripe[MAX_STRIPES];
static long nstripes, ops, inside, outside;

static void *worker(void *arg) {
  uint64_t x = 7919 + (uint64_t)(uintptr_t)arg * 104729;
  for (long n = 0; n < ops; n++) {
    uint64_t key = (x >> 29) % KEYS;
    unsigned b = (unsigned)(key % BUCKETS);
    pthread_mutex_t *m = &stripe[b % (unsigned)nstripes];
    pthread_mutex_lock(m);
    struct entry *e = table[b];
    while (e && e->key != key) e = e->next;
    uint64_t v = e->value;
    BENCH_SPIN(v, inside); /* KEY:TABLE */
    e->value = v;
    pthread_mutex_unlock(m);
    BENCH_SPIN(x, outside); /* KEY:OUTSIDE */
    COZ_PROGRESS_NAMED("locks_granularity.op");
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"threads", "ops", "stripes", "inside", "outside", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long threads = bench_arg(argc, argv, "threads", 4);
  ops = bench_arg(argc, argv, "ops", quick ? 5000 : 50000);
  nstripes = bench_arg(argc, argv, "stripes", 1);
  inside = bench_arg(argc, argv, "inside", 3000);
  outside = bench_arg(argc, argv, "outside", 1000);
  if (threads < 1 || threads > MAX_THREADS || nstripes < 1 || nstripes > MAX_STRIPES) {
    fprintf(stderr, "locks_granularity: threads must be 1..%d and stripes 1..%d\n", MAX_THREADS,
            MAX_STRIPES);
    return 2;
  }
  for (long s = 0; s < nstripes; s++) pthread_mutex_init(&stripe[s], NULL);
  static struct entry pool[KEYS];
  for (long k = 0; k < KEYS; k++) {
    pool[k].key = (uint64_t)k;
    pool[k].next = table[k % BUCKETS];
    table[k % BUCKETS] = &pool[k];
  }

  double start = bench_now();
  pthread_t th[MAX_THREADS];
  for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
  for (long t = 0; t < threads; t++) pthread_join(th[t], NULL);
  uint64_t sum = 0;
  for (long k = 0; k < KEYS; k++) sum += pool[k].value;
  bench_report("locks_granularity", bench_now() - start, threads * ops, sum);
  return 0;
}
