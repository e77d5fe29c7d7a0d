/* The native front's `coz run`: the program started before the interpreter.
 *
 * Why: the Python launcher reached the program's exec 16-17 ms after `coz`
 * started on a 2-vCPU VM, nearly all of it the interpreter's own start
 * (benchmarks.md, "Where the launcher's 20 ms go"). For a plain command line
 * this file does what the launcher would do before the program runs (read the
 * options, check the program and the library, build the environment, start
 * the program) and hands the running program over to the launcher, which
 * waits for it and prints the summary as it does for a program it started.
 *
 * What it takes: only what it can do exactly as the launcher would. Anything
 * else it declines, and the launcher does it all, as before: an option not in
 * the table below, a value it would have to interpret (a time with a
 * fraction, `%p` in the output, a stream as the output), a script, a program
 * or library it cannot fully check, every error. Declining is always safe;
 * taking a command line the launcher would refuse, or building another
 * environment than its build_env, is a bug, and tests/e2e/test_front_run.py
 * compares the program's environment with the launcher's for each case this
 * file takes.
 *
 * The hand-over (COZ_SPAWNED, read by cozprof.launcher.adopt_spawned):
 * "PID:START_NS:DEV:INO:SIZE:LIBRARY". START_NS is CLOCK_MONOTONIC before the
 * spawn (the run's wall time starts there); DEV:INO:SIZE is the output file
 * before the run (three '-' when there was none: the summary reads what the
 * run appended); LIBRARY is the libcoz.so preloaded.
 *
 * Signals: until the launcher takes over, SIGINT and SIGQUIT (which the
 * terminal sends to the program too) are ignored, and SIGTERM and SIGHUP are
 * blocked: they wait for the launcher's handlers, which forward them to the
 * program. The program starts with the dispositions and mask `coz` started
 * with, and SIGPIPE and SIGXFSZ at their default, as the launcher's spawn
 * gives it.
 */
#define _GNU_SOURCE
#include "front_run.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/close_range.h>

extern char **environ;

/* The variables libcoz.so reads: cozprof.launcher.RUNTIME_VARIABLES, removed
 * from the inherited environment before the run's own are set. */
static const char *const kRuntimeVariables[] = {
    "COZ_OUTPUT", "COZ_FORMAT", "COZ_BINARY_SCOPE", "COZ_SOURCE_SCOPE", "COZ_PROGRESS_POINTS",
    "COZ_FIXED_LINE", "COZ_FIXED_FUNCTION", "COZ_FIXED_CALLSITE", "COZ_UNITS", "COZ_FIXED_SPEEDUP",
    "COZ_END_TO_END", "COZ_SAMPLE_PERIOD", "COZ_EXPERIMENT_LENGTH", "COZ_VERBOSE",
    "COZ_FOLLOW_CHILDREN", "COZ_BLOCKED_SCOPE", "COZ_LOCKS_ONLY", "COZ_LOCK_COUNTERS",
    "COZ_SAMPLING_ONLY", "COZ_WARN_STDERR", "COZ_LAUNCHER_PID",
    /* and the front's own hand-overs, which are the launcher's alone */
    "COZ_PERF_WARMUP", "COZ_SPAWNED", "LD_PRELOAD", NULL};

enum Opt { kBinary, kSource, kProgress, kOutput, kFixedLine, kFormat, kSamplePeriod, kExperimentLength,
           kSamplingOnly, kLocksOnly, kEndToEnd, kNoLockCounters, kVerbose };

/* The options taken here, with their names in cozprof.launcher.RUN_OPTIONS. */
static const struct {
  const char *flag;
  enum Opt opt;
  int takes_value;
} kOptions[] = {
    {"-b", kBinary, 1},           {"--binary-scope", kBinary, 1},
    {"-s", kSource, 1},           {"--source-scope", kSource, 1},
    {"-p", kProgress, 1},         {"--progress", kProgress, 1},
    {"-o", kOutput, 1},           {"--output", kOutput, 1},
    {"--fixed-line", kFixedLine, 1},
    {"--format", kFormat, 1},
    {"--sample-period", kSamplePeriod, 1},
    {"--experiment-length", kExperimentLength, 1},
    {"--sampling-only", kSamplingOnly, 0},
    {"--locks-only", kLocksOnly, 0},
    {"--end-to-end", kEndToEnd, 0},
    {"--no-lock-counters", kNoLockCounters, 0},
    {"-v", kVerbose, 0},          {"--verbose", kVerbose, 0},
};

