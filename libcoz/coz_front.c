/* coz: the native front of the `coz` command. For `coz run` it starts
 * coz-perf-warmup and, for a plain command line, the program itself
 * (front_run.c); then it becomes the Python interpreter that runs the command.
 *
 * Why it exists: the interpreter's start took 16-17 ms of every `coz run`
 * before the program could start (benchmarks.md, "Where the launcher's 20 ms
 * go"). Started here, the program runs while the interpreter starts, and the
 * launcher takes it over (COZ_SPAWNED, cozprof.launcher.adopt_spawned) to wait
 * for it and summarize the run. A command line front_run.c does not take
 * (every error among them) goes to the launcher as before.
 *
 * The helper: a cold `coz run` (no perf event open on the machine for a
 * second) waits for the kernel's RCU grace period at the first perf event
 * (perf_warmup.c). Started here, about a millisecond after exec, the helper's
 * wait runs beside the program's loading and the interpreter's start. Its pid
 * and the descriptor whose closing ends it go to the launcher in
 * COZ_PERF_WARMUP ("PID:FD"); cozprof.library.adopt_perf_warmup takes both,
 * removes the variable and makes the descriptor close-on-exec. Without a
 * helper (none beside the runtime, or any failure to start one) the variable
 * is not set and the Python launcher starts the helper itself.
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
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "front_run.h"

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
    "    import os\n"
    "    started = os.environ.get('COZ_SPAWNED', '').split(':')[0]\n"
    "    if started:\n"
    "        sys.stderr.write(f'coz: the program (pid {started}) was stopped\\n')\n"
    "        os.kill(int(started), 9)\n"
    "        os.waitpid(int(started), 0)\n"
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

/* `folder` + `name` into `out` when that is a file (executable: `exec`). */
static int file_in(const char *folder, const char *name, int exec, char *out, size_t size) {
  if (strlen(folder) + strlen(name) + 2 > size) return 0;
  strcpy(out, folder);
  if (out[0] && out[strlen(out) - 1] != '/') strcat(out, "/");
  strcat(out, name);
  return access(out, exec ? X_OK : R_OK) == 0;
}

/* The file `name` beside the runtime `coz run` will use: beside $COZ_LIBRARY
 * when it is set (cozprof.library.find_library's first choice), else beside
 * this program (the build puts it beside libcoz.so), else in the build folder
 * this program came from (a copy in the environment's bin/). */
static int beside_runtime(const char *name, int exec, char *out, size_t size) {
  char folder[PATH_MAX];
  const char *given = getenv("COZ_LIBRARY");
  if (given && *given) {
    /* relative: left to the launcher, which resolves it */
    return given[0] == '/' && folder_of(given, folder, sizeof folder) && file_in(folder, name, exec, out, size);
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    if (folder_of(self, folder, sizeof folder) && file_in(folder, name, exec, out, size)) return 1;
  }
  return *COZ_HELPER_DIR && file_in(COZ_HELPER_DIR, name, exec, out, size);
}

/* The libcoz.so the front's own start of the program preloads: $COZ_LIBRARY
 * as the launcher would take it (an absolute path written plainly, of a
 * regular file), else the one beside the runtime, its real path, as
 * find_library gives the build tree's. 0: none the front may take. */
static int library_path(char *out, size_t size) {
  const char *given = getenv("COZ_LIBRARY");
  struct stat st;
  if (given && *given) {
    if (given[0] != '/' || !front_plain_path(given) || strlen(given) >= size || stat(given, &st) != 0 ||
        !S_ISREG(st.st_mode))
      return 0;
    strcpy(out, given);
    return 1;
  }
  char found[PATH_MAX];
  return beside_runtime("libcoz.so", 0, found, sizeof found) && size >= PATH_MAX && realpath(found, out) &&
         stat(out, &st) == 0 && S_ISREG(st.st_mode);
}

/* Starts the helper with its standard input the read end of a pipe whose
 * write end, returned (close-on-exec until the caller says otherwise), ends
 * it when closed; says in COZ_PERF_WARMUP where both are. Every failure is
 * silent (-1): the launcher then starts the helper itself. */
static int start_helper(void) {
  char helper[PATH_MAX];
  if (!beside_runtime("coz-perf-warmup", 1, helper, sizeof helper)) return -1;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) goto out;
  posix_spawn_file_actions_adddup2(&fa, p[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  char *argv[] = {helper, NULL};
  pid_t pid;
  int started = posix_spawn(&pid, helper, &fa, NULL, argv, environ) == 0;
  posix_spawn_file_actions_destroy(&fa);
  if (started) {
    char value[64];
    snprintf(value, sizeof value, "%d:%d", (int)pid, p[1]);
    if (setenv("COZ_PERF_WARMUP", value, 1) == 0) {
      close(p[0]);
      return p[1];
    }
  }
  /* Not handed over: closing the write end ends a helper that started. */
out:
  close(p[0]);
  close(p[1]);
  return -1;
}

int main(int argc, char **argv) {
  unsetenv("COZ_PERF_WARMUP"); /* only this front's own hand-overs count */
  unsetenv("COZ_SPAWNED");
  int running = argc >= 2 && strcmp(argv[1], "run") == 0;
  pid_t spawned = 0;
  if (running) {
    int hold = start_helper();
    char library[PATH_MAX], handover[PATH_MAX + 128];
    if (library_path(library, sizeof library)) spawned = front_run(argc, argv, library, handover, sizeof handover);
    if (spawned > 0 && setenv("COZ_SPAWNED", handover, 1) != 0) {
      kill(spawned, SIGKILL);
      waitpid(spawned, NULL, 0);
      return EXIT_LAUNCHER_ERROR;
    }
    if (hold >= 0) fcntl(hold, F_SETFD, 0); /* the launcher's, across the exec */
  }
  const char *python = getenv("COZ_PYTHON");
  if (!python || !*python) python = COZ_PYTHON;
  if (!*python) python = "python3";
  char **args = calloc((size_t)argc + 3, sizeof *args);
  if (args) {
    args[0] = (char *)python;
    args[1] = "-c";
    args[2] = (char *)kCode;
    for (int i = 1; i < argc; ++i) args[i + 2] = argv[i];
    execvp(python, args);
    int err = errno;
    fprintf(stderr, "coz: error: cannot run the Python interpreter '%s': %s\n", python, strerror(err));
    fprintf(stderr, "coz: set COZ_PYTHON to a python3 that has the cozprof package, "
                    "or run scripts/bootstrap.sh build\n");
  }
  if (spawned > 0) { /* started, and no launcher to wait for it: it must not run on alone */
    fprintf(stderr, "coz: the program (pid %d) was stopped\n", (int)spawned);
    kill(spawned, SIGKILL);
    waitpid(spawned, NULL, 0);
  }
  return running ? EXIT_LAUNCHER_ERROR : EXIT_USER_ERROR;
}
