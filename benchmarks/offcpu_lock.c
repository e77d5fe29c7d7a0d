/*
 * offcpu_lock: a thread waits on a lock held through another thread's long
 * critical section. Each round, thread A takes the mutex, lets B start (a
 * barrier), computes h spin steps on line HOLD while holding it, releases
 * it; B, started, waits for the mutex on line LOCK_WAIT (about all of A's
 * critical section), releases it at once, computes b spin steps on line
 * B_WORK and counts one progress point; both meet at a second barrier.
 *
 * Known answer: a round is about h + b, the lock wait about h. Shortening
 * the critical section by x (h' = (1 - x) h) shortens the wait by about
 * x h and the round by as much: x times the wait's share (about 0.6 x with
 * the defaults), for LOCK_WAIT as for HOLD. B times its lock waits
 * ("parts": LOCK_WAIT).
 *
 * Usage: offcpu_lock [rounds=N] [h=STEPS] [b=STEPS] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start_bar, end_bar;
static long rounds, h, b;
static uint64_t a_out;

static void *thread_a(void *arg) {
  (void)arg;
  uint64_t x = 65537;
  for (long i = 0; i < rounds; i++) {
    pthread_mutex_lock(&lock);
    pthread_barrier_wait(&start_bar);
    BENCH_SPIN(x, h); /* KEY:HOLD */
    pthread_mutex_unlock(&lock);
    pthread_barrier_wait(&end_bar);
  }
  a_out = x;
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"rounds", "h", "b", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  rounds = bench_arg(argc, argv, "rounds", quick ? 100 : 1000);
  h = bench_arg(argc, argv, "h", 1500000);
  b = bench_arg(argc, argv, "b", 1000000);
  pthread_barrier_init(&start_bar, NULL, 2);
  pthread_barrier_init(&end_bar, NULL, 2);

  double start = bench_now(), waited = 0;
  pthread_t th;
  pthread_create(&th, NULL, thread_a, NULL);
  uint64_t x = 257;
  for (long i = 0; i < rounds; i++) {
    pthread_barrier_wait(&start_bar);
    double t0 = bench_now();
    pthread_mutex_lock(&lock); /* KEY:LOCK_WAIT */
    waited += bench_now() - t0;
    pthread_mutex_unlock(&lock);
    BENCH_SPIN(x, b); /* KEY:B_WORK */
    COZ_PROGRESS_NAMED("offcpu_lock.round");
    pthread_barrier_wait(&end_bar);
  }
  pthread_join(th, NULL);
  static const char *const parts[] = {"LOCK_WAIT"};
  bench_report_parts("offcpu_lock", bench_now() - start, rounds, x ^ a_out, 1, parts, &waited);
  return 0;
}
