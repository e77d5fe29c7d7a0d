/*
 * locks_imbalance: load imbalance (SyncPerf's dedup-II and ferret). A
 * three-stage pipeline joined by bounded queues (mutex + condition
 * variables); stage k runs in its own pool of t<k> threads (functions stage1,
 * stage2, stage3: SyncPerf's thread groups). Each item costs stage k w<k>
 * microseconds: `cpu` percent of it computing (line WORK1/2/3, measured on
 * the thread's CPU clock, so the cost does not depend on the CPU's speed),
 * the rest waiting for a device (nanosleep, line DEVICE1/2/3). A stage's
 * throughput is t<k>/w<k> whatever the number of cores, as long as the
 * computing parts fit on them (at the defaults, 6 threads computing 10% of
 * the time: under one core). One progress point per item leaving the
 * pipeline.
 *
 * The bug is the default: equal pools (t1=t2=t3=2) for unequal work
 * (w1=1000, w2=3000, w3=4000 us). Stages 1 and 2 wait on full queues while
 * stage 3 never waits (coz locks: load-imbalance). SyncPerf's suggestion gives
 * each stage threads in proportion to its computing time: 6 x (1, 3, 4)/8 =
 * (0.75, 2.25, 3), i.e. t1=1 t2=2 t3=3. benchmarks/locks.py applies it and
 * also tries every assignment of the 6 threads.
 *
 * Usage: locks_imbalance [items=N] [t1= t2= t3=] [w1= w2= w3= (us)] [cpu=PCT]
 *                        [--short]
 */
#include <errno.h>
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define QUEUE_SLOTS 4
#define MAX_POOL 64

struct queue {
  uint64_t slot[QUEUE_SLOTS];
  int head, count;
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
};

static void queue_init(struct queue *q) {
  memset(q, 0, sizeof *q);
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->not_empty, NULL);
  pthread_cond_init(&q->not_full, NULL);
}

static void queue_push(struct queue *q, uint64_t v) {
  pthread_mutex_lock(&q->lock);
  while (q->count == QUEUE_SLOTS) pthread_cond_wait(&q->not_full, &q->lock);
  q->slot[(q->head + q->count) % QUEUE_SLOTS] = v;
  q->count++;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->lock);
}

static uint64_t queue_pop(struct queue *q) {
  pthread_mutex_lock(&q->lock);
  while (q->count == 0) pthread_cond_wait(&q->not_empty, &q->lock);
  uint64_t v = q->slot[q->head];
  q->head = (q->head + 1) % QUEUE_SLOTS;
  q->count--;
  pthread_cond_signal(&q->not_full);
  pthread_mutex_unlock(&q->lock);
  return v;
}

static double thread_cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Spins until this thread has used `us` microseconds of CPU. */
#define COMPUTE(x, us)                                                    \
  do {                                                                    \
    double until_ = thread_cpu_us() + (us);                               \
    while (thread_cpu_us() < until_) BENCH_SPIN(x, 5000);                 \
  } while (0)

static struct timespec device_time(double us) {
  struct timespec ts = {(time_t)(us / 1e6), (long)((us - (double)(long)(us / 1e6) * 1e6) * 1e3)};
  return ts;
}

/* Waits `us` microseconds for the device; a macro, so that the wait is the
   line of the stage that uses it. */
#define DEVICE_WAIT(us)                                                   \
  do {                                                                    \
    struct timespec ts_ = device_time(us);                                \
    while (nanosleep(&ts_, &ts_) != 0 && errno == EINTR) {                \
    }                                                                     \
  } while (0)

/* A value of 0 is a "stop" token; real items are odd. */
static struct queue q12, q23;
static long items, t1, t2, t3, cpu_pct;
static double w1, w2, w3;
static long stage1_next, stage1_live, stage2_live, stage3_items;
static uint64_t stage3_sum;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void *stage1(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&count_lock);
    long i = stage1_next < items ? stage1_next++ : -1;
    pthread_mutex_unlock(&count_lock);
    if (i < 0) break;
    uint64_t x = (uint64_t)i * 2 + 1;
    COMPUTE(x, w1 * cpu_pct / 100.0); /* KEY:WORK1 */
    DEVICE_WAIT(w1 * (100 - cpu_pct) / 100.0); /* KEY:DEVICE1 */
    queue_push(&q12, x | 1);
  }
  pthread_mutex_lock(&count_lock);
  int last = --stage1_live == 0;
  pthread_mutex_unlock(&count_lock);
  if (last)
    for (long k = 0; k < t2; k++) queue_push(&q12, 0);
  return NULL;
}

static void *stage2(void *arg) {
  (void)arg;
  for (uint64_t x; (x = queue_pop(&q12)) != 0;) {
    COMPUTE(x, w2 * cpu_pct / 100.0); /* KEY:WORK2 */
    DEVICE_WAIT(w2 * (100 - cpu_pct) / 100.0); /* KEY:DEVICE2 */
    queue_push(&q23, x | 1);
  }
  pthread_mutex_lock(&count_lock);
  int last = --stage2_live == 0;
  pthread_mutex_unlock(&count_lock);
  if (last)
    for (long k = 0; k < t3; k++) queue_push(&q23, 0);
  return NULL;
}

static void *stage3(void *arg) {
  (void)arg;
  for (uint64_t x; (x = queue_pop(&q23)) != 0;) {
    COMPUTE(x, w3 * cpu_pct / 100.0); /* KEY:WORK3 */
    DEVICE_WAIT(w3 * (100 - cpu_pct) / 100.0); /* KEY:DEVICE3 */
    pthread_mutex_lock(&count_lock);
    stage3_sum += x;
    stage3_items++;
    pthread_mutex_unlock(&count_lock);
    COZ_PROGRESS_NAMED("locks_imbalance.item");
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"items", "t1", "t2", "t3", "w1", "w2", "w3", "cpu", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  items = bench_arg(argc, argv, "items", quick ? 40 : 400);
  t1 = bench_arg(argc, argv, "t1", 2);
  t2 = bench_arg(argc, argv, "t2", 2);
  t3 = bench_arg(argc, argv, "t3", 2);
  w1 = (double)bench_arg(argc, argv, "w1", 1000);
  w2 = (double)bench_arg(argc, argv, "w2", 3000);
  w3 = (double)bench_arg(argc, argv, "w3", 4000);
  cpu_pct = bench_arg(argc, argv, "cpu", 10);
  if (t1 < 1 || t2 < 1 || t3 < 1 || t1 + t2 + t3 > MAX_POOL || cpu_pct > 100) {
    fprintf(stderr, "locks_imbalance: pools must be >= 1 and sum to at most %d; cpu 0..100\n",
            MAX_POOL);
    return 2;
  }
  queue_init(&q12);
  queue_init(&q23);
  stage1_live = t1;
  stage2_live = t2;

  double start = bench_now();
  pthread_t th[MAX_POOL];
  int n = 0;
  for (long k = 0; k < t1; k++) pthread_create(&th[n++], NULL, stage1, NULL);
  for (long k = 0; k < t2; k++) pthread_create(&th[n++], NULL, stage2, NULL);
  for (long k = 0; k < t3; k++) pthread_create(&th[n++], NULL, stage3, NULL);
  for (int k = 0; k < n; k++) pthread_join(th[k], NULL);
  if (stage3_items != items) {
    fprintf(stderr, "locks_imbalance: %ld items left the pipeline, %ld expected\n", stage3_items,
            items);
    return 1;
  }
  bench_report("locks_imbalance", bench_now() - start, items, stage3_sum);
  return 0;
}
