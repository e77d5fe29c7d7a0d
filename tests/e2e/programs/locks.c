/* Synchronization with known counts, for the runtime's SyncPerf counters.
 * Modes:
 *   contended - THREADS threads take one global lock ROUNDS times each, with
 *               a critical section of STEPS steps: contended, long holds
 *   private   - each thread takes its own lock (initialized with
 *               pthread_mutex_init) ROUNDS times: never contended
 *   trylock   - thread A holds the lock for 50 ms while B try-locks it in a
 *               loop until it succeeds: many failures, then one success
 *   blocked   - thread A holds the lock for 50 ms while B locks it: one
 *               contended acquisition that waits about 45 ms
 *   many      - two threads lock each of N distinct mutexes once, from one
 *               call site (memory must stay bounded)
 *   cond      - a producer signals a consumer ROUNDS times through a
 *               condition variable
 * Prints what it did; each lock call is on a line of its own (markers). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char* mode;
static long rounds = 20000, steps = 2000, n_many = 100000;
static pthread_mutex_t global = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t own[8];
static pthread_mutex_t* many;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long produced, consumed;
static volatile unsigned long sink;

static void* worker(void* arg) {
  long id = (long)arg;
  if (!strcmp(mode, "contended")) {
    for (long r = 0; r < rounds; r++) {
      pthread_mutex_lock(&global); /* LOCK_GLOBAL */
      for (long i = 0; i < steps; i++) sink += i;
      pthread_mutex_unlock(&global);
    }
  } else if (!strcmp(mode, "private")) {
    for (long r = 0; r < rounds; r++) {
      pthread_mutex_lock(&own[id]); /* LOCK_OWN */
      sink += r;
      pthread_mutex_unlock(&own[id]);
    }
  } else if (!strcmp(mode, "many")) {
    for (long k = 0; k < n_many; k++) {
      pthread_mutex_lock(&many[k]); /* LOCK_MANY */
      sink += k;
      pthread_mutex_unlock(&many[k]);
    }
  }
  return NULL;
}

static void* holder(void* arg) {
  pthread_mutex_lock(&global);
  struct timespec d = {0, 50000000};
  nanosleep(&d, NULL);
  pthread_mutex_unlock(&global);
  return arg;
}

static void* consumer(void* arg) {
  pthread_mutex_lock(&global);
  while (consumed < rounds) {
    while (consumed == produced) pthread_cond_wait(&cond, &global); /* COND_WAIT */
    consumed = produced;
  }
  pthread_mutex_unlock(&global);
  return arg;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  mode = argv[1];
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  if (argc > 3) rounds = n_many = atol(argv[3]);
  pthread_t t[8];
  if (!strcmp(mode, "trylock")) {
    pthread_create(&t[0], NULL, holder, NULL);
    struct timespec d = {0, 5000000};
    nanosleep(&d, NULL);
    long failures = 0;
    while (pthread_mutex_trylock(&global) != 0) { /* TRYLOCK */
      failures++;
      nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    pthread_mutex_unlock(&global);
    pthread_join(t[0], NULL);
    printf("trylock failures %ld\n", failures);
    return 0;
  }
  if (!strcmp(mode, "blocked")) {
    pthread_create(&t[0], NULL, holder, NULL);
    struct timespec d = {0, 5000000};
    nanosleep(&d, NULL);
    pthread_mutex_lock(&global); /* LOCK_BLOCKED */
    pthread_mutex_unlock(&global);
    pthread_join(t[0], NULL);
    printf("blocked done\n");
    return 0;
  }
  if (!strcmp(mode, "cond")) {
    pthread_create(&t[0], NULL, consumer, NULL);
    for (long r = 1; r <= rounds; r++) {
      pthread_mutex_lock(&global);
      produced = r;
      pthread_cond_signal(&cond);
      pthread_mutex_unlock(&global);
      nanosleep(&(struct timespec){0, 200000}, NULL);  /* the consumer waits for each item */
    }
    pthread_join(t[0], NULL);
    printf("cond rounds %ld\n", rounds);
    return 0;
  }
  if (!strcmp(mode, "many")) many = calloc((size_t)n_many, sizeof *many);
  for (int i = 0; i < 8; i++) pthread_mutex_init(&own[i], NULL); /* INIT_OWN */
  for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void*)i);
  for (long i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("%s threads %d rounds %ld\n", mode, threads, rounds);
  return 0;
}
