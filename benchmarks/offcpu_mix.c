/*
 * offcpu_mix: CPU work beside waits, the CPU line being the bottleneck. Each
 * round the main thread computes c spin steps on line CPU, then sleeps
 * sleep_us on line SLEEP; meanwhile a side thread sleeps on line SIDE_SLEEP
 * for side_permille/1000 of the CPU time of the default CPU phase (1.5M
 * steps, timed once at start with the thread's CPU clock: so the side sleep
 * stays shorter than the main thread's round on any CPU and under any
 * profiler, and does not change when c does). Both meet at a barrier; one
 * progress point per round.
 *
 * Known answers:
 *   - CPU by x: the round is max(c (1 - x) + sleep, side): a gain of about
 *     0.85 x until the side sleep sets the pace (x about 0.35 here), then
 *     flat (about 0.3);
 *   - SIDE_SLEEP: off the critical path, shortening it gains nothing
 *     (answer 0), although it takes about 80% of the side thread's time
 *     and about half of all the threads' time;
 *   - SLEEP: on the critical path, x times its share.
 * The program times the sleeps ("parts": SLEEP, SIDE_SLEEP).
 *
 * Usage: offcpu_mix [rounds=N] [c=STEPS] [sleep_us=N] [side_permille=N] [--short]
 */
#include <pthread.h>
#include <time.h>

#include "bench.h"
#include "coz.h"

#define REF_STEPS 1500000L /* the default c */

static pthread_barrier_t start_bar, end_bar;
static long rounds;
static struct timespec side_ts;
static double side_slept;

static void *side(void *arg) {
  (void)arg;
  for (long i = 0; i < rounds; i++) {
    pthread_barrier_wait(&start_bar);
    double t0 = bench_now();
    if (side_ts.tv_sec || side_ts.tv_nsec) nanosleep(&side_ts, NULL); /* KEY:SIDE_SLEEP */
    side_slept += bench_now() - t0;
    pthread_barrier_wait(&end_bar);
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"rounds", "c", "sleep_us", "side_permille", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  rounds = bench_arg(argc, argv, "rounds", quick ? 100 : 1000);
  long c = bench_arg(argc, argv, "c", REF_STEPS);
  long sleep_us = bench_arg(argc, argv, "sleep_us", 300);
  long permille = bench_arg(argc, argv, "side_permille", 800);
  struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};

  /* The default CPU phase's own CPU time: the fastest of 5. */
  uint64_t x = 4093;
  double phase = 1e9;
  for (int k = 0; k < 5; k++) {
    double t0 = bench_thread_cpu();
    BENCH_SPIN(x, REF_STEPS);
    double t = bench_thread_cpu() - t0;
    if (t < phase) phase = t;
  }
  double side_s = phase * (double)permille / 1000.0;
  side_ts.tv_sec = (time_t)side_s;
  side_ts.tv_nsec = (long)((side_s - (double)side_ts.tv_sec) * 1e9);
  pthread_barrier_init(&start_bar, NULL, 2);
  pthread_barrier_init(&end_bar, NULL, 2);

  double start = bench_now(), slept = 0;
  pthread_t th;
  pthread_create(&th, NULL, side, NULL);
  for (long i = 0; i < rounds; i++) {
    pthread_barrier_wait(&start_bar);
    BENCH_SPIN(x, c); /* KEY:CPU */
    double t0 = bench_now();
    if (sleep_us) nanosleep(&ts, NULL); /* KEY:SLEEP */
    slept += bench_now() - t0;
    pthread_barrier_wait(&end_bar);
    COZ_PROGRESS_NAMED("offcpu_mix.round");
  }
  pthread_join(th, NULL);
  static const char *const parts[] = {"SLEEP", "SIDE_SLEEP"};
  double secs[] = {slept, side_slept};
  bench_report_parts("offcpu_mix", bench_now() - start, rounds, x, 2, parts, secs);
  return 0;
}
