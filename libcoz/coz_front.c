/* coz: the native front of the `coz` command. It starts coz-perf-warmup
 * for `coz run`, then becomes the Python interpreter that runs the command.
 *
 * Why it exists: a cold `coz run` (no perf event open on the machine for a
 * second) waits for the kernel's RCU grace period at the first perf event
 * (perf_warmup.c). The Python launcher can start the helper only once the
 * interpreter is up, 10-16 ms after exec on a 2-vCPU VM, so the grace period
 * (13-16 ms there) ended after the program had reached its first open. Started
 * here, about a millisecond after exec, the helper's wait runs beside the
 * interpreter's start instead.
 *
 * What it hands over: the helper's pid and the descriptor whose closing ends
 * it, in COZ_PERF_WARMUP ("PID:FD"); cozprof.library.adopt_perf_warmup takes
 * both, removes the variable and makes the descriptor close-on-exec, so the
 * profiled program inherits neither. Without a helper (none beside the
 * runtime, or any failure to start one) the variable is not set and the
 * Python launcher starts the helper itself, as without this front.
 *
 * The interpreter is $COZ_PYTHON, else the one the build was configured with
 * (COZ_PYTHON in CMake, set by scripts/bootstrap.sh to the project's
 * environment), else `python3` on PATH.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef COZ_PYTHON
#define COZ_PYTHON ""
#endif
#ifndef COZ_HELPER_DIR
#define COZ_HELPER_DIR ""
#endif

extern char **environ;

/* `coz run`'s status for its own errors (cozprof.errors.EXIT_LAUNCHER_ERROR). */
enum { EXIT_LAUNCHER_ERROR = 125, EXIT_USER_ERROR = 2 };

/* Runs the command as python/bin/coz does. sys.path[0] is the current folder
 * under -c; it is removed first, so that a file of the user's (a `signal.py`,
 * a `cozprof/`) cannot stand in for the package or the standard library. An
 * interpreter without the package says so in the command's words, with the
 * command's status for its own errors, not with a traceback. */
static const char kCode[] =
    "import sys\n"
    "del sys.path[0]\n"
    "try:\n"
    "    from cozprof.cli import main\n"
    "except ImportError as e:\n"
    "    sys.stderr.write(f'coz: error: {sys.executable} cannot import the cozprof package: {e}\\n'\n"
    "                     'coz: install it (scripts/bootstrap.sh build), or set COZ_PYTHON to an interpreter '\n"
    "                     'that has it\\n')\n"
    "    sys.exit(125 if sys.argv[1:2] == ['run'] else 2)\n"
    "sys.exit(main())\n";

/* The folder of `path` into `out` (with a trailing slash); 0 when it does not fit. */
static int folder_of(const char *path, char *out, size_t size) {
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) + 1 : 0;
  if (n == 0 || n >= size) return 0;
  memcpy(out, path, n);
  out[n] = '\0';
  return 1;
}

/* `folder` + coz-perf-warmup into `out` when that is an executable. */
static int helper_in(const char *folder, char *out, size_t size) {
  if (strlen(folder) + sizeof "/coz-perf-warmup" > size) return 0;
  strcpy(out, folder);
  if (out[0] && out[strlen(out) - 1] != '/') strcat(out, "/");
  strcat(out, "coz-perf-warmup");
  return access(out, X_OK) == 0;
}

/* coz-perf-warmup beside the runtime `coz run` will use: beside $COZ_LIBRARY
 * when it is set (cozprof.library.find_library's first choice), else beside
 * this program (the build puts it beside libcoz.so), else in the build folder
 * this program came from (a copy in the environment's bin/). */
static int helper_path(char *out, size_t size) {
  char folder[PATH_MAX];
  const char *given = getenv("COZ_LIBRARY");
  if (given && *given) {
    /* relative: left to the launcher, which resolves it */
    return given[0] == '/' && folder_of(given, folder, sizeof folder) && helper_in(folder, out, size);
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    if (folder_of(self, folder, sizeof folder) && helper_in(folder, out, size)) return 1;
  }
  return *COZ_HELPER_DIR && helper_in(COZ_HELPER_DIR, out, size);
}

/* Starts the helper with its standard input the read end of a pipe; keeps the
 * write end open across the exec below and says where it is. Every failure
 * is silent: the launcher then starts the helper itself. */
static void start_helper(void) {
  char helper[PATH_MAX];
  if (!helper_path(helper, sizeof helper)) return;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return;
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) goto out;
  posix_spawn_file_actions_adddup2(&fa, p[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  char *argv[] = {helper, NULL};
  pid_t pid;
  int started = posix_spawn(&pid, helper, &fa, NULL, argv, environ) == 0;
  posix_spawn_file_actions_destroy(&fa);
  if (started && fcntl(p[1], F_SETFD, 0) == 0) {
    char value[64];
    snprintf(value, sizeof value, "%d:%d", (int)pid, p[1]);
    if (setenv("COZ_PERF_WARMUP", value, 1) == 0) {
      close(p[0]);
      return;
    }
  }
  /* Not handed over: closing the write end ends a helper that started. */
out:
  close(p[0]);
  close(p[1]);
}

int main(int argc, char **argv) {
  unsetenv("COZ_PERF_WARMUP"); /* only this front's own hand-over counts */
  int running = argc >= 2 && strcmp(argv[1], "run") == 0;
  if (running) start_helper();
  const char *python = getenv("COZ_PYTHON");
  if (!python || !*python) python = COZ_PYTHON;
  if (!*python) python = "python3";
  char **args = calloc((size_t)argc + 3, sizeof *args);
  if (!args) return running ? EXIT_LAUNCHER_ERROR : EXIT_USER_ERROR;
  args[0] = (char *)python;
  args[1] = "-c";
  args[2] = (char *)kCode;
  for (int i = 1; i < argc; ++i) args[i + 2] = argv[i];
  execvp(python, args);
  int err = errno;
  fprintf(stderr, "coz: error: cannot run the Python interpreter '%s': %s\n", python, strerror(err));
  fprintf(stderr, "coz: set COZ_PYTHON to a python3 that has the cozprof package, "
                  "or run scripts/bootstrap.sh build\n");
  return running ? EXIT_LAUNCHER_ERROR : EXIT_USER_ERROR;
}
