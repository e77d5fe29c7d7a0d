/* Copies stdin to stdout, writes a line to stderr, exits with status 7:
 * what a program sees and says must be the same under the profiler. */
#include <coz.h>
#include <stdio.h>

int main(void) {
  int c;
  long n = 0;
  while ((c = getchar()) != EOF) {
    putchar(c);
    n++;
    COZ_PROGRESS_NAMED("byte");
  }
  fprintf(stderr, "echo_exit: %ld bytes\n", n);
  return 7;
}
