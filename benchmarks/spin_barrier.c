/*
 * spin_barrier: threads meet every round at a hand-written spinning barrier
 * (an atomic arrival count and a generation number; waiters spin on line
 * SPIN, each spin step doing `pause` PAUSE instructions). Thread 0 spends
 * w0 on line WORK_SLOW per round, the other threads w1 on line WORK_FAST, so
 * the fast threads spin while thread 0 finishes. One progress point per round.
 *
 * Known answer (defaults threads=2, w0=1500000, w1=900000, pause=8):
 *   - speeding SPIN (fewer PAUSEs per spin step) never helps: about 0% on
 *     an idle 2-vCPU VM (-1% measured), NEGATIVE when the CPUs are shared
 *     (-62% at pause=4 under load: the harder spin steals from thread 0). A
 *     causal profile of SPIN must slope DOWNWARD (contention);
 *   - speeding WORK_SLOW by x gives min(x, 1 - w1/w0) = min(x, 40%);
 *   - speeding WORK_FAST gives 0%.
 *
 * Usage: spin_barrier [rounds=N] [threads=N] [w0=] [w1=] [pause=] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() __asm__ volatile("")
#endif

#define MAX_THREADS 64

static struct {
  long arrived;
  long gen;
} barrier;
static long nthreads, rounds, w0, w1, pause_steps;
static uint64_t results[MAX_THREADS];

static void barrier_wait(void) {
  long gen = __atomic_load_n(&barrier.gen, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&barrier.arrived, 1, __ATOMIC_ACQ_REL) == nthreads) {
    __atomic_store_n(&barrier.arrived, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&barrier.gen, gen + 1, __ATOMIC_RELEASE);
    return;
  }
  while (__atomic_load_n(&barrier.gen, __ATOMIC_ACQUIRE) == gen) for (long p = 0; p < pause_steps; p++) CPU_RELAX(); /* KEY:SPIN */
}

static void *worker(void *arg) {
  long id = (long)(intptr_t)arg;
  uint64_t x = 65537 + (uint64_t)id;
  for (long r = 0; r < rounds; r++) {
    if (id == 0) {
      BENCH_SPIN(x, w0); /* KEY:WORK_SLOW */
    } else {
      BENCH_SPIN(x, w1); /* KEY:WORK_FAST */
    }
    barrier_wait();
    if (id == 0) COZ_PROGRESS_NAMED("spin_barrier.round");
  }
  results[id] = x;
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"rounds", "threads", "w0", "w1", "pause", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  rounds = bench_arg(argc, argv, "rounds", quick ? 100 : 1500);
  nthreads = bench_arg(argc, argv, "threads", 2);
  w0 = bench_arg(argc, argv, "w0", 1500000);
  w1 = bench_arg(argc, argv, "w1", 900000);
  pause_steps = bench_arg(argc, argv, "pause", 8);
  if (nthreads < 1 || nthreads > MAX_THREADS) {
    fprintf(stderr, "spin_barrier: threads must be 1..%d\n", MAX_THREADS);
    return 2;
  }

  double start = bench_now();
  pthread_t th[MAX_THREADS];
  for (long k = 0; k < nthreads; k++) pthread_create(&th[k], NULL, worker, (void *)(intptr_t)k);
  uint64_t sum = 0;
  for (long k = 0; k < nthreads; k++) {
    pthread_join(th[k], NULL);
    sum ^= results[k];
  }
  bench_report("spin_barrier", bench_now() - start, rounds, sum);
  return 0;
}
