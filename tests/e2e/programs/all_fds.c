/* all_fds [take]: with an argument, opens /dev/null until the open-file
 * limit refuses (EMFILE), as a server that leaks descriptors or sizes its
 * pools to the limit does; then sorts arrays of random numbers with the C
 * library's qsort and a comparison of its own for 1 s of CPU time. Prints
 * {"opened":N}. */
#include <coz.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int cmp(const void* a, const void* b) {
  int x = *(const int*)a, y = *(const int*)b;
  return (x > y) - (x < y);
}

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  int n = 0;
  if (argc > 1)
    while (open("/dev/null", O_RDONLY) >= 0) n++;
  static int v[100000];
  double end = cpu_s() + 1.0;
  while (cpu_s() < end) {
    for (int i = 0; i < 100000; i++) v[i] = rand();
    qsort(v, 100000, sizeof v[0], cmp);
    COZ_PROGRESS;
  }
  printf("{\"opened\":%d}\n", n);
  return 0;
}
