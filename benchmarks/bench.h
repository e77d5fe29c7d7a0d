/*
 * bench.h: helpers shared by the benchmark programs.
 *
 * - BENCH_SPIN(x, n): n dependent multiply-add steps on x. It is a macro so
 *   that every instruction of the loop is attributed to the source line that
 *   uses it (an inline function would be attributed to this header). Write
 *   each key line as ONE source line that carries a `KEY:name` marker
 *   comment; accuracy.py finds line numbers by those markers.
 * - name=value arguments (bench_arg), `--short` for smoke tests.
 * - bench_report(): one JSON line on standard output at the end of a run;
 *   bench_report_parts() adds "parts": the seconds the run spent in named
 *   parts (a wait, a call), timed by the program itself, so that a script
 *   can tell how much shorter a part really got when an argument shortened it.
 * - bench_report_schedstat(): a line {"schedstat": who, "run_ns", "wait_ns"}
 *   with the calling thread's CPU time and its time runnable but waiting for
 *   a CPU, as the scheduler counts them: for a process whose pace a test's
 *   known answer rests on (a forked writer), whether other work held it up.
 *
 * Plain C, no dependency beyond libc and pthreads.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

/* LCG constants (Knuth's MMIX): distinctive, and the chain cannot be folded. */
#define BENCH_SPIN(x, n)                                                    \
  for (long bench_i_ = 0; bench_i_ < (long)(n); bench_i_++) {              \
    (x) = (x) * 6364136223846793005ULL + 1442695040888963407ULL;            \
    __asm__ volatile("" : "+r"(x));                                         \
  }

/* Wall-clock seconds (CLOCK_MONOTONIC). */
static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Is `--short` among the arguments? */
static inline int bench_short(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--short") == 0) return 1;
  return 0;
}

/* Value of a `name=value` argument, or `def`. Unknown arguments are an error. */
static inline long bench_arg(int argc, char **argv, const char *name, long def) {
  size_t len = strlen(name);
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') {
      char *end;
      long v = strtol(argv[i] + len + 1, &end, 10);
      if (*end != '\0' || v < 0) {
        fprintf(stderr, "%s: bad value in '%s' (want a non-negative integer)\n", argv[0], argv[i]);
        exit(2);
      }
      return v;
    }
  }
  return def;
}

/* Reject arguments that are neither --short nor one of `names` (NULL-ended). */
static inline void bench_check_args(int argc, char **argv, const char *const *names) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--short") == 0) continue;
    int ok = 0;
    for (const char *const *n = names; *n; n++) {
      size_t len = strlen(*n);
      if (strncmp(argv[i], *n, len) == 0 && argv[i][len] == '=') ok = 1;
    }
    if (!ok) {
      fprintf(stderr, "%s: unknown argument '%s'; accepted:", argv[0], argv[i]);
      for (const char *const *n = names; *n; n++) fprintf(stderr, " %s=N", *n);
      fprintf(stderr, " --short\n");
      exit(2);
    }
  }
}

/* The last line of every run: {"bench":..., "elapsed_s":..., "work":..., "checksum":...}. */
static inline void bench_report(const char *bench, double elapsed_s, long work, uint64_t checksum) {
  printf("{\"bench\":\"%s\",\"elapsed_s\":%.6f,\"work\":%ld,\"checksum\":%llu}\n", bench, elapsed_s,
         work, (unsigned long long)checksum);
  fflush(stdout);
}

/* CPU seconds of the calling thread (CLOCK_THREAD_CPUTIME_ID): unlike wall
 * time, not lengthened by a profiler pausing the thread. */
static inline double bench_thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The calling thread's /proc/thread-self/schedstat (run and run-queue wait,
 * in ns) as one JSON line; nothing when the kernel does not keep it. Uses
 * only open/read/write (a forked child of a threaded process may call it). */
static inline void bench_report_schedstat(const char *who) {
  char buf[128], line[192];
  int fd = open("/proc/thread-self/schedstat", O_RDONLY);
  if (fd < 0) return;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return;
  buf[n] = 0;
  unsigned long long run_ns = 0, wait_ns = 0;
  if (sscanf(buf, "%llu %llu", &run_ns, &wait_ns) != 2) return;
  int len = snprintf(line, sizeof line, "{\"schedstat\":\"%s\",\"run_ns\":%llu,\"wait_ns\":%llu}\n", who, run_ns,
                     wait_ns);
  if (len > 0 && write(1, line, (size_t)len) < 0) return;
}

/* bench_report with "parts": {"NAME": seconds, ...} (n names and values). */
static inline void bench_report_parts(const char *bench, double elapsed_s, long work, uint64_t checksum,
                                      int n, const char *const *names, const double *seconds) {
  printf("{\"bench\":\"%s\",\"elapsed_s\":%.6f,\"work\":%ld,\"checksum\":%llu,\"parts\":{", bench,
         elapsed_s, work, (unsigned long long)checksum);
  for (int i = 0; i < n; i++) printf("%s\"%s\":%.6f", i ? "," : "", names[i], seconds[i]);
  printf("}}\n");
  fflush(stdout);
}

#endif
