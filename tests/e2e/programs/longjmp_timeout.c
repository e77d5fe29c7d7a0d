/*
 * Reads timed out the old way: an interval timer's SIGALRM handler
 * siglongjmps out of a read that never gets data, three times; then the
 * thread sleeps ten times 20 ms. The jumps leave the interposed read without
 * returning through its wrapper.
 *
 * Prints "timeouts 3".
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static sigjmp_buf env;

static void on_alarm(int sig) {
  (void)sig;
  siglongjmp(env, 1);
}

int main(void) {
  int fds[2];
  if (pipe(fds) != 0) return 2;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  int timeouts = 0;
  for (int i = 0; i < 3; i++) {
    if (sigsetjmp(env, 1) == 0) {
      struct itimerval once = {{0, 0}, {0, 20000}}; /* 20 ms */
      setitimer(ITIMER_REAL, &once, NULL);
      char c;
      if (read(fds[0], &c, 1) >= 0) return 3; /* never any data: the alarm's jump leaves it */
    } else {
      timeouts++;
    }
  }
  for (int i = 0; i < 10; i++) usleep(20000);
  printf("timeouts %d\n", timeouts);
  return 0;
}
