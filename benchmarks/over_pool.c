/*
 * over_pool: a thread pool of twice as many workers as cores (issue 15).
 * Main submits `tasks` tasks to a bounded queue (QUEUE_SLOTS, mutex +
 * condition variables); 2N workers, N the online CPUs
 * (sysconf(_SC_NPROCESSORS_ONLN)) unless `cores=N` is given, take them.
 * Each task spends a on line TASK_A, then b on line TASK_B; one progress
 * point per task done.
 *
 * Known answer: MEASURED, not derived. Defaults a=300000 b=100000: the
 * 2N workers keep the N cores busy, so ideally a line x faster gains x
 * times its share of the CPU (about 0.75x for TASK_A, 0.25x for TASK_B);
 * how far the real curve is from that (the queue's hand-offs, preemption
 * of a worker inside the queue's lock, the end of the run when fewer than
 * N tasks are left) is for the real runs to say. accuracy.py measures both
 * curves by really lowering a (TASK_A) and b (TASK_B) on the machine at hand.
 *
 * Usage: over_pool [tasks=N] [cores=N] [a=] [b=] [--short]
 */
#include <pthread.h>
#include <unistd.h>

#include "bench.h"
#include "coz.h"

#define QUEUE_SLOTS 23
#define MAX_WORKERS 256

static struct {
  uint64_t slot[QUEUE_SLOTS];
  int head, count;
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER,
           .not_empty = PTHREAD_COND_INITIALIZER,
           .not_full = PTHREAD_COND_INITIALIZER};

static void submit(uint64_t v) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == QUEUE_SLOTS) pthread_cond_wait(&queue.not_full, &queue.lock);
  queue.slot[(queue.head + queue.count) % QUEUE_SLOTS] = v;
  queue.count++;
  pthread_cond_signal(&queue.not_empty);
  pthread_mutex_unlock(&queue.lock);
}

static uint64_t take(void) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == 0) pthread_cond_wait(&queue.not_empty, &queue.lock);
  uint64_t v = queue.slot[queue.head];
  queue.head = (queue.head + 1) % QUEUE_SLOTS;
  queue.count--;
  pthread_cond_signal(&queue.not_full);
  pthread_mutex_unlock(&queue.lock);
  return v;
}

/* A task is an odd number; 0 tells a worker to stop. */
static long tasks, a, b;
static uint64_t done_sum;
static long done_tasks;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
  (void)arg;
  for (uint64_t x; (x = take()) != 0;) {
    BENCH_SPIN(x, a); /* KEY:TASK_A */
    BENCH_SPIN(x, b); /* KEY:TASK_B */
    pthread_mutex_lock(&done_lock);
    done_sum += x;
    done_tasks++;
    pthread_mutex_unlock(&done_lock);
    COZ_PROGRESS_NAMED("over_pool.task");
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"tasks", "cores", "a", "b", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  tasks = bench_arg(argc, argv, "tasks", quick ? 600 : 12000);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  long cores = bench_arg(argc, argv, "cores", online > 0 ? online : 1);
  a = bench_arg(argc, argv, "a", 300000);
  b = bench_arg(argc, argv, "b", 100000);
  long workers = 2 * cores;
  if (cores < 1 || workers > MAX_WORKERS) {
    fprintf(stderr, "over_pool: cores must be 1..%d\n", MAX_WORKERS / 2);
    return 2;
  }

  double start = bench_now();
  pthread_t th[MAX_WORKERS];
  for (long k = 0; k < workers; k++) pthread_create(&th[k], NULL, worker, NULL);
  for (long i = 0; i < tasks; i++) submit((uint64_t)i * 2 + 1);
  for (long k = 0; k < workers; k++) submit(0);
  for (long k = 0; k < workers; k++) pthread_join(th[k], NULL);
  if (done_tasks != tasks) {
    fprintf(stderr, "over_pool: %ld tasks done, %ld expected\n", done_tasks, tasks);
    return 1;
  }
  bench_report("over_pool", bench_now() - start, tasks, done_sum);
  return 0;
}
