/*
 * latency: a request loop measured with COZ_BEGIN/COZ_END("request"). A
 * client thread keeps `window` requests (default 4) in flight; a server
 * thread takes them in order and spends p on line PARSE and h on line
 * HANDLE per request. Latency is the time from COZ_BEGIN (request queued)
 * to COZ_END (request answered); the program prints its mean.
 *
 * Known answer (defaults p=300000, h=300000 spin steps): latency is about
 * window x (p + h), so speeding PARSE (or HANDLE) by x cuts latency by
 * x p/(p+h) = x/2 (12.5%, 25%, 37.5% at 25/50/75%).
 *
 * Usage: latency [requests=N] [window=N] [p=STEPS] [h=STEPS] [--short]
 */
#include <pthread.h>

#include "bench.h"
#include "coz.h"

#define MAX_WINDOW 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t has_request = PTHREAD_COND_INITIALIZER;
static pthread_cond_t has_room = PTHREAD_COND_INITIALIZER;
static double sent_at[MAX_WINDOW];
static long sent, answered, requests, window_size, cost_p, cost_h;
static double latency_total;
static uint64_t served_sum;

static void *client(void *arg) {
  (void)arg;
  for (long i = 0; i < requests; i++) {
    pthread_mutex_lock(&lock);
    while (sent - answered == window_size) pthread_cond_wait(&has_room, &lock);
    COZ_BEGIN("request");
    sent_at[sent % MAX_WINDOW] = bench_now();
    sent++;
    pthread_cond_signal(&has_request);
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

static void *server(void *arg) {
  (void)arg;
  uint64_t x = 999983;
  for (long i = 0; i < requests; i++) {
    pthread_mutex_lock(&lock);
    while (sent == answered) pthread_cond_wait(&has_request, &lock);
    pthread_mutex_unlock(&lock);
    BENCH_SPIN(x, cost_p); /* KEY:PARSE */
    BENCH_SPIN(x, cost_h); /* KEY:HANDLE */
    pthread_mutex_lock(&lock);
    latency_total += bench_now() - sent_at[answered % MAX_WINDOW];
    answered++;
    COZ_END("request");
    pthread_cond_signal(&has_room);
    pthread_mutex_unlock(&lock);
  }
  served_sum = x;
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"requests", "window", "p", "h", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  requests = bench_arg(argc, argv, "requests", quick ? 150 : 4000);
  window_size = bench_arg(argc, argv, "window", 4);
  cost_p = bench_arg(argc, argv, "p", 300000);
  cost_h = bench_arg(argc, argv, "h", 300000);
  if (window_size < 1 || window_size > MAX_WINDOW) {
    fprintf(stderr, "latency: window must be 1..%d\n", MAX_WINDOW);
    return 2;
  }

  double start = bench_now();
  pthread_t tc, ts;
  pthread_create(&tc, NULL, client, NULL);
  pthread_create(&ts, NULL, server, NULL);
  pthread_join(tc, NULL);
  pthread_join(ts, NULL);
  double elapsed = bench_now() - start;
  printf("{\"bench\":\"latency\",\"elapsed_s\":%.6f,\"work\":%ld,\"checksum\":%llu,"
         "\"mean_latency_s\":%.9f}\n",
         elapsed, requests, (unsigned long long)served_sum, latency_total / (double)requests);
  return 0;
}