/* A string that grows; `failed` once anything did not fit. */
struct Text {
  char buf[PATH_MAX + 4096];
  size_t len;
  int failed;
};

static void put(struct Text *t, const char *s) {
  size_t n = strlen(s);
  if (t->len + n >= sizeof t->buf) {
    t->failed = 1;
    return;
  }
  memcpy(t->buf + t->len, s, n + 1);
  t->len += n;
}

/* Appends `value` to a tab-separated list. */
static void append(struct Text *t, const char *value) {
  if (t->len) put(t, "\t");
  put(t, value);
}

struct Run {
  struct Text binary, source, progress;
  const char *output, *fixed_line, *format;
  long long sample_period_ns, experiment_length_ns; /* 0: the default */
  int sampling_only, locks_only, end_to_end, no_lock_counters, verbose;
};

/* FILE:LINE as launcher._is_line takes it: something, a colon, a line number from 1. */
static int is_line(const char *s) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s || colon[1] < '1' || colon[1] > '9') return 0;
  for (const char *p = colon + 1; *p; ++p)
    if (*p < '0' || *p > '9') return 0;
  return 1;
}

/* A whole number with an optional unit, as launcher.parse_time reads it; 0
 * for anything else (a fraction, an exponent, spaces: the launcher reads those). */
static long long parse_time(const char *s, long long default_unit) {
  long long n = 0;
  const char *p = s;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (p - s >= 13) return 0;
    n = n * 10 + (*p - '0');
  }
  if (p == s) return 0;
  long long unit = !*p                 ? default_unit
                   : !strcmp(p, "ns") ? 1
                   : !strcmp(p, "us") ? 1000
                   : !strcmp(p, "ms") ? 1000000
                   : !strcmp(p, "s")  ? 1000000000
                                      : 0;
  if (!unit || n > 3600000000000LL / unit) return 0; /* over an hour (and before n * unit could overflow) */
  return n * unit; /* 0 for a zero: refused, as the launcher refuses it */
}

/* Reads `coz run`'s options (those before '---'); 0 when any is not taken here. */
static int read_options(char **options, int count, struct Run *r) {
  memset(r, 0, sizeof *r);
  r->output = "profile.coz";
  r->format = "json";
  for (int i = 0; i < count; ++i) {
    const char *arg = options[i], *value = NULL;
    char name[64];
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (len >= sizeof name) return 0;
    memcpy(name, arg, len);
    name[len] = '\0';
    size_t k = 0;
    while (k < sizeof kOptions / sizeof *kOptions && strcmp(kOptions[k].flag, name) != 0) ++k;
    if (k == sizeof kOptions / sizeof *kOptions) return 0;
    if (!kOptions[k].takes_value) {
      if (eq) return 0;
    } else {
      value = eq ? eq + 1 : (i + 1 < count ? options[++i] : NULL);
      /* Empty, a dash first, or a tab or a newline: the launcher's to judge. */
      if (!value || !*value || *value == '-' || strpbrk(value, "\t\n")) return 0;
    }
    switch (kOptions[k].opt) {
      case kBinary: append(&r->binary, value); break;
      case kSource: append(&r->source, value); break;
      case kProgress:
        if (!is_line(value)) return 0;
        append(&r->progress, value);
        break;
      case kOutput: r->output = value; break;
      case kFixedLine:
        if (!is_line(value)) return 0;
        r->fixed_line = value;
        break;
      case kFormat:
        if (strcmp(value, "json") != 0 && strcmp(value, "legacy") != 0) return 0;
        r->format = value;
        break;
      case kSamplePeriod:
        if (!(r->sample_period_ns = parse_time(value, 1000000))) return 0;
        break;
      case kExperimentLength:
        if (!(r->experiment_length_ns = parse_time(value, 1000000000))) return 0;
        break;
      case kSamplingOnly: r->sampling_only = 1; break;
      case kLocksOnly: r->locks_only = 1; break;
      case kEndToEnd: r->end_to_end = 1; break;
      case kNoLockCounters: r->no_lock_counters = 1; break;
      case kVerbose: r->verbose = 1; break;
    }
  }
  /* launcher.validate's refusals among these options */
  int experiments = r->fixed_line || r->end_to_end;
  if ((r->sampling_only || r->locks_only) && (experiments || (r->sampling_only && r->locks_only))) return 0;
  if (r->output && strcmp(r->output, "-") == 0) return 0; /* refused, with its hint */
  return !r->binary.failed && !r->source.failed && !r->progress.failed;
}

