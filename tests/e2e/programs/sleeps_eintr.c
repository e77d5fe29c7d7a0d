/* Short sleeps between bursts of CPU work, each checked for an early end:
 * a sample's signal pending as a sleep begins must not end it with EINTR
 * (nanosleep, usleep, select and poll of no descriptor and sem_timedwait are
 * not restarted after a handler). Prints the count of early ends per call and
 * the samples' worth of CPU time it used.
 * Usage: sleeps_eintr SECONDS */
#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  sem_t s;
  sem_init(&s, 0, 0);
  int early[5] = {0};
  double end = now(CLOCK_MONOTONIC) + seconds;
  while (now(CLOCK_MONOTONIC) < end) {
    /* about 0.3 ms of CPU time, measured, whatever the core's speed */
    double until = now(CLOCK_THREAD_CPUTIME_ID) + 0.0003;
    while (now(CLOCK_THREAD_CPUTIME_ID) < until)
      for (int i = 0; i < 200; i++) sink += (unsigned long)i * 2654435761u;
    struct timespec ts = {0, 100000};
    if (nanosleep(&ts, NULL) != 0) early[0]++;
    if (usleep(100) != 0) early[1]++;
    struct timeval tv = {0, 100};
    if (select(0, NULL, NULL, NULL, &tv) != 0) early[2]++;
    if (poll(NULL, 0, 1) != 0) early[3]++;
    struct timespec ab;
    clock_gettime(CLOCK_REALTIME, &ab);
    ab.tv_nsec += 100000;
    if (ab.tv_nsec >= 1000000000) { ab.tv_sec++; ab.tv_nsec -= 1000000000; }
    if (sem_timedwait(&s, &ab) == 0 || errno != ETIMEDOUT) early[4]++;
  }
  printf("early nanosleep=%d usleep=%d select=%d poll=%d sem_timedwait=%d cpu_ms=%ld\n", early[0], early[1],
         early[2], early[3], early[4], (long)(now(CLOCK_PROCESS_CPUTIME_ID) * 1000));
  return 0;
}
