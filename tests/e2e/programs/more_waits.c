/* One wait of an interposed call, made by a thread of its own (`waiter`)
 * and released by another thread or process 200 ms after the waiter says
 * it is about to wait; the waiter measures its wait itself and the
 * measure is written to REPORT (in ns), for the test to compare with the
 * profile's record of the same thread.
 *
 *   spin         - pthread_spin_lock on a spin lock the main thread holds
 *   waitpid      - waitpid for a child that exits
 *   waitid       - waitid for a child that exits
 *   flock        - flock(LOCK_EX) on a file a child has locked
 *   setlkw       - fcntl(F_SETLKW) on a file a child has locked
 *   readv        - readv on a pipe the main thread writes
 *   writev       - writev on a full pipe the main thread drains
 *   epoll_pwait2 - epoll_pwait2 on a pipe the main thread writes
 *   pread        - pread of a file in the page cache, again and again for
 *                  200 ms by the clock (no other party: the calls' own
 *                  time is the wait; a count of calls would last what
 *                  this machine's memory bandwidth makes it last)
 *   pwrite       - the same with pwrite
 *
 * Usage: more_waits MODE REPORT. Prints one line that does not depend on
 * timing. Lasts about 1.2 s. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOLD_NS 200000000L
#define FILE_BYTES (8 << 20)

static const char* mode;
static atomic_int ready;
static uint64_t waited_ns;
static pthread_spinlock_t spin;
static int data_pipe[2];  /* readv, epoll_pwait2: what the waiter reads */
static int go_pipe[2];    /* to the child: start the 200 ms */
static int held_pipe[2];  /* from the child: the file is locked */
static int ep, lockfd;
static pid_t child;
static char* big;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void hold(void) {
  struct timespec t = {0, HOLD_NS};
  nanosleep(&t, NULL);
}

static int is(const char* m) { return !strcmp(mode, m); }

static void* waiter(void* arg) {
  (void)arg;
  char c;
  int status;
  siginfo_t info;
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  struct iovec iov = {&c, 1};
  struct epoll_event ev;
  atomic_store(&ready, 1);
  uint64_t start = now_ns();
  if (is("spin")) {
    pthread_spin_lock(&spin); /* WAIT_spin */
    pthread_spin_unlock(&spin);
  } else if (is("waitpid")) {
    if (waitpid(child, &status, 0) != child) abort(); /* WAIT_waitpid */
  } else if (is("waitid")) {
    if (waitid(P_PID, child, &info, WEXITED) != 0) abort(); /* WAIT_waitid */
  } else if (is("flock")) {
    if (flock(lockfd, LOCK_EX) != 0) abort(); /* WAIT_flock */
  } else if (is("setlkw")) {
    if (fcntl(lockfd, F_SETLKW, &fl) != 0) abort(); /* WAIT_setlkw */
  } else if (is("readv")) {
    if (readv(data_pipe[0], &iov, 1) != 1) abort(); /* WAIT_readv */
  } else if (is("epoll_pwait2")) {
    if (epoll_pwait2(ep, &ev, 1, NULL, NULL) != 1) abort(); /* WAIT_epoll_pwait2 */
  } else if (is("writev")) {
    if (writev(data_pipe[1], &iov, 1) != 1) abort(); /* WAIT_writev */
  } else if (is("pread")) {
    do
      if (pread(lockfd, big, FILE_BYTES, 0) != FILE_BYTES) abort(); /* WAIT_pread */
    while (now_ns() - start < (uint64_t)HOLD_NS);
  } else if (is("pwrite")) {
    do
      if (pwrite(lockfd, big, FILE_BYTES, 0) != FILE_BYTES) abort(); /* WAIT_pwrite */
    while (now_ns() - start < (uint64_t)HOLD_NS);
  }
  waited_ns = now_ns() - start;
  return NULL;
}

/* A child that waits for the go, holds on for 200 ms and exits; for the
 * file locks, it first locks the file (through a descriptor of its own) and
 * says so. */
static void start_child(const char* path) {
  if (pipe(go_pipe) != 0 || pipe(held_pipe) != 0) abort();
  child = fork();
  if (child < 0) abort();
  if (child == 0) {
    char c = 1;
    if (path) {
      int fd = open(path, O_RDWR);
      struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
      if (fd < 0 || (is("flock") ? flock(fd, LOCK_EX) : fcntl(fd, F_SETLK, &fl)) != 0) _exit(1);
      if (write(held_pipe[1], &c, 1) != 1) _exit(1);
    }
    if (read(go_pipe[0], &c, 1) != 1) _exit(1);
    hold();
    _exit(0);  /* its locks go with it */
  }
  char c;
  if (path && read(held_pipe[0], &c, 1) != 1) abort();
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  mode = argv[1];
  char path[] = "/tmp/coz_more_waits_XXXXXX";
  if (is("flock") || is("setlkw") || is("pread") || is("pwrite")) {
    lockfd = mkstemp(path);
    if (lockfd < 0) return 1;
    if (is("pread") || is("pwrite")) {
      big = calloc(1, FILE_BYTES);
      if (!big || write(lockfd, big, FILE_BYTES) != FILE_BYTES) return 1;
    }
  }
  if (is("spin")) {
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    pthread_spin_lock(&spin);
  } else if (is("waitpid") || is("waitid")) {
    start_child(NULL);
  } else if (is("flock") || is("setlkw")) {
    start_child(path);
  } else if (is("readv") || is("epoll_pwait2")) {
    if (pipe(data_pipe) != 0) return 1;
    ep = epoll_create1(0);
    struct epoll_event ev = {EPOLLIN, {.u64 = 104729}};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, data_pipe[0], &ev) != 0) return 1;
  } else if (is("writev")) {
    /* A full pipe: the waiter's one byte waits for the main thread's read. */
    if (pipe(data_pipe) != 0) return 1;
    fcntl(data_pipe[1], F_SETFL, O_NONBLOCK);
    static char fill[4096];
    while (write(data_pipe[1], fill, sizeof fill) > 0) {}
    while (write(data_pipe[1], fill, 1) > 0) {}
    fcntl(data_pipe[1], F_SETFL, 0);
  } else if (!is("pread") && !is("pwrite")) {
    return 2;
  }
  pthread_t t;
  pthread_create(&t, NULL, waiter, NULL);
  while (!atomic_load(&ready)) sched_yield();
  if (is("spin")) {
    hold();
    pthread_spin_unlock(&spin);
  } else if (child) {
    char c = 1;
    if (write(go_pipe[1], &c, 1) != 1) return 1;
  } else if (is("writev")) {
    hold();
    static char drain[1 << 16];
    if (read(data_pipe[0], drain, sizeof drain) <= 0) return 1;
  } else if (!is("pread") && !is("pwrite")) {
    hold();
    if (write(data_pipe[1], "x", 1) != 1) return 1;
  }
  pthread_join(t, NULL);
  /* A second more, so that a profiler thread on a busy machine is done with
   * its start (debug information, the first flush of stacks) before the
   * exit gives it half a second for its last records. */
  struct timespec linger = {1, 0};
  nanosleep(&linger, NULL);
  int status;
  if (child && !is("waitpid") && !is("waitid") && waitpid(child, &status, 0) != child) return 1;
  if (lockfd) unlink(path);
  FILE* f = fopen(argv[2], "w");
  if (!f) return 1;
  fprintf(f, "%llu\n", (unsigned long long)waited_ns);
  fclose(f);
  printf("more_waits %s done\n", mode);
  return 0;
}
