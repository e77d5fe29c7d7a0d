/* Stops itself mid-run, as Ctrl-Z, a debugger or a frozen container would:
 * works MS milliseconds with a progress point, then forks a helper that
 * sends it SIGCONT after STOP_MS milliseconds, raises SIGSTOP, and works MS
 * milliseconds more. The helper is a child that only sleeps and signals.
 * Usage: stop_cont MS STOP_MS
 * Prints the wall time it stood still, as it measured it around the stop,
 * the CPU time it used, and the wall time of main:
 *   stop_cont stopped_ns=N cpu_ms=N wall_ns=N */
#include <coz.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static volatile unsigned long sink;

static void work(unsigned long long ms) {
  unsigned long long end = now_ns() + ms * 1000000ull;
  while (now_ns() < end) {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i * 2654435761u; /* HOT */
    COZ_PROGRESS_NAMED("round");
  }
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  unsigned long long ms = strtoull(argv[1], 0, 10), stop_ms = strtoull(argv[2], 0, 10);
  unsigned long long start = now_ns();
  work(ms);
  pid_t parent = getpid();
  pid_t helper = fork();
  if (helper == 0) {
    struct timespec d = {(time_t)(stop_ms / 1000), (long)(stop_ms % 1000) * 1000000L};
    nanosleep(&d, 0);
    kill(parent, SIGCONT);
    _exit(0);
  }
  unsigned long long before = now_ns();
  raise(SIGSTOP);
  unsigned long long stopped = now_ns() - before;
  waitpid(helper, 0, 0);
  work(ms);
  struct timespec cpu;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  printf("stop_cont stopped_ns=%llu cpu_ms=%lld wall_ns=%llu\n", stopped,
         (long long)cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000, now_ns() - start);
  return 0;
}
