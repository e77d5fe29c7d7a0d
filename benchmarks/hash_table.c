/*
 * hash_table: a chained hash table of 4099 buckets whose hash function is
 * poor: `key % spread` uses only `spread` buckets (default 60), so chains are
 * long and walking them (line CHAIN) dominates each lookup. Each lookup also
 * does some unrelated work on line MIX. One progress point per lookup.
 *
 * Known answer (defaults keys=6007, spread=60, lookups=6000000, mix=100):
 *   - the chain walk is about 2/3 of the run time;
 *   - speeding CHAIN by x is what a better hash does: spread/(1-x) buckets
 *     make chains (1-x) as long (spread=80, 120, 240 for x=25/50/75%).
 *     The program speedup is x times CHAIN's share of the time (about 2x/3),
 *     up to cache effects; accuracy.py measures it.
 *   - a good hash (spread=4099) removes nearly all of CHAIN.
 *
 * Usage: hash_table [keys=N] [spread=N] [lookups=N] [mix=STEPS] [--short]
 */
#include "bench.h"
#include "coz.h"

#define BUCKETS 4099

struct entry {
  uint64_t key;
  uint64_t value;
  struct entry *next;
};

static struct entry *table[BUCKETS];
static long spread;

static unsigned poor_hash(uint64_t key) { return (unsigned)(key % (uint64_t)spread); }

int main(int argc, char **argv) {
  static const char *const names[] = {"keys", "spread", "lookups", "mix", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long nkeys = bench_arg(argc, argv, "keys", 6007);
  spread = bench_arg(argc, argv, "spread", 60);
  long lookups = bench_arg(argc, argv, "lookups", quick ? 200000 : 6000000);
  long mix = bench_arg(argc, argv, "mix", 100);
  if (spread < 1 || spread > BUCKETS || nkeys < 1) {
    fprintf(stderr, "hash_table: spread must be 1..%d and keys >= 1\n", BUCKETS);
    return 2;
  }

  double start = bench_now();
  struct entry *pool = calloc((size_t)nkeys, sizeof *pool);
  if (!pool) return 1;
  /* Knuth multiplicative scrambling: keys look random, all distinct. */
  for (long i = 0; i < nkeys; i++) {
    struct entry *e = &pool[i];
    e->key = ((uint64_t)i * 2654435761u) & 0xffffffffu;
    e->value = (uint64_t)i;
    unsigned h = poor_hash(e->key);
    e->next = table[h];
    table[h] = e;
  }

  uint64_t x = 48611, found = 0;
  for (long n = 0; n < lookups; n++) {
    uint64_t want = (((uint64_t)(x >> 33) % (uint64_t)nkeys) * 2654435761u) & 0xffffffffu;
    struct entry *e = table[poor_hash(want)];
    while (e && e->key != want) e = e->next; /* KEY:CHAIN */
    found += e ? e->value : 0;
    BENCH_SPIN(x, mix); /* KEY:MIX */
    COZ_PROGRESS_NAMED("hash_table.lookup");
  }
  bench_report("hash_table", bench_now() - start, lookups, found);
  free(pool);
  return 0;
}