int front_plain_path(const char *path) {
  size_t n = strlen(path);
  if (n == 0 || path[n - 1] == '/' || strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../"))
    return 0;
  if (strcmp(path, ".") == 0 || strcmp(path, "..") == 0 || strncmp(path, "./", 2) == 0 ||
      strncmp(path, "../", 3) == 0)
    return 0;
  return !((n >= 2 && strcmp(path + n - 2, "/.") == 0) || (n >= 3 && strcmp(path + n - 3, "/..") == 0));
}

/* os.path.abspath(path) for a plain path (front_plain_path); 0 otherwise. */
static int absolute(const char *path, struct Text *out) {
  if (!front_plain_path(path)) return 0;
  if (path[0] != '/') {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd) || strcmp(cwd, "/") == 0) return 0;
    put(out, cwd);
    put(out, "/");
  }
  put(out, path);
  return !out->failed;
}

/* The program as execvp finds it (launcher.resolve_program): the first
 * regular file with execute permission; 0 when there is none. */
static int resolve(const char *name, char *out, size_t size) {
  struct stat st;
  if (strchr(name, '/')) {
    if (strlen(name) >= size || stat(name, &st) != 0 || !S_ISREG(st.st_mode) || access(name, X_OK) != 0)
      return 0;
    strcpy(out, name);
    return 1;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  for (const char *dir = path;; ) {
    const char *end = strchr(dir, ':');
    size_t n = end ? (size_t)(end - dir) : strlen(dir);
    int w = n ? snprintf(out, size, "%.*s/%s", (int)n, dir, name) : snprintf(out, size, "./%s", name);
    if (w > 0 && (size_t)w < size && stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
      /* launcher.resolve_program: a regular file without x is an error of its own */
      return access(out, X_OK) == 0;
    }
    if (!end) return 0;
    dir = end + 1;
  }
}

/* The ELF header of `path` when it is a whole 64-bit little-endian one, the
 * only kind taken here (the launcher checks the others). */
static int elf_header(int fd, Elf64_Ehdr *h) {
  return pread(fd, h, sizeof *h, 0) == (ssize_t)sizeof *h && memcmp(h->e_ident, ELFMAG, SELFMAG) == 0 &&
         h->e_ident[EI_CLASS] == ELFCLASS64 && h->e_ident[EI_DATA] == ELFDATA2LSB &&
         h->e_phentsize == sizeof(Elf64_Phdr) && h->e_phnum > 0 && h->e_phnum < 256;
}

/* The program header of type `type`, when there is one. */
static int segment(int fd, const Elf64_Ehdr *h, uint32_t type, Elf64_Phdr *out) {
  Elf64_Phdr ph[256];
  size_t size = (size_t)h->e_phnum * sizeof *ph;
  if (pread(fd, ph, size, (off_t)h->e_phoff) != (ssize_t)size) return 0;
  for (int i = 0; i < h->e_phnum; ++i)
    if (ph[i].p_type == type) {
      *out = ph[i];
      return 1;
    }
  return 0;
}

/* launcher.check_preloadable and check_library, where all is well: the
 * program is dynamically linked (not a script), not setuid or setgid; the
 * library is a shared library (not a position-independent executable) of the
 * program's machine. */
static int preloadable(const char *program, const char *library) {
  struct stat st;
  Elf64_Ehdr ph, lh;
  Elf64_Phdr seg;
  int ok = 0, pfd = open(program, O_RDONLY | O_CLOEXEC), lfd = open(library, O_RDONLY | O_CLOEXEC);
  if (pfd < 0 || lfd < 0 || fstat(pfd, &st) != 0 || (st.st_mode & (S_ISUID | S_ISGID))) goto out;
  if (!elf_header(pfd, &ph) || !segment(pfd, &ph, PT_INTERP, &seg)) goto out;
  if (!elf_header(lfd, &lh) || lh.e_type != ET_DYN || lh.e_machine != ph.e_machine) goto out;
  if (segment(lfd, &lh, PT_DYNAMIC, &seg)) {
    Elf64_Dyn dyn[512];
    size_t size = seg.p_filesz < sizeof dyn ? seg.p_filesz : sizeof dyn;
    ssize_t got = pread(lfd, dyn, size, (off_t)seg.p_offset);
    if (got < 0) goto out;
    for (size_t i = 0; i < (size_t)got / sizeof *dyn && dyn[i].d_tag != DT_NULL; ++i)
      if (dyn[i].d_tag == DT_FLAGS_1 && (dyn[i].d_un.d_val & DF_1_PIE)) goto out;
  }
  ok = 1;
out:
  if (pfd >= 0) close(pfd);
  if (lfd >= 0) close(lfd);
  return ok;
}

/* An environment entry "NAME=value" in `store`, or NULL when it does not fit. */
static char *entry(struct Text *store, const char *name, const char *value) {
  size_t at = store->len;
  put(store, name);
  put(store, "=");
  put(store, value);
  if (store->failed) return NULL;
  store->len++; /* past the terminating NUL */
  return store->buf + at;
}

static int is_runtime_variable(const char *entry_text) {
  for (const char *const *v = kRuntimeVariables; *v; ++v) {
    size_t n = strlen(*v);
    if (strncmp(entry_text, *v, n) == 0 && entry_text[n] == '=') return 1;
  }
  return 0;
}

/* Every descriptor above 2 close-on-exec (the launcher's _spawn does so). */
static void close_inherited_on_exec(void) {
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  for (int fd = 3; fd < 65536; ++fd) {
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

pid_t front_run(int argc, char **argv, const char *library, char *handover, size_t handover_size) {
  int cut = 2;
  while (cut < argc && strcmp(argv[cut], "---") != 0) ++cut;
  if (cut >= argc - 1) return 0; /* no '---', or nothing after it */
  struct Run r;
  if (!read_options(argv + 2, cut - 2, &r)) return 0;

  static struct Text output, store;
  memset(&output, 0, sizeof output);
  memset(&store, 0, sizeof store);
  if (strchr(r.output, '%') || !absolute(r.output, &output)) return 0;
  struct stat out_st;
  int had_output = stat(output.buf, &out_st) == 0;
  if (had_output && (S_ISFIFO(out_st.st_mode) || S_ISCHR(out_st.st_mode) || S_ISSOCK(out_st.st_mode)))
    return 0; /* a stream: the launcher's summary handles it */

  char program[PATH_MAX];
  if (!resolve(argv[cut + 1], program, sizeof program) || !preloadable(program, library)) return 0;

  /* launcher.build_env */
  size_t inherited = 0;
  while (environ[inherited]) ++inherited;
  char **env = calloc(inherited + 32, sizeof *env);
  if (!env) return 0;
  size_t n = 0;
  const char *preload = getenv("LD_PRELOAD");
  for (size_t i = 0; i < inherited; ++i)
    if (!is_runtime_variable(environ[i])) env[n++] = environ[i];
  char number[32], pid_text[32];
  struct Text joined = {.len = 0};
  put(&joined, library);
  if (preload && *preload) {
    put(&joined, ":");
    put(&joined, preload);
  }
  if (joined.failed) goto decline;
  env[n++] = entry(&store, "LD_PRELOAD", joined.buf);
  env[n++] = entry(&store, "COZ_OUTPUT", output.buf);
  env[n++] = entry(&store, "COZ_FORMAT", r.format);
  env[n++] = entry(&store, "COZ_BINARY_SCOPE", r.binary.len ? r.binary.buf : "MAIN");
  env[n++] = entry(&store, "COZ_SOURCE_SCOPE", r.source.len ? r.source.buf : "%");
  env[n++] = entry(&store, "COZ_PROGRESS_POINTS", r.progress.buf);
  if (r.fixed_line) env[n++] = entry(&store, "COZ_FIXED_LINE", r.fixed_line);
  if (r.end_to_end) env[n++] = entry(&store, "COZ_END_TO_END", "1");
  if (r.sampling_only) env[n++] = entry(&store, "COZ_SAMPLING_ONLY", "1");
  if (r.locks_only) env[n++] = entry(&store, "COZ_LOCKS_ONLY", "1");
  if (r.no_lock_counters) env[n++] = entry(&store, "COZ_LOCK_COUNTERS", "0");
  env[n++] = entry(&store, "COZ_BLOCKED_SCOPE", "ils");
  snprintf(number, sizeof number, "%lld",
           r.sample_period_ns ? r.sample_period_ns : r.sampling_only ? 10000000LL : 1000000LL);
  env[n++] = entry(&store, "COZ_SAMPLE_PERIOD", number);
  snprintf(number, sizeof number, "%lld", r.experiment_length_ns ? r.experiment_length_ns : 500000000LL);
  env[n++] = entry(&store, "COZ_EXPERIMENT_LENGTH", number);
  env[n++] = entry(&store, "COZ_VERBOSE", r.verbose ? "1" : "0");
  env[n++] = entry(&store, "COZ_FOLLOW_CHILDREN", "0");
  snprintf(pid_text, sizeof pid_text, "%d", (int)getpid()); /* the launcher's pid: exec keeps it */
  env[n++] = entry(&store, "COZ_LAUNCHER_PID", pid_text);
  if (strcmp(r.format, "json") == 0) env[n++] = entry(&store, "COZ_WARN_STDERR", "0");
  env[n] = NULL;
  for (size_t i = 0; i < n; ++i)
    if (!env[i]) goto decline;

  /* Signals, as the launcher's spawn_and_wait sets them around its spawn. */
  sigset_t hold, old_mask, defaults;
  struct sigaction ignore, old_int, old_quit;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&hold);
  sigaddset(&hold, SIGTERM);
  sigaddset(&hold, SIGHUP);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGXFSZ);
  sigprocmask(SIG_BLOCK, &hold, &old_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  if (old_int.sa_handler != SIG_IGN) sigaddset(&defaults, SIGINT);
  if (old_quit.sa_handler != SIG_IGN) sigaddset(&defaults, SIGQUIT);

  posix_spawnattr_t attr;
  pid_t pid = 0;
  if (posix_spawnattr_init(&attr) == 0) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setsigmask(&attr, &old_mask);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    close_inherited_on_exec();
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    if (posix_spawn(&pid, program, NULL, &attr, argv + cut + 1, env) != 0) pid = 0;
    posix_spawnattr_destroy(&attr);
    int w = snprintf(handover, handover_size, "%d:%lld:", (int)pid,
                     (long long)start.tv_sec * 1000000000LL + start.tv_nsec);
    if (had_output)
      w += snprintf(handover + w, handover_size - (size_t)w, "%llu:%llu:%lld:", (unsigned long long)out_st.st_dev,
                    (unsigned long long)out_st.st_ino, (long long)out_st.st_size);
    else
      w += snprintf(handover + w, handover_size - (size_t)w, "-:-:-:");
    if (pid > 0 && (size_t)w + strlen(library) >= handover_size) {
      kill(pid, SIGKILL); /* cannot be handed over: cannot happen with PATH_MAX-long paths */
      pid = 0;
    }
    if (pid > 0) strcat(handover, library);
  }
  if (pid <= 0) { /* nothing started: the launcher's way, from the start */
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    pid = 0;
  }
  free(env);
  return pid;
decline:
  free(env);
  return 0;
}
