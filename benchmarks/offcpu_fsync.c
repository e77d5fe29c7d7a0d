/*
 * offcpu_fsync: file writes made durable. One thread; each iteration spends
 * c spin steps on line CPU (300k), writes 4 KiB to a file on line WRITE and, on
 * sync_permille of the iterations (evenly spread), fsync()s it on line
 * FSYNC; one progress point per iteration. The file is made in the current
 * directory and unlinked at once (it must be on a real disk: on tmpfs an
 * fsync costs nothing).
 *
 * Known answer: the fsync is on the critical path. Syncing on (1 - x) of
 * the iterations shortens the total time spent in fsync by about x (the
 * program times it: "parts": FSYNC), which gives x times the fsync's share
 * of the run. On the 2-core host here an fsync of 4 KiB takes about 0.12
 * ms; on a slow disk the defaults take longer (use iters=).
 *
 * Usage: offcpu_fsync [iters=N] [c=STEPS] [sync_permille=N] [--short]
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "bench.h"
#include "coz.h"

int main(int argc, char **argv) {
  static const char *const names[] = {"iters", "c", "sync_permille", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long iters = bench_arg(argc, argv, "iters", quick ? 200 : 2000);
  long c = bench_arg(argc, argv, "c", 300000);
  long permille = bench_arg(argc, argv, "sync_permille", 1000);
  char path[64];
  snprintf(path, sizeof path, "offcpu_fsync.%d.tmp", (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror("offcpu_fsync: open");
    return 1;
  }
  unlink(path);
  static char block[4096];
  memset(block, 'c', sizeof block);

  double start = bench_now(), synced = 0;
  uint64_t x = 8191;
  long done = 0;
  for (long i = 0; i < iters; i++) {
    BENCH_SPIN(x, c); /* KEY:CPU */
    block[i % sizeof block] = (char)x;
    if (pwrite(fd, block, sizeof block, (i % 256) * (long)sizeof block) != (ssize_t)sizeof block) return 1; /* KEY:WRITE */
    if ((i + 1) * permille / 1000 > done) {
      done++;
      double t0 = bench_now();
      if (fsync(fd) != 0) return 1; /* KEY:FSYNC */
      synced += bench_now() - t0;
    }
    COZ_PROGRESS_NAMED("offcpu_fsync.iter");
  }
  close(fd);
  static const char *const parts[] = {"FSYNC"};
  bench_report_parts("offcpu_fsync", bench_now() - start, iters, x, 1, parts, &synced);
  return 0;
}
