/*
 * over_pipeline: a pipeline with more stages than cores (issue 15). Four
 * stages, one thread each, joined by bounded queues of QUEUE_SLOTS items
 * (mutex + condition variables). Per item, stage 1 spends s1 on line
 * STAGE1, stage 2 s2 on line STAGE2 (the heaviest), stage 3 s3 on line
 * STAGE3, stage 4 s4 on line STAGE4; one progress point per item leaving
 * stage 4.
 *
 * Known answer: MEASURED, not derived. Defaults s1=100000 s2=300000
 * s3=200000 s4=100000: on 4 or more cores stage 2 would set the pace
 * (STAGE2 by x: min(x, 1/3), STAGE3: 0). On 2 cores the four threads want
 * 700000 steps per item, more than the 2 x 300000 the cores give while
 * stage 2 runs, so the program is CPU bound and every stage's line gains
 * something (the ideal share of the cores: about 0.43x for STAGE2; 0.29x
 * for STAGE3 up to 14%, where stage 2 sets the pace again), less or more
 * as the scheduler shares the cores and the queues fill and drain.
 * accuracy.py measures both curves by really lowering s2 (STAGE2) and s3
 * (STAGE3) on the machine at hand.
 *
 * Usage: over_pipeline [items=N] [s1=] [s2=] [s3=] [s4=] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define QUEUE_SLOTS 7
#define STAGES 4

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

/* q[k] joins stage k to stage k+1. A value of 0 is the "stop" token; real
 * items are odd. */
static struct queue q[STAGES - 1];
static long items, cost[STAGES];
static uint64_t out_sum;
static long out_items;

/* The item stage k works on next (stage 1 makes it), or 0 once the input ends. */
static uint64_t next_item(long k, long i) {
  if (k == 0) return i < items ? (uint64_t)i * 2 + 1 : 0;
  return queue_pop(&q[k - 1]);
}

/* Hands item x on to stage k + 1, or counts it out of the pipeline (x == 0:
 * the input ended, passed on). */
static void pass_on(long k, uint64_t x) {
  if (k < STAGES - 1) {
    queue_push(&q[k], x);
  } else if (x) {
    out_sum += x;
    out_items++;
    COZ_PROGRESS_NAMED("over_pipeline.item");
  }
}

/* One function per stage, so that each key line is its own loop. */
static void *stage1(void *arg) {
  (void)arg;
  for (uint64_t x, i = 0; (x = next_item(0, (long)i)) != 0; i++) {
    BENCH_SPIN(x, cost[0]); /* KEY:STAGE1 */
    pass_on(0, x | 1);
  }
  pass_on(0, 0);
  return NULL;
}

static void *stage2(void *arg) {
  (void)arg;
  for (uint64_t x; (x = next_item(1, 0)) != 0;) {
    BENCH_SPIN(x, cost[1]); /* KEY:STAGE2 */
    pass_on(1, x | 1);
  }
  pass_on(1, 0);
  return NULL;
}

static void *stage3(void *arg) {
  (void)arg;
  for (uint64_t x; (x = next_item(2, 0)) != 0;) {
    BENCH_SPIN(x, cost[2]); /* KEY:STAGE3 */
    pass_on(2, x | 1);
  }
  pass_on(2, 0);
  return NULL;
}

static void *stage4(void *arg) {
  (void)arg;
  for (uint64_t x; (x = next_item(3, 0)) != 0;) {
    BENCH_SPIN(x, cost[3]); /* KEY:STAGE4 */
    pass_on(3, x | 1);
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"items", "s1", "s2", "s3", "s4", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  items = bench_arg(argc, argv, "items", quick ? 400 : 8000);
  cost[0] = bench_arg(argc, argv, "s1", 100000);
  cost[1] = bench_arg(argc, argv, "s2", 300000);
  cost[2] = bench_arg(argc, argv, "s3", 200000);
  cost[3] = bench_arg(argc, argv, "s4", 100000);
  for (int k = 0; k < STAGES - 1; k++) queue_init(&q[k]);

  double start = bench_now();
  pthread_t th[STAGES];
  void *(*const fn[STAGES])(void *) = {stage1, stage2, stage3, stage4};
  for (int k = 0; k < STAGES; k++) pthread_create(&th[k], NULL, fn[k], NULL);
  for (int k = 0; k < STAGES; k++) pthread_join(th[k], NULL);
  if (out_items != items) {
    fprintf(stderr, "over_pipeline: %ld items left the pipeline, %ld expected\n", out_items, items);
    return 1;
  }
  bench_report("over_pipeline", bench_now() - start, items, out_sum);
  return 0;
}
