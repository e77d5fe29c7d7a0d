/* A program that takes over the low descriptor numbers mid-run, as daemons
 * and shells do: dup2 of /dev/null onto 3..63, then closes them all, then
 * computes with a progress point. Prints the CPU time it used.
 * Usage: hostile_fds SECONDS [close_range|closefrom|close_loop]
 * With a second argument every descriptor from 3 up is closed at once that
 * way, one of the program's own at 4000 included (it must be closed: printed
 * as high_closed=1). close_loop calls close() on every number from 3 to the
 * open-file soft limit, as daemons do, and prints how many calls succeeded
 * (closed=N) and how many failed with anything but EBADF (errors=N).
 * With HOSTILE_FDS_STDERR=FILE in its environment, it then puts FILE on
 * descriptor 2, as a daemon does with its log file (or an inetd service
 * with its client's socket), and writes one line of its own there at the
 * end: the file must hold that line only. */
#define _GNU_SOURCE
#include <coz.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  int devnull = open("/dev/null", O_RDWR);
  for (int fd = 3; fd < 64; fd++)
    if (fd != devnull) dup2(devnull, fd);
  int high_closed = -1, closed = -1, errors = -1;
  if (argc > 2) {
    dup2(devnull, 4000);
    if (!strcmp(argv[2], "closefrom")) {
      closefrom(3);
    } else if (!strcmp(argv[2], "close_loop")) {
      struct rlimit rl;
      getrlimit(RLIMIT_NOFILE, &rl);
      closed = errors = 0;
      for (long fd = 3; fd < (long)rl.rlim_cur; fd++) {
        if (close((int)fd) == 0) closed++;
        else if (errno != EBADF) errors++;
      }
    } else {
      close_range(3, ~0U, 0);
    }
    high_closed = fcntl(4000, F_GETFD) == -1 && errno == EBADF;
  }
  for (int fd = 3; fd < 64; fd++) close(fd);
  const char* log = getenv("HOSTILE_FDS_STDERR");
  if (log) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
  }
  unsigned long x = 7933;
  double end = now() + seconds;
  while (now() < end) {
    for (int i = 0; i < 20000; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* HOT */
    COZ_PROGRESS_NAMED("round");
  }
  if (log) fprintf(stderr, "hostile_fds: its own line\n");
  struct timespec cpu;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  printf("hostile_fds cpu_ms=%ld high_closed=%d closed=%d errors=%d\n",
         (long)(cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000), high_closed, closed, errors);
  return 0;
}
