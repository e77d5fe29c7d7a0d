/* raw_sigblock: one thread works 0.3 s of its CPU time, blocks every signal
 * with the rt_sigprocmask system call itself (not through the C library,
 * whose calls the runtime interposes: Go's runtime and some static code do
 * this), works 3 s of CPU time so, reads how many signals are queued for
 * its user (SigQ in /proc/self/status), unblocks, and works 1.5 s more.
 * Prints {"queued":N,"limit":L,"after_cpu_ms":A} at the end. */
#include <coz.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void before(double ms) {
  double end = cpu_ms() + ms;
  while (cpu_ms() < end) {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i * 40503u; /* PHASE_BEFORE */
    COZ_PROGRESS;
  }
}

static void blocked(double ms) {
  double end = cpu_ms() + ms;
  while (cpu_ms() < end) {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i * 40503u; /* PHASE_BLOCKED */
    COZ_PROGRESS;
  }
}

static void after(double ms) {
  double end = cpu_ms() + ms;
  while (cpu_ms() < end) {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i * 40503u; /* PHASE_AFTER */
    COZ_PROGRESS;
  }
}

int main(void) {
  before(300);
  unsigned long all = ~0ul, none = 0;
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8) != 0) return 2;
  blocked(3000);
  long queued = -1, limit = -1;
  FILE* f = fopen("/proc/self/status", "re");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "SigQ:", 5)) sscanf(line + 5, "%ld/%ld", &queued, &limit);
  if (f) fclose(f);
  if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8) != 0) return 3;
  double a = cpu_ms();
  after(1500);
  printf("{\"queued\":%ld,\"limit\":%ld,\"after_cpu_ms\":%.0f}\n", queued, limit, cpu_ms() - a);
  return 0;
}
