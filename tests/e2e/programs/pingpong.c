/* Two threads hand a token back and forth: thread A runs line LINE_X, wakes
 * B, waits; B runs LINE_Y, wakes A, waits. The rounds are serial, so
 * speeding up LINE_X by x speeds the program up by x times X's share of the
 * rounds' samples (measured by the run itself). The hand-off is one of:
 *   futex   - syscall(SYS_futex) wait/wake (Rust's std, C++20 atomic::wait)
 *   eventfd - eventfd written by one thread, epoll_wait in the other
 *   eventfd_rw - eventfd_write by one thread, a blocking eventfd_read in
 *             the other
 *   pipe    - a pipe of this process, poll() then read()
 *   c11     - C11 threads, mtx_t and cnd_t
 * Runs for SECONDS of wall time. With REPORT, writes there the wall time
 * thread A spent in LINE_X and the wall time of its rounds, in ns: what a
 * faster LINE_X would save, when other work competes for the CPUs too (the
 * samples' share leaves out the hand-offs' latency, which a loaded machine
 * lengthens).  Usage: pingpong MODE SECONDS [X Y [REPORT]] */
#include <coz.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

static const char* mode;
static long steps_x = 2000000, steps_y = 1000000;  /* rounds of a few ms: hand-off latency is small beside them */
static double end_time;
static atomic_int turn;  /* 0: A's turn, 1: B's, 2: stop */
static int efd[2], pfd[2][2], epfd[2];
static mtx_t mtx;
static cnd_t cnd;
static unsigned long result;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A macro, so that each line that spins has code (and samples) of its own. */
#define SPIN(x, n) \
  for (long i_ = 0; i_ < (n); i_++) { (x) = (x) * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); }

/* Gives the turn to thread `to` (0: A, 1: B); `value` is `to`, or 2: stop. */
static void give(int to, int value) {
  if (!strcmp(mode, "c11")) {
    mtx_lock(&mtx);
    atomic_store(&turn, value);
    cnd_broadcast(&cnd);
    mtx_unlock(&mtx);
    return;
  }
  atomic_store(&turn, value);
  if (!strcmp(mode, "futex")) {
    syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 2, NULL, NULL, 0);
  } else if (!strcmp(mode, "eventfd")) {
    uint64_t one = 1;
    if (write(efd[to], &one, 8) != 8) abort();
  } else if (!strcmp(mode, "eventfd_rw")) {
    if (eventfd_write(efd[to], 1) != 0) abort();
  } else {
    char c = 1;
    if (write(pfd[to][1], &c, 1) != 1) abort();
  }
}

/* Waits until the turn is `me`'s, or the end. */
static void wait_for(int me) {
  int t;
  if (!strcmp(mode, "c11")) {
    mtx_lock(&mtx);
    while ((t = atomic_load(&turn)) != me && t != 2) cnd_wait(&cnd, &mtx);
    mtx_unlock(&mtx);
    return;
  }
  while ((t = atomic_load(&turn)) != me && t != 2) {
    if (!strcmp(mode, "futex")) {
      syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, t, NULL, NULL, 0);
    } else if (!strcmp(mode, "eventfd")) {
      struct epoll_event ev;
      uint64_t v;
      if (epoll_wait(epfd[me], &ev, 1, -1) == 1 && read(efd[me], &v, 8) != 8) abort();
    } else if (!strcmp(mode, "eventfd_rw")) {
      eventfd_t v;
      if (eventfd_read(efd[me], &v) != 0) abort();
    } else {
      struct pollfd p = {pfd[me][0], POLLIN, 0};
      char c;
      if (poll(&p, 1, -1) == 1 && read(pfd[me][0], &c, 1) != 1) abort();
    }
  }
}

static double x_wall, rounds_start, rounds_end;

static int thread_a(void* arg) {
  unsigned long x = (uintptr_t)arg;
  rounds_start = now();
  for (;;) {
    double t0 = now();
    SPIN(x, steps_x); /* LINE_X */
    x_wall += now() - t0;
    COZ_PROGRESS_NAMED("round");
    int stop = now() >= end_time;
    give(1, stop ? 2 : 1);
    if (stop) {
      rounds_end = now();
      break;
    }
    wait_for(0);
  }
  result ^= x;
  return 0;
}

static int thread_b(void* arg) {
  unsigned long y = (uintptr_t)arg;
  for (;;) {
    wait_for(1);
    if (atomic_load(&turn) == 2) break;
    SPIN(y, steps_y); /* LINE_Y */
    give(0, 0);
  }
  result ^= y;
  return 0;
}

static void* pthread_a(void* arg) { return (void*)(intptr_t)thread_a(arg); }
static void* pthread_b(void* arg) { return (void*)(intptr_t)thread_b(arg); }

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  mode = argv[1];
  end_time = now() + atof(argv[2]);
  if (argc > 4) {
    if (atol(argv[3]) > 0) steps_x = atol(argv[3]); /* 0: the default */
    if (atol(argv[4]) > 0) steps_y = atol(argv[4]);
  }
  for (int i = 0; i < 2; i++) {
    efd[i] = eventfd(0, 0);
    epfd[i] = epoll_create1(0);
    struct epoll_event ev = {EPOLLIN, {.u64 = 77 + i}};
    epoll_ctl(epfd[i], EPOLL_CTL_ADD, efd[i], &ev);
    if (pipe(pfd[i]) != 0) return 1;
  }
  mtx_init(&mtx, mtx_plain);
  cnd_init(&cnd);
  if (!strcmp(mode, "c11")) {
    thrd_t a, b;
    thrd_create(&b, thread_b, (void*)104729);
    thrd_create(&a, thread_a, (void*)7919);
    thrd_join(a, NULL);
    thrd_join(b, NULL);
  } else {
    pthread_t a, b;
    pthread_create(&b, NULL, pthread_b, (void*)104729);
    pthread_create(&a, NULL, pthread_a, (void*)7919);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
  }
  if (argc > 5) {
    FILE* f = fopen(argv[5], "w");
    if (!f) return 1;
    fprintf(f, "%lld %lld\n", (long long)(x_wall * 1e9), (long long)((rounds_end - rounds_start) * 1e9));
    fclose(f);
  }
  printf("pingpong %s done\n", mode);
  return 0;
}
