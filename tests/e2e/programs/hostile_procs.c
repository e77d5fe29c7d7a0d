/* Processes under the profiler. Modes (argv[1]):
 *   fork   - the parent forks a child; both compute (with a progress point) and
 *            the parent reports the child's exit status
 *   vfork  - vfork + exec of this program's "leaf"
 *   spawn  - posix_spawn of this program's "leaf"
 *   exec   - replaces itself with this program's "leaf"
 *   leaf   - computes, prints its result and exits 11
 *   forktree - the parent forks a worker that forks a helper; nobody execs,
 *            each process computes and waits for its child (prefork servers)
 *   daemon - computes, then becomes a daemon with daemon(3) (keeping its
 *            standard streams), which computes and prints its result
 * Output is deterministic and names no pid. */
#define _DEFAULT_SOURCE /* daemon */
#include <coz.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;
static volatile unsigned long sink;

static unsigned long child_work(unsigned long rounds) {
  unsigned long x = 104729;
  for (unsigned long r = 0; r < rounds; r++) {
    for (int i = 0; i < 20000; i++) x = x * 2862933555777941757ul + 3037000493ul; /* child's hot line */
    COZ_PROGRESS_NAMED("child-round");
  }
  return x % 100003;
}

static unsigned long parent_work(unsigned long rounds) {
  unsigned long x = 7919;
  for (unsigned long r = 0; r < rounds; r++) {
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul; /* parent's hot line */
    COZ_PROGRESS_NAMED("parent-round");
  }
  return x % 100003;
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void report(const char* what, int status) {
  if (WIFEXITED(status)) printf("%s exited %d\n", what, WEXITSTATUS(status));
  else if (WIFSIGNALED(status)) printf("%s killed by signal %d\n", what, WTERMSIG(status));
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  char* leaf_argv[] = {argv[0], "leaf", NULL};
  if (!strcmp(mode, "leaf")) {
    printf("leaf result %lu\n", child_work(8000));
    return 11;
  }
  if (!strcmp(mode, "exec")) {
    printf("before exec\n");
    fflush(stdout);
    execv(argv[0], leaf_argv);
    perror("execv");
    return 127;
  }
  int status = 0;
  if (!strcmp(mode, "fork")) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      printf("child result %lu\n", child_work(8000));
      fflush(stdout);
      exit(5);
    }
    unsigned long mine = parent_work(8000);
    waitpid(pid, &status, 0);
    report("child", status);
    printf("parent result %lu\n", mine);
    return 0;
  }
  if (!strcmp(mode, "forktree")) {
    /* Three generations of fork without exec; each forks again after having
     * computed a while with its own threads of the runtime running. */
    const char* names[] = {"parent", "worker", "helper"};
    int depth = 0;
    unsigned long mine = parent_work(1500);
    while (depth < 2) {
      fflush(stdout);
      pid_t pid = fork();
      if (pid < 0) return 3;
      if (pid == 0) {
        depth++;
        mine = child_work(1500);
        continue;
      }
      waitpid(pid, &status, 0);
      report(names[depth + 1], status);
      break;
    }
    printf("%s result %lu\n", names[depth], mine);
    return depth;
  }
  if (!strcmp(mode, "daemon")) {
    unsigned long before = parent_work(1500);
    fflush(stdout);
    if (daemon(1, 1) != 0) {
      perror("daemon");
      return 1;
    }
    unsigned long after = child_work(1500);
    /* Then 0.3 s of the daemon's own CPU time more, whatever the machine's
       speed: its first experiment waits for 16 sampling periods of samples,
       and 1,500 rounds took 28 ms on one machine (its hot line then went
       unselected in 1 run of 5). */
    for (double start = cpu_seconds(); cpu_seconds() - start < 0.3;) sink += child_work(50);
    printf("daemon result %lu %lu\n", before, after);
    return 0;
  }
  if (!strcmp(mode, "vfork")) {
    fflush(stdout);
    pid_t pid = vfork();
    if (pid == 0) {
      execv(argv[0], leaf_argv);
      _exit(127);
    }
    waitpid(pid, &status, 0);
    report("vfork child", status);
    printf("parent result %lu\n", parent_work(2000));
    return 0;
  }
  if (!strcmp(mode, "spawn")) {
    fflush(stdout);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], NULL, NULL, leaf_argv, environ);
    if (rc != 0) {
      printf("posix_spawn failed: %s\n", strerror(rc));
      return 1;
    }
    printf("parent result %lu\n", parent_work(2000));
    fflush(stdout);
    waitpid(pid, &status, 0);
    report("spawned child", status);
    return 0;
  }
  return 2;
}
