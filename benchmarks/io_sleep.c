/*
 * io_sleep: CPU work beside blocking waits. Each iteration the main thread
 * spends c on line CPU, then sends one byte through a pipe to a helper
 * thread and blocks in read() on line READ for the answer; the helper sleeps
 * `sleep_us` microseconds in nanosleep() on line SLEEP before answering.
 * One progress point per iteration.
 *
 * Known answer (defaults c=1000000 spin steps, about 1.3 ms here, and
 * sleep_us=800): an iteration is c + sleep_us + wake-up costs, so
 *   - speeding CPU by x gives x times CPU's share of the wall time
 *     (about 0.6 x: 15%, 30%, 45% at 25/50/75%);
 *   - shortening the sleep by x gives x times the sleep's share (about
 *     0.4 x). A sampling profiler sees no CPU time on SLEEP or READ, so it
 *     cannot predict this one: it is here to show that blind spot and to
 *     check that blocking does not distort the CPU line's prediction.
 *
 * Usage: io_sleep [iters=N] [c=STEPS] [sleep_us=N] [--short]
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "coz.h"

static int to_helper[2], from_helper[2];
static long sleep_us;

static void *helper(void *arg) {
  (void)arg;
  char byte;
  while (read(to_helper[0], &byte, 1) == 1 && byte == 'q') {
    struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
    nanosleep(&ts, NULL); /* KEY:SLEEP */
    if (write(from_helper[1], "a", 1) != 1) break;
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"iters", "c", "sleep_us", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long iters = bench_arg(argc, argv, "iters", quick ? 150 : 1500);
  long c = bench_arg(argc, argv, "c", 1000000);
  sleep_us = bench_arg(argc, argv, "sleep_us", 800);
  if (pipe(to_helper) != 0 || pipe(from_helper) != 0) {
    perror("io_sleep: pipe");
    return 1;
  }

  double start = bench_now();
  pthread_t th;
  pthread_create(&th, NULL, helper, NULL);
  uint64_t x = 7340033;
  char byte;
  for (long i = 0; i < iters; i++) {
    BENCH_SPIN(x, c); /* KEY:CPU */
    if (write(to_helper[1], "q", 1) != 1) return 1;
    if (read(from_helper[0], &byte, 1) != 1) return 1; /* KEY:READ */
    COZ_PROGRESS_NAMED("io_sleep.iter");
  }
  if (write(to_helper[1], "x", 1) != 1) return 1;
  pthread_join(th, NULL);
  bench_report("io_sleep", bench_now() - start, iters, x);
  return 0;
}
