/*
 * Whether a new sampling period set on sampling-only's CPU events reaches
 * the threads started after it (docs/runtime.md, "What the weights miss").
 * The main thread opens one task-clock event per CPU with inherit and
 * inherit_thread at 10 ms, as the runtime's CPU rings do, then sets 1 ms
 * with PERF_EVENT_IOC_PERIOD, then starts and joins THREADS threads one
 * after another, each running MS milliseconds of its own CPU time in user
 * mode. With `late`, it first starts and joins as many threads at 10 ms,
 * and sets 1 ms only after them. Prints one JSON line: the samples the
 * threads' events wrote after the new period, and the count 1 ms would give.
 * Usage: inherited_period [late] [THREADS] [MS]
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DATA_PAGES 8
#define MAX_CPUS 256

static int cpus, fds[MAX_CPUS];
static struct perf_event_mmap_page *rings[MAX_CPUS];
static double thread_ms;
static volatile uint64_t sink;

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* MS of CPU time, nearly all of it in user mode: the clock is read every
 * 20,000 steps (with exclude_kernel, a sample that falls due in the kernel
 * is dropped). */
static void *work(void *arg) {
  (void)arg;
  double start = cpu_ms();
  uint64_t x = 1;
  while (cpu_ms() - start < thread_ms)
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink += x;
  return NULL;
}

static void run_threads(int n) {
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, work, NULL) != 0) exit(1);
    pthread_join(t, NULL);
  }
}

/* The samples written to every CPU's ring since the last call. */
static long take_samples(void) {
  long n = 0;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), size = DATA_PAGES * page;
  for (int c = 0; c < cpus; c++) {
    if (!rings[c]) continue;
    const char *data = (const char *)rings[c] + page;
    uint64_t head = __atomic_load_n(&rings[c]->data_head, __ATOMIC_ACQUIRE), tail = rings[c]->data_tail;
    while (tail < head) {
      struct perf_event_header h;
      for (size_t k = 0; k < sizeof h; k++) ((char *)&h)[k] = data[(tail + k) % size];
      if (h.type == PERF_RECORD_SAMPLE) n++;
      if (!h.size) break;
      tail += h.size;
    }
    __atomic_store_n(&rings[c]->data_tail, head, __ATOMIC_RELEASE);
  }
  return n;
}

int main(int argc, char **argv) {
  int late = argc > 1 && strcmp(argv[1], "late") == 0;
  int threads = argc > 1 + late ? atoi(argv[1 + late]) : 50;
  thread_ms = argc > 2 + late ? atof(argv[2 + late]) : 8;
  cpus = (int)sysconf(_SC_NPROCESSORS_CONF);
  if (cpus > MAX_CPUS) cpus = MAX_CPUS;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (int c = 0; c < cpus; c++) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.sample_period = 10000000;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
    a.inherit = 1;
    a.inherit_thread = 1;
    a.exclude_kernel = 1;
    fds[c] = (int)syscall(SYS_perf_event_open, &a, 0, c, -1, 0);
    if (fds[c] < 0) continue; /* an offline CPU */
    void *m = mmap(NULL, (1 + DATA_PAGES) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fds[c], 0);
    rings[c] = m == MAP_FAILED ? NULL : m;
  }
  if (late) run_threads(threads);
  take_samples();
  int refused = 0;
  for (int c = 0; c < cpus; c++) {
    uint64_t period = 1000000;
    if (fds[c] >= 0 && ioctl(fds[c], PERF_EVENT_IOC_PERIOD, &period) != 0) refused++;
  }
  run_threads(threads);
  long samples = take_samples();
  printf("{\"late\":%d,\"threads\":%d,\"thread_ms\":%g,\"ioctl_refused\":%d,\"samples\":%ld,\"at_1ms\":%.0f}\n", late,
         threads, thread_ms, refused, samples, threads * thread_ms);
  return 0;
}
