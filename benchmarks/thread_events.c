/*
 * What a thread's start and end cost with a perf event of each kind
 * (benchmarks.md, "Where two_threads' causal slowdown goes"). Starts and
 * joins N threads one after another, each returning at once, and prints the
 * microseconds per thread as one JSON line. MODE:
 *   0  no event
 *   1  each thread opens, maps (8 data pages), enables, disables, unmaps and
 *      closes a task-clock sampling event of its own
 *   2  one task-clock event of the main thread, inherited by every thread it
 *      starts (inherit, inherit_thread), that signals the sampled thread
 *      itself with SIGTRAP (sigtrap, Linux 5.13): no event per thread, no
 *      ring (a causal mode without per-thread events would sample so)
 *   3  as 1, with what the causal runtime's event carries besides: switch
 *      records, callchains, times, CPUs, a wakeup per sample and the
 *      descriptor's signal set to the thread (O_ASYNC, F_SETSIG, F_SETOWN_EX)
 *   4  as 3, and the main thread, which starts the others, has such an event
 *      of its own, as every program thread has under the causal runtime
 * Usage: thread_events MODE [N]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RING_BYTES (9 * 4096)

static int mode;

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int open_event(struct perf_event_attr *a) {
  return (int)syscall(SYS_perf_event_open, a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void task_clock(struct perf_event_attr *a, int full) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = PERF_TYPE_SOFTWARE;
  a->config = PERF_COUNT_SW_TASK_CLOCK;
  a->sample_period = 1000000;
  a->exclude_kernel = 1;
  a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
  if (full) {
    a->context_switch = 1;
    a->sample_id_all = 1;
    a->sample_type |= PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
    a->wakeup_events = 1;
  }
}

static void *thread_body(void *arg) {
  (void)arg;
  if (mode != 1 && mode != 3 && mode != 4) return NULL;
  struct perf_event_attr a;
  task_clock(&a, mode >= 3);
  a.disabled = 1;
  int fd = open_event(&a);
  if (fd < 0) return (void *)1;
  void *ring = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mode >= 3) {
    struct f_owner_ex owner = {F_OWNER_TID, (pid_t)syscall(SYS_gettid)};
    fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK);
    fcntl(fd, F_SETSIG, SIGRTMIN + 4);
    fcntl(fd, F_SETOWN_EX, &owner);
  }
  ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  if (ring != MAP_FAILED) munmap(ring, RING_BYTES);
  close(fd);
  return NULL;
}

#ifdef PERF_ATTR_SIZE_VER7
static void on_trap(int sig) { (void)sig; }
#endif

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: thread_events MODE [N]\n");
    return 2;
  }
  mode = atoi(argv[1]);
  int n = argc > 2 ? atoi(argv[2]) : 4000;
  signal(SIGRTMIN + 4, SIG_IGN);
  if (mode == 2 || mode == 4) {
    struct perf_event_attr a;
    task_clock(&a, mode == 4);
    if (mode == 2) {
#ifdef PERF_ATTR_SIZE_VER7 /* the headers of Linux 5.13, which has sigtrap */
      signal(SIGTRAP, on_trap);
      a.inherit = 1;
      a.inherit_thread = 1;
      a.sigtrap = 1;
      a.remove_on_exec = 1;
#else
      fprintf(stderr, "thread_events: mode 2 needs the headers of Linux 5.13 or later\n");
      return 1;
#endif
    }
    int fd = open_event(&a);
    if (fd < 0 || (mode == 4 && mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED)) {
      perror("thread_events: the main thread's event");
      return 1;
    }
  }
  double t0 = seconds();
  for (int i = 0; i < n; i++) {
    pthread_t t;
    void *failed = NULL;
    if (pthread_create(&t, NULL, thread_body, NULL) != 0) return 1;
    pthread_join(t, &failed);
    if (failed) {
      perror("thread_events: a thread's event");
      return 1;
    }
  }
  printf("{\"mode\":%d,\"threads\":%d,\"per_thread_us\":%.1f}\n", mode, n, (seconds() - t0) * 1e6 / n);
  return 0;
}
