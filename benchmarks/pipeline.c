/*
 * pipeline: three stages joined by bounded queues (mutex + condition
 * variables), each stage a pool of threads. Stage 1 (t1 threads) spends s1
 * on line STAGE1 per item, stage 2 (t2 threads) s2 on line STAGE2, stage 3
 * (t3 threads) s3 on line STAGE3; one progress point per item leaving the
 * pipeline.
 *
 * Known answer (defaults t1=1 t2=2 t3=1, s1=50000 s2=400000 s3=100000):
 *   on a machine with >= 4 cores stage 2 is the bottleneck (s2/t2 = 200000
 *   per item): speeding STAGE2 by x gives min(x, 50%); STAGE1 gives 0%.
 *   On 2 cores (4 threads) the program is CPU bound (550000 steps per item
 *   over 2 cores): speeding STAGE2 by x gives about 0.73 x (18%, 36%, 55%
 *   at 25/50/75%) and STAGE1 about 0.09 x. accuracy.py measures the real
 *   answer on the machine at hand, whatever it is.
 *
 * Usage: pipeline [items=N] [s1=] [s2=] [s3=] [t1=] [t2=] [t3=] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define QUEUE_SLOTS 17
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

/* A value of 0 is a "stop" token; real items are odd. */
static struct queue q12, q23;
static long items, s1, s2, s3, t1, t2, t3;
static long stage1_next, stage1_live, stage2_live;
static uint64_t stage3_sum;
static long stage3_items;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void *stage1(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&count_lock);
    long i = stage1_next < items ? stage1_next++ : -1;
    pthread_mutex_unlock(&count_lock);
    if (i < 0) break;
    uint64_t x = (uint64_t)i * 2 + 1;
    BENCH_SPIN(x, s1); /* KEY:STAGE1 */
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
    BENCH_SPIN(x, s2); /* KEY:STAGE2 */
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
    BENCH_SPIN(x, s3); /* KEY:STAGE3 */
    pthread_mutex_lock(&count_lock);
    stage3_sum += x;
    stage3_items++;
    pthread_mutex_unlock(&count_lock);
    COZ_PROGRESS_NAMED("pipeline.item");
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"items", "s1", "s2", "s3", "t1", "t2", "t3", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  items = bench_arg(argc, argv, "items", quick ? 300 : 6000);
  s1 = bench_arg(argc, argv, "s1", 50000);
  s2 = bench_arg(argc, argv, "s2", 400000);
  s3 = bench_arg(argc, argv, "s3", 100000);
  t1 = bench_arg(argc, argv, "t1", 1);
  t2 = bench_arg(argc, argv, "t2", 2);
  t3 = bench_arg(argc, argv, "t3", 1);
  if (t1 < 1 || t2 < 1 || t3 < 1 || t1 + t2 + t3 > MAX_POOL) {
    fprintf(stderr, "pipeline: pool sizes must be >= 1 and sum to at most %d\n", MAX_POOL);
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
    fprintf(stderr, "pipeline: %ld items left the pipeline, %ld expected\n", stage3_items, items);
    return 1;
  }
  bench_report("pipeline", bench_now() - start, items, stage3_sum);
  return 0;
}
