/* Replaces itself once: generation 0 works for SECONDS of CPU time, tries an
 * exec that fails (no such file), works again, then execs itself through
 * HOW (execl, execvp or execve) as generation 1, which works and exits.
 * Usage: exec_self SECONDS HOW [GENERATION] */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char** environ;
static volatile unsigned long sink;

static void work(double seconds) {
  struct timespec a, b;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  do {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i * 2654435761u; /* hot */
    COZ_PROGRESS_NAMED("round");
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  } while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9 < seconds);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  double seconds = atof(argv[1]);
  int gen = argc > 3 ? atoi(argv[3]) : 0;
  work(seconds);
  printf("generation %d\n", gen);
  fflush(stdout);
  if (gen > 0) return 0;
  char* none[] = {"none", NULL};
  if (execv("/nonexistent/none", none) == 0) return 3;
  work(seconds);
  char* again[] = {argv[0], argv[1], argv[2], "1", NULL};
  if (!strcmp(argv[2], "execl")) execl(argv[0], argv[0], argv[1], argv[2], "1", (char*)NULL);
  else if (!strcmp(argv[2], "execvp")) execvp(argv[0], again);
  else execve(argv[0], again, environ);
  perror("exec");
  return 4;
}
