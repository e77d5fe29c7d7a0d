/*
 * prodcons: one producer and one consumer joined by a bounded queue (13
 * slots) guarded by a mutex and two condition variables. The producer spends
 * p on line PRODUCE per item, the consumer c on line CONSUME; one progress
 * point per consumed item.
 *
 * Known answer (defaults p=300000, c=200000 spin steps, c = 2/3 p):
 *   - the producer is the bottleneck: speeding PRODUCE by x gives
 *     min(x, 1 - c/p) = min(x, 33.3%) (25% at 25%, 33% at 50% and 75%);
 *   - speeding CONSUME gives 0%.
 *
 * Usage: prodcons [items=N] [p=STEPS] [c=STEPS] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define QUEUE_SLOTS 13

static uint64_t queue[QUEUE_SLOTS];
static int q_head, q_count;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t q_not_full = PTHREAD_COND_INITIALIZER;
static long items, cost_p, cost_c;
static uint64_t consumed_sum;

static void *producer(void *arg) {
  (void)arg;
  uint64_t x = 271828;
  for (long i = 0; i < items; i++) {
    BENCH_SPIN(x, cost_p); /* KEY:PRODUCE */
    pthread_mutex_lock(&q_lock);
    while (q_count == QUEUE_SLOTS) pthread_cond_wait(&q_not_full, &q_lock);
    queue[(q_head + q_count) % QUEUE_SLOTS] = x;
    q_count++;
    pthread_cond_signal(&q_not_empty);
    pthread_mutex_unlock(&q_lock);
  }
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (long i = 0; i < items; i++) {
    pthread_mutex_lock(&q_lock);
    while (q_count == 0) pthread_cond_wait(&q_not_empty, &q_lock);
    uint64_t x = queue[q_head];
    q_head = (q_head + 1) % QUEUE_SLOTS;
    q_count--;
    pthread_cond_signal(&q_not_full);
    pthread_mutex_unlock(&q_lock);
    BENCH_SPIN(x, cost_c); /* KEY:CONSUME */
    consumed_sum += x;
    COZ_PROGRESS_NAMED("prodcons.item");
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"items", "p", "c", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  items = bench_arg(argc, argv, "items", quick ? 400 : 8000);
  cost_p = bench_arg(argc, argv, "p", 300000);
  cost_c = bench_arg(argc, argv, "c", 200000);

  double start = bench_now();
  pthread_t tp, tc;
  pthread_create(&tp, NULL, producer, NULL);
  pthread_create(&tc, NULL, consumer, NULL);
  pthread_join(tp, NULL);
  pthread_join(tc, NULL);
  bench_report("prodcons", bench_now() - start, items, consumed_sum);
  return 0;
}
