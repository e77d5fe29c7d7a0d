/*
 * micro_waits: the cost the runtime adds to synchronization and blocking
 * calls that no experiment selects (issues 11 and 13): nanoseconds per
 *   - an uncontended pthread_mutex_lock + unlock pair,
 *   - a read(2) of one byte from /dev/zero (a blocking call that does not
 *     block),
 * each the median of several timed batches. Run it with and without the
 * runtime preloaded (benchmarks/micro_waits.py does both and prints the
 * difference).
 *
 * Usage: micro_waits [pairs=N] [reads=N] [batches=N]
 */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

int main(int argc, char **argv) {
  static const char *const names[] = {"pairs", "reads", "batches", NULL};
  bench_check_args(argc, argv, names);
  long pairs = bench_arg(argc, argv, "pairs", 2000000);
  long reads = bench_arg(argc, argv, "reads", 200000);
  int batches = (int)bench_arg(argc, argv, "batches", 9);
  if (batches < 1 || batches > 99) batches = 9;
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  double lock_ns[99], read_ns[99];
  int fd = open("/dev/zero", O_RDONLY);
  char c;
  for (int b = 0; b < batches; b++) {
    double t0 = bench_now();
    for (long i = 0; i < pairs; i++) {
      pthread_mutex_lock(&m);
      __asm__ volatile("" ::: "memory");
      pthread_mutex_unlock(&m);
    }
    double t1 = bench_now();
    for (long i = 0; i < reads; i++)
      if (read(fd, &c, 1) != 1) return 1;
    double t2 = bench_now();
    lock_ns[b] = (t1 - t0) * 1e9 / (double)pairs;
    read_ns[b] = (t2 - t1) * 1e9 / (double)reads;
  }
  printf("{\"bench\":\"micro_waits\",\"lock_unlock_ns\":%.1f,\"read_ns\":%.1f}\n", median(lock_ns, batches),
         median(read_ns, batches));
  return 0;
}
