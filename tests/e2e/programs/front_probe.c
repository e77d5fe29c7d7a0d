/* Run by tests/e2e/test_front_run.py under `coz run`, as the program the
 * native front starts (libcoz/front_run.c).
 *   front_probe env STATUS   prints the runtime's variables it was given
 *                            ("env NAME=VALUE", from /proc/self/environ:
 *                            the block it started with), the ones it sees
 *                            in its environment ("sees NAME=VALUE": the
 *                            runtime takes them out), its open descriptors
 *                            ("fd N"), its SIGINT, SIGQUIT and SIGPIPE
 *                            dispositions and blocked signals ("sig NAME
 *                            default|ignored|blocked"); exits with STATUS.
 *   front_probe term         prints "ready PID", then exits 7 at SIGTERM
 *                            (1 when none came within 20 s).
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t got_term;
static void on_term(int sig) { (void)sig; got_term = 1; }

static void disposition(const char *name, int sig) {
  struct sigaction sa;
  sigset_t mask;
  sigaction(sig, NULL, &sa);
  sigprocmask(SIG_BLOCK, NULL, &mask);
  printf("sig %s %s\n", name,
         sigismember(&mask, sig) ? "blocked" : sa.sa_handler == SIG_IGN ? "ignored" : "default");
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "env") == 0) {
    static char block[1 << 16];
    FILE *f = fopen("/proc/self/environ", "r");
    size_t n = f ? fread(block, 1, sizeof block - 1, f) : 0;
    if (f) fclose(f);
    for (size_t at = 0; at < n; at += strlen(block + at) + 1)
      if (strncmp(block + at, "COZ_", 4) == 0 || strncmp(block + at, "LD_PRELOAD=", 11) == 0)
        printf("env %s\n", block + at);
    for (char **e = environ; *e; ++e)
      if (strncmp(*e, "COZ_", 4) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0) printf("sees %s\n", *e);
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *f; d && (f = readdir(d));)
      if (f->d_name[0] != '.' && atoi(f->d_name) != dirfd(d)) printf("fd %s\n", f->d_name);
    if (d) closedir(d);
    disposition("INT", SIGINT);
    disposition("QUIT", SIGQUIT);
    disposition("PIPE", SIGPIPE);
    disposition("TERM", SIGTERM);
    disposition("HUP", SIGHUP);
    return atoi(argv[2]);
  }
  if (argc >= 2 && strcmp(argv[1], "term") == 0) {
    signal(SIGTERM, on_term);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < 2000 && !got_term; ++i) usleep(10000);
    return got_term ? 7 : 1;
  }
  fprintf(stderr, "usage: front_probe env STATUS | term\n");
  return 2;
}
