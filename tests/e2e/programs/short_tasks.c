/* A thread per task: starts N threads (default 150), two at a time, and
 * joins them; with K = 0, starts all N first, each waiting on a semaphore
 * of its own, then lets them work two at a time (as before: no thread has
 * ended when the last starts). Odd-numbered threads run task_a for MS
 * milliseconds (default 3) of their own CPU time, by their own clock,
 * even-numbered ones task_b for MS/2, in user-mode work (the clock is read
 * every 20,000 steps). Then, with LONG_MS > 0, one more thread runs
 * task_long for that long. Prints the threads' CPU time as one JSON line:
 * in all (cpu_ms, the tasks'), by function (a_ms, b_ms, long_ms), and each
 * short thread's CPU time from the entry to its task function on (a_tasks,
 * b_tasks: without what ran in the thread before it, a profiler's start of
 * the thread among it). With SLEEP_MS > 0 each short thread then sleeps
 * that long (nanosleep) before it returns.
 * Usage: short_tasks [N] [MS] [K=2|0] [LONG_MS] [SLEEP_MS] */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double task_ms, long_ms, sleep_ms;
static uint64_t sink;
static sem_t *go;  /* K = 0: thread i waits on go[i - 1] */

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Works for ms of this thread's CPU time; returns the time it took. */
static double work(uint64_t x, double ms) {
  double begin = cpu_ms(), ran;
  while ((ran = cpu_ms() - begin) < ms)
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  __atomic_fetch_add(&sink, x, __ATOMIC_RELAXED);
  return ran;
}

/* Each returns its whole CPU time (the clock from its start) and the part
 * since its task function was entered (at `entry`). */
static void *finish(double entry, double sleep) {
  if (sleep > 0) {
    long ns = (long)(sleep * 1e6);
    struct timespec d = {ns / 1000000000, ns % 1000000000};
    nanosleep(&d, NULL);
  }
  double *out = malloc(2 * sizeof *out);
  out[0] = cpu_ms();
  out[1] = out[0] - entry;
  return out;
}

static void wait_turn(void *arg) {
  if (go) sem_wait(&go[(uintptr_t)arg - 1]);
}

static void *task_a(void *arg) {
  double entry = cpu_ms();
  wait_turn(arg);
  work((uintptr_t)arg, task_ms);
  return finish(entry, sleep_ms);
}

static void *task_b(void *arg) {
  double entry = cpu_ms();
  wait_turn(arg);
  work((uintptr_t)arg, task_ms / 2);
  return finish(entry, sleep_ms);
}

static void *task_long(void *arg) {
  double entry = cpu_ms();
  work((uintptr_t)arg, long_ms);
  return finish(entry, 0);
}

static int start(int id, pthread_t *t) {
  return pthread_create(t, NULL, id % 2 ? task_a : task_b, (void *)(uintptr_t)id);
}

/* The thread's whole CPU time; its task's part into *task. */
static double join(pthread_t t, double *task) {
  void *r;
  pthread_join(t, &r);
  double ms = ((double *)r)[0];
  if (task) *task = ((double *)r)[1];
  free(r);
  return ms;
}

static void print_list(const char *name, const double *v, int n, int first) {
  printf(",\"%s\":[", name);
  for (int i = first, sep = 0; i < n; i += 2, sep = 1) printf("%s%.4f", sep ? "," : "", v[i]);
  printf("]");
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 150;
  task_ms = argc > 2 ? atof(argv[2]) : 3;
  int k = argc > 3 ? atoi(argv[3]) : 2;
  long_ms = argc > 4 ? atof(argv[4]) : 0;
  sleep_ms = argc > 5 ? atof(argv[5]) : 0;
  if (n < 1 || (k != 0 && k != 2)) return 2;
  double a = 0, b = 0, l = 0;
  pthread_t *t = malloc(sizeof *t * (size_t)n);
  double *task = malloc(sizeof *task * (size_t)n);  /* by thread: task_a at even indexes */
  if (k == 0) {  /* all of them first, each waiting for its turn */
    go = malloc(sizeof *go * (size_t)n);
    for (int i = 0; i < n; i++) sem_init(&go[i], 0, 0);
    for (int id = 1; id <= n; id++)
      if (start(id, &t[id - 1]) != 0) return 1;
  }
  for (int i = 0; i < n; i += 2) {
    int m = n - i < 2 ? n - i : 2;
    for (int j = 0; j < m; j++)
      if (go) sem_post(&go[i + j]);
      else if (start(i + j + 1, &t[i + j]) != 0) return 1;
    for (int j = 0; j < m; j++) *((i + j + 1) % 2 ? &a : &b) += join(t[i + j], &task[i + j]);
  }
  free(t);
  if (long_ms > 0) {
    pthread_t lt;
    if (pthread_create(&lt, NULL, task_long, NULL) != 0) return 1;
    l = join(lt, NULL);
  }
  printf("{\"threads\":%d,\"task_ms\":%g,\"cpu_ms\":%.1f,\"a_ms\":%.1f,\"b_ms\":%.1f,\"long_ms\":%.1f", n, task_ms,
         a + b, a, b, l);
  print_list("a_tasks", task, n, 0);
  print_list("b_tasks", task, n, 1);
  printf("}\n");
  free(task);
  return 0;
}
