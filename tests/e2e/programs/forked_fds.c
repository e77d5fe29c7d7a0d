/* Descriptors made before a fork, used across it.
 *
 *   pipe SECONDS   - makes a pipe, forks; the child writes a byte every 2 ms
 *                    for SECONDS and exits; the parent's main thread reads
 *                    them (LINE_READ) while a second thread spins on
 *                    LINE_SPIN until the pipe ends. The pipe is the
 *                    process's own, yet after the fork its writer is
 *                    another process: the reads are waits on the outside
 *                    world, not hand-offs from a sibling thread.
 *   spawn SECONDS  - the same, but the writer is this program run again by
 *   vfork SECONDS    posix_spawn, or by vfork and execv, with the pipe as
 *                    its standard output (mode `writer`): the runtime runs
 *                    no fork handler there, yet the pipe links processes.
 *   epoll FORKS    - one thread makes eventfds and adds each to an epoll
 *                    set without pause, while the main thread forks FORKS
 *                    children that do the same once and exit. A child that
 *                    inherited a lock held by the adding thread would hang
 *                    (one that has not ended in 20 s is killed, and the
 *                    program says so and exits with status 3).
 *
 * Prints one line that does not depend on timing. */
#include <coz.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static unsigned long spun;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* spinner(void* arg) {
  unsigned long x = (unsigned long)(size_t)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (int i = 0; i < 100000; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* LINE_SPIN */
  }
  spun = x;
  return NULL;
}

/* A byte to `fd` every 2 ms for `seconds`. */
static int write_bytes(int fd, double seconds) {
  double end = now() + seconds;
  struct timespec two_ms = {0, 2000000};
  while (now() < end) {
    nanosleep(&two_ms, NULL);
    if (write(fd, "x", 1) != 1) return 1;
  }
  return 0;
}

/* The writer child: forked, or this program run again (`self` with
 * `seconds`) by posix_spawn or vfork, the pipe's end as its stdout. */
static pid_t start_writer(const char* how, const char* self, const char* seconds, int p[2]) {
  char* args[] = {(char*)self, "writer", (char*)seconds, NULL};
  extern char** environ;
  pid_t child;
  if (!strcmp(how, "pipe")) {
    child = fork();
    if (child == 0) {
      close(p[0]);
      _exit(write_bytes(p[1], atof(seconds)));
    }
  } else if (!strcmp(how, "spawn")) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    posix_spawn_file_actions_addclose(&fa, p[1]);
    if (posix_spawn(&child, self, &fa, NULL, args, environ) != 0) child = -1;
    posix_spawn_file_actions_destroy(&fa);
  } else {
    child = vfork();
    if (child == 0) {
      dup2(p[1], 1);
      close(p[0]);
      close(p[1]);
      execv(self, args);
      _exit(127);
    }
  }
  return child;
}

static int pipe_mode(const char* how, const char* self, const char* seconds) {
  int p[2];
  if (pipe(p) != 0) return 1;
  pid_t child = start_writer(how, self, seconds, p);
  if (child < 0) return 1;
  close(p[1]);
  pthread_t t;
  pthread_create(&t, NULL, spinner, (void*)(size_t)7919);
  char c;
  for (;;) {
    ssize_t n = read(p[0], &c, 1); /* LINE_READ */
    if (n <= 0) break;
    COZ_PROGRESS_NAMED("byte");
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  printf("forked_fds %s done\n", how);
  return 0;
}

/* An eventfd added to an epoll set: the runtime notes it as a sibling link
 * (under its epoll table's lock). */
static int add_one(void) {
  int ep = epoll_create1(0), ev = eventfd(0, 0);
  if (ep < 0 || ev < 0) return -1;
  struct epoll_event e = {EPOLLIN, {.u64 = 104729}};
  int rc = epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e);
  close(ev);
  close(ep);
  return rc;
}

static void* adder(void* arg) {
  (void)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
    if (add_one() != 0) abort();
  return NULL;
}

static int epoll_mode(int forks) {
  pthread_t t;
  pthread_create(&t, NULL, adder, NULL);
  for (int i = 0; i < forks; i++) {
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) _exit(add_one() == 0 ? 0 : 1);
    /* A child that has not ended in 20 s hangs: killed, and said. */
    int status = 0;
    double deadline = now() + 20;
    struct timespec ms = {0, 1000000};
    pid_t got;
    while ((got = waitpid(child, &status, WNOHANG)) == 0 && now() < deadline) nanosleep(&ms, NULL);
    if (got == 0) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      atomic_store(&stop, 1);
      pthread_join(t, NULL);
      printf("forked_fds epoll: child %d of %d hung\n", i + 1, forks);
      return 3;
    }
    if (got != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  printf("forked_fds epoll done\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (!strcmp(argv[1], "pipe") || !strcmp(argv[1], "spawn") || !strcmp(argv[1], "vfork"))
    return pipe_mode(argv[1], argv[0], argv[2]);
  if (!strcmp(argv[1], "writer")) return write_bytes(1, atof(argv[2]));
  if (!strcmp(argv[1], "epoll")) return epoll_mode(atoi(argv[2]));
  return 2;
}
