/* The COZ paper's example: each round, the main thread starts thread LONG
 * (line LONG) and thread SHORT (line SHORT), joins both, and passes the
 * progress point "round". Both lines run the spin.h kernel.
 * Known answer: speeding SHORT does nothing (the round waits for LONG);
 * speeding LONG by x shortens the round by x times LONG's time until LONG is
 * as short as SHORT, then no more. Starting and joining the threads dilutes
 * the gain: the tests measure the real curve by running this program with
 * less work on one line instead of assuming it.
 *
 * Work is given in microseconds of CPU, turned into steps of the kernel by a
 * calibration at start (the fastest of a few timed runs of the kernel, in
 * thread CPU time), so that rounds last about as long on any machine, and the
 * program runs rounds for MS milliseconds of wall time.
 *
 * With several LONG_US SHORT_US pairs (settings), the rounds take them in
 * turn (round i uses setting i modulo their number), so that every setting
 * meets the same machine conditions. Printed at exit, for each setting, the
 * wall time of its rounds (total and median round), the CPU time of each
 * thread on its line (CLOCK_THREAD_CPUTIME_ID), the time both threads
 * waited for a CPU meanwhile (schedstat), and the rest of each thread's wall
 * time on its line: time the profiler paused it (the lines never block), in ns:
 *   two_threads rounds=N steps_per_us=R checksum=C
 *   setting long_us=L short_us=S rounds=n wall_ns=W median_round_ns=M
 *           long_cpu_ns=.. short_cpu_ns=.. wait_ns=.. long_paused_ns=.. short_paused_ns=..
 *                                                    (one line per setting)
 * Usage: two_threads MS LONG_US SHORT_US [LONG_US SHORT_US]... */
#include <coz.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spin.h"

#define MAX_SETTINGS 8
#define MAX_TIMED_ROUNDS 65536 /* per setting: enough for minutes of rounds */

struct work {
  long steps;
  uint64_t x;
  uint64_t cpu_ns;   /* the thread's CPU time on its line */
  uint64_t wait_ns;  /* time it was runnable but waiting for a CPU meanwhile */
  uint64_t sleep_ns; /* and the rest of its wall time there: paused, asleep */
  /* A cache line of its own: threads writing next to each other would slow
   * each other down, and speeding one would really speed the other. */
} __attribute__((aligned(128)));

/* Time the calling thread has spent runnable but waiting for a CPU, in ns
 * (the second field of /proc/thread-self/schedstat); 0 if unreadable. Raw
 * system calls: the profiler's wrappers of open/read must not see these. */
static uint64_t thread_wait_ns(void) {
  char buf[128];
  long fd = syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long long run = 0, wait = 0;
  return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? wait : 0;
}

/* Splits the wall time since `wall0` (where the thread's CPU time was `cpu0`
 * and its wait `wait0`) into CPU time, waiting for a CPU, and the rest: the
 * line never blocks, so the rest is time the profiler paused the thread. */
static void account(struct work* w, uint64_t wall0, uint64_t cpu0, uint64_t wait0) {
  uint64_t wall = wall_ns() - wall0;
  w->cpu_ns = thread_cpu_ns() - cpu0;
  w->wait_ns = thread_wait_ns() - wait0;
  w->sleep_ns = wall > w->cpu_ns + w->wait_ns ? wall - w->cpu_ns - w->wait_ns : 0;
}

static void* run_long(void* arg) {
  struct work* w = arg;
  uint64_t x = w->x, wait0 = thread_wait_ns(), cpu0 = thread_cpu_ns(), wall0 = wall_ns();
  SPIN(x, w->steps); /* LINE_LONG */
  account(w, wall0, cpu0, wait0);
  w->x = x;
  return 0;
}

static void* run_short(void* arg) {
  struct work* w = arg;
  uint64_t x = w->x, wait0 = thread_wait_ns(), cpu0 = thread_cpu_ns(), wall0 = wall_ns();
  SPIN(x, w->steps); /* LINE_SHORT */
  account(w, wall0, cpu0, wait0);
  w->x = x;
  return 0;
}

uint64_t calibration_sink_104729;

static int by_value(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v); 0 when n is 0. */
static uint64_t median(uint64_t* v, uint64_t n) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Steps of the kernel per microsecond of this thread's CPU time: the fastest
 * of five timed runs of 1,000,000 steps (about 5 ms in all). */
