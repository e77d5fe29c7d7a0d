/*
 * offcpu_pipe: a reader of a pipe fed by a slower process. A child process
 * (fork) writes one byte per item into a pipe after w spin steps of its own;
 * the parent reads each byte on line READ, then spends r spin steps on line
 * CONSUME (r < w); one progress point per item, in the parent.
 *
 * Known answer: the writer sets the pace, so the reader waits about w - r
 * per item in read(). Shortening that wait by x (a faster writer: w' =
 * w - x (w - r)) gives x times the wait's share of the run (about 0.5 x
 * with the defaults). The parent times its reads ("parts": READ), so a
 * script can check how much the wait really shrank. The wait is for
 * another process, not a thread of this one: I/O in the blocked sense.
 * The writer prints its own CPU time and run-queue wait ({"schedstat":
 * "writer", ...}) before it exits: on a busy machine its pace is not w.
 *
 * Usage: offcpu_pipe [items=N] [w=STEPS] [r=STEPS] [--short]
 */
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "coz.h"

int main(int argc, char **argv) {
  static const char *const names[] = {"items", "w", "r", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long items = bench_arg(argc, argv, "items", quick ? 150 : 1500);
  long w = bench_arg(argc, argv, "w", 1200000);
  long r = bench_arg(argc, argv, "r", 600000);
  int fds[2];
  if (pipe(fds) != 0) {
    perror("offcpu_pipe: pipe");
    return 1;
  }
  double start = bench_now();
  pid_t child = fork();
  if (child < 0) {
    perror("offcpu_pipe: fork");
    return 1;
  }
  if (child == 0) {
    close(fds[0]);
    uint64_t y = 524287;
    for (long i = 0; i < items; i++) {
      BENCH_SPIN(y, w); /* KEY:WRITER */
      char b = (char)y;
      if (write(fds[1], &b, 1) != 1) _exit(1);
    }
    bench_report_schedstat("writer"); /* did other work hold the writer up? */
    _exit(0);
  }
  close(fds[1]);
  uint64_t x = 131071;
  double waited = 0;
  for (long i = 0; i < items; i++) {
    char b;
    double t0 = bench_now();
    if (read(fds[0], &b, 1) != 1) return 1; /* KEY:READ */
    waited += bench_now() - t0;
    x ^= (uint64_t)(unsigned char)b;
    BENCH_SPIN(x, r); /* KEY:CONSUME */
    COZ_PROGRESS_NAMED("offcpu_pipe.item");
  }
  int status;
  waitpid(child, &status, 0);
  static const char *const parts[] = {"READ"};
  bench_report_parts("offcpu_pipe", bench_now() - start, items, x, 1, parts, &waited);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
