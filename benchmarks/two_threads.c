/*
 * two_threads: the example of the COZ paper (section 2). Each round starts
 * two threads, thread A runs line A (cost a), thread B runs line B (cost
 * b < a), and the main thread joins both; one progress point per round.
 *
 * With persistent=1 the two threads are started once and meet at a
 * pthread barrier at the end of each round instead (no thread creation
 * cost; rounds of a few milliseconds test how fast delays reach the other
 * thread).
 *
 * Known answer (defaults a=8000000, b=4800000 spin steps, b = 0.6 a; with
 * persistent=1 use a=2000000 b=1200000 for 2 ms rounds):
 *   - speeding line B by any amount: 0% program speedup (A is the critical path);
 *   - speeding line A by x: program speedup min(x, 1 - b/a) = min(x, 40%),
 *     i.e. 25% at x=25%, 40% at x=50% and x=75% (it stops where A equals B).
 *
 * Usage: two_threads [rounds=N] [a=STEPS] [b=STEPS] [persistent=0|1] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

static long cost_a, cost_b, rounds, persistent;
static uint64_t result_a, result_b;
static pthread_barrier_t round_end;

static void *thread_a(void *arg) {
  uint64_t x = (uintptr_t)arg;
  for (long r = 0; r < (persistent ? rounds : 1); r++) {
    BENCH_SPIN(x, cost_a); /* KEY:A */
    if (persistent) {
      pthread_barrier_wait(&round_end);
      COZ_PROGRESS_NAMED("two_threads.round");
    }
  }
  result_a += x;
  return NULL;
}

static void *thread_b(void *arg) {
  uint64_t x = (uintptr_t)arg;
  for (long r = 0; r < (persistent ? rounds : 1); r++) {
    BENCH_SPIN(x, cost_b); /* KEY:B */
    if (persistent) pthread_barrier_wait(&round_end);
  }
  result_b += x;
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"rounds", "a", "b", "persistent", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  rounds = bench_arg(argc, argv, "rounds", quick ? 15 : 300);
  cost_a = bench_arg(argc, argv, "a", 8000000);
  cost_b = bench_arg(argc, argv, "b", 4800000);
  persistent = bench_arg(argc, argv, "persistent", 0);

  double start = bench_now();
  if (persistent) {
    pthread_t ta, tb;
    pthread_barrier_init(&round_end, NULL, 2);
    pthread_create(&ta, NULL, thread_a, (void *)(uintptr_t)7919);
    pthread_create(&tb, NULL, thread_b, (void *)(uintptr_t)104729);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
  }
  for (long r = 0; !persistent && r < rounds; r++) {
    pthread_t ta, tb;
    pthread_create(&ta, NULL, thread_a, (void *)(uintptr_t)(r + 7919));
    pthread_create(&tb, NULL, thread_b, (void *)(uintptr_t)(r + 104729));
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    COZ_PROGRESS_NAMED("two_threads.round");
  }
  bench_report("two_threads", bench_now() - start, rounds, result_a ^ result_b);
  return 0;
}