static double calibrate(void) {
  const long steps = 1000000;
  uint64_t best = UINT64_MAX, x = 104729;
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = thread_cpu_ns();
    SPIN(x, steps);
    uint64_t t = thread_cpu_ns() - t0;
    if (t < best) best = t;
  }
  calibration_sink_104729 = x;
  return (double)steps * 1000.0 / (double)(best ? best : 1);
}

int main(int argc, char** argv) {
  if (argc < 4 || (argc - 2) % 2 != 0 || (argc - 2) / 2 > MAX_SETTINGS) {
    fprintf(stderr, "usage: two_threads MS LONG_US SHORT_US [LONG_US SHORT_US]... (at most %d pairs)\n",
            MAX_SETTINGS);
    return 2;
  }
  uint64_t run_ns = strtoull(argv[1], 0, 10) * 1000000ull;
  double rate = calibrate();
  int settings = (argc - 2) / 2;
  long long_us[MAX_SETTINGS], short_us[MAX_SETTINGS];
  uint64_t setting_rounds[MAX_SETTINGS] = {0}, setting_wall[MAX_SETTINGS] = {0};
  uint64_t setting_long_cpu[MAX_SETTINGS] = {0}, setting_short_cpu[MAX_SETTINGS] = {0};
  uint64_t setting_wait[MAX_SETTINGS] = {0}, setting_long_sleep[MAX_SETTINGS] = {0};
  uint64_t setting_short_sleep[MAX_SETTINGS] = {0};
  static uint64_t round_ns[MAX_SETTINGS][MAX_TIMED_ROUNDS];
  for (int s = 0; s < settings; s++) {
    long_us[s] = atol(argv[2 + 2 * s]);
    short_us[s] = atol(argv[3 + 2 * s]);
  }
  static struct work w_long = {0, 6151, 0, 0, 0}, w_short = {0, 6163, 0, 0, 0};
  uint64_t start = wall_ns(), now = start, rounds = 0;
  while (now - start < run_ns) {
    int s = (int)(rounds % (uint64_t)settings);
    w_long.steps = (long)(long_us[s] * rate);
    w_short.steps = (long)(short_us[s] * rate);
    pthread_t t1, t2;
    pthread_create(&t1, 0, run_long, &w_long);
    pthread_create(&t2, 0, run_short, &w_short);
    pthread_join(t1, 0);
    pthread_join(t2, 0);
    COZ_PROGRESS_NAMED("round");
    uint64_t end = wall_ns();
    if (setting_rounds[s] < MAX_TIMED_ROUNDS) round_ns[s][setting_rounds[s]] = end - now;
    setting_rounds[s]++;
    setting_wall[s] += end - now;
    setting_long_cpu[s] += w_long.cpu_ns;
    setting_short_cpu[s] += w_short.cpu_ns;
    setting_wait[s] += w_long.wait_ns + w_short.wait_ns;
    setting_long_sleep[s] += w_long.sleep_ns;
    setting_short_sleep[s] += w_short.sleep_ns;
    now = end;
    rounds++;
  }
  printf("two_threads rounds=%llu steps_per_us=%.1f checksum=%llu\n", (unsigned long long)rounds, rate,
         (unsigned long long)(w_long.x ^ w_short.x));
  for (int s = 0; s < settings; s++)
    printf(
        "setting long_us=%ld short_us=%ld rounds=%llu wall_ns=%llu median_round_ns=%llu long_cpu_ns=%llu "
        "short_cpu_ns=%llu wait_ns=%llu long_paused_ns=%llu short_paused_ns=%llu\n",
        long_us[s], short_us[s], (unsigned long long)setting_rounds[s], (unsigned long long)setting_wall[s],
        (unsigned long long)median(round_ns[s], setting_rounds[s] < MAX_TIMED_ROUNDS ? setting_rounds[s] : MAX_TIMED_ROUNDS),
        (unsigned long long)setting_long_cpu[s], (unsigned long long)setting_short_cpu[s],
        (unsigned long long)setting_wait[s], (unsigned long long)setting_long_sleep[s],
        (unsigned long long)setting_short_sleep[s]);
  return 0;
}
