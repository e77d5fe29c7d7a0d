/* Lists the descriptors below 64 that are open after it has computed for a
 * while (so that the profiler has sampled, unwound and read debug
 * information by then), on standard error, then whether writing to its
 * standard output works. A program started with a standard stream closed
 * must find it closed, and a program's first open() must get the number it
 * gets without the profiler. Usage: low_fds SECONDS */
#include <coz.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.5;
  unsigned long x = 7949;
  double end = now() + seconds;
  while (now() < end) {
    for (int i = 0; i < 20000; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* LOOP */
    COZ_PROGRESS_NAMED("round");
  }
  char line[512] = "low_fds open:";
  for (int fd = 0; fd < 64; fd++)
    if (fcntl(fd, F_GETFD) != -1) snprintf(line + strlen(line), sizeof line - strlen(line), " %d", fd);
  int first = open("/dev/null", O_RDONLY);
  ssize_t w = write(1, "", 0);
  fprintf(stderr, "%s; first open %d; write to 1: %s\nlow_fds checksum %lu\n", line, first,
          w < 0 ? strerror(errno) : "ok", x % 7);
  return 0;
}
