// Start-up and exit: the options read, the line map and the profile opened,
// the profiler thread started, the main thread's sampling begun; and the
// final records written at exit, exec, _exit or a deadly signal. The thread
// registry (threads.cpp), the virtualized signals (signals.cpp) and the fork
// handlers (fork.cpp) share this file's state through runtime_internal.h.
#include "runtime.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "clock.h"
#include "config.h"
#include "counters.h"
#include "environment.h"
#include "experiment.h"
#include "fds.h"
#include "line_map.h"
#include "loaded_objects.h"
#include "profile_writer.h"
#include "progress.h"
#include "rawlog.h"
#include "real.h"
#include "runtime_internal.h"
#include "sampler.h"
#include "warnings.h"
#include "sys.h"

COZ_REAL_FN(pthread_create, nullptr)
COZ_REAL_FN(pthread_mutex_lock, nullptr)
COZ_REAL_FN(pthread_mutex_unlock, nullptr)
COZ_REAL_FN(pthread_sigmask, nullptr)

namespace coz {

__thread ThreadState* tls_state __attribute__((tls_model("initial-exec"))) = nullptr;
__thread int tls_in_runtime __attribute__((tls_model("initial-exec"))) = 0;
__thread bool tls_in_daemon __attribute__((tls_model("initial-exec"))) = false;

std::atomic<int> g_state{kUninit};
std::atomic<bool> g_shutdown_started{false};
Config* g_config = nullptr;
LineMap* g_lines = nullptr;
ProfileWriter* g_writer = nullptr;
Profiler* g_profiler = nullptr;
pid_t g_pid = 0;
std::atomic<pid_t> g_profiler_tid{0};
InternalLock g_objects_lock;

void InternalLock::lock() { real_pthread_mutex_lock()(&m_); }
void InternalLock::unlock() { real_pthread_mutex_unlock()(&m_); }
void InternalLock::reinit() { new (&m_) pthread_mutex_t(PTHREAD_MUTEX_INITIALIZER); }

namespace {

// Objects looked at (registered with the line map or not), by load bias and
// name: a library loaded where an unloaded one was is another object.
std::set<std::pair<uintptr_t, std::string>>* g_seen_objects = nullptr;

// Registers every object not seen yet with the line map, and publishes the
// executable ranges of the in-scope ones to the sample handler.
void scan_objects() {
  Locked g(g_objects_lock);
  Dl_info self;
  dladdr(reinterpret_cast<void*>(&scan_objects), &self);
  bool changed = false;
  std::vector<LoadedObject> objects = loaded_objects();
  // Those unloaded since (dlclose): their addresses are no longer their lines.
  std::set<std::pair<uintptr_t, std::string>> loaded;
  for (const LoadedObject& o : objects) loaded.insert({o.bias, o.name});
  for (auto it = g_seen_objects->begin(); it != g_seen_objects->end();) {
    if (loaded.count(*it)) {
      ++it;
      continue;
    }
    g_lines->remove_object(it->second, it->first);
    it = g_seen_objects->erase(it);
    changed = true;
  }
  for (const LoadedObject& o : objects) {
    const char* name = o.name.c_str();
    if (!o.is_main && (!*name || is_vdso(o.name))) continue;
    if (self.dli_fname && strcmp(name, self.dli_fname) == 0) continue;
    if (!g_seen_objects->insert({o.bias, o.name}).second) continue;
    if (g_lines->add_object(o.is_main ? "" : o.name, o.bias, o.is_main)) changed = true;
  }
  publish_loaded_objects(std::move(objects));  // for libunwind in program threads
  if (changed) shared().scope.store(make_range_set(g_lines->attributable_ranges()), std::memory_order_release);
}

}  // namespace

// How long exit waits for the profiler thread's final records (threads,
// stacks, locks, counters, shutdown). Symbolizing the stacks takes a few
// milliseconds on a quiet machine but over a second on a loaded one, where
// a wait of 0.5 s lost every final record of 1 run in 4. Only a profiler
// thread that cannot finish makes the exit wait this long; it says so.
constexpr uint64_t kFinalRecordsWaitNs = 10000000000ull;  // 10 s

// runs in signal context too (on_final_signal, signals.cpp): futex, write
// and clock calls only.
void finish(const char* reason) {
  if (g_state.load() != kActive) return;
  if (g_shutdown_started.exchange(true)) {
    // Another thread is having the final records written: a SIGTERM sent to
    // the group and passed on by the launcher reaches a second thread while
    // the first waits (the signal is blocked only in its handler's thread),
    // or exit() runs beside a signal. This one waits for them too: its
    // die_by_default or its exit would otherwise end the process before them.
    if (g_profiler) g_profiler->wait_final(kFinalRecordsWaitNs);
    return;
  }
  shared().paying.store(false);
  shared().selected.store(nullptr);
  if (g_profiler) {
    g_profiler->request_stop(reason);
    if (!g_profiler->wait_final(kFinalRecordsWaitNs))
      raw_log("warning: the profile's final records (threads, stacks, shutdown) were not written within "
              "10 s; the profile ends without them");
  }
}

namespace {

void at_exit_hook() { finish("exit"); }

// The exit status of a start the runtime refused (a bad option, a line that
// matches nothing): coz's own error, as `coz run` and `env` use it.
constexpr int kStartFailedStatus = 125;

[[noreturn]] void fail_start(const std::string& message, const char* hint) {
  raw_log("error: %s", message.c_str());
  if (hint) raw_log("%s", hint);
  _exit(kStartFailedStatus);
}

// A child process profiled with --follow-children writes its own file.
std::string output_name(const Config& c, bool root) {
  std::string out = expand_output_name(c.output, raw_getpid());
  if (root || c.output.find("%p") != std::string::npos) return out;
  size_t slash = out.rfind('/');
  size_t dot = out.rfind('.');
  std::string suffix = "." + std::to_string(raw_getpid());
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) return out.insert(dot, suffix);
  return out + suffix;
}

// The GNU build-id of the main executable, in hex, read from its mapped
// PT_NOTE segments; empty when it has none.
std::string main_build_id() {
  std::string out;
  std::vector<LoadedObject> objects = loaded_objects();
  if (objects.empty()) return out;
  const LoadedObject& main = objects.front();  // the main program never unloads: its notes stay mapped
  for (const ElfW(Phdr)& ph : main.phdrs) {
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(main.bias + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr)* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof *n;
      const unsigned char* desc = reinterpret_cast<const unsigned char*>(name + ((n->n_namesz + 3) & ~3u));
      if (reinterpret_cast<const char*>(desc) + n->n_descsz > end) break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        static const char digits[] = "0123456789abcdef";
        for (unsigned j = 0; j < n->n_descsz; j++) {
          out += digits[desc[j] >> 4];
          out += digits[desc[j] & 15];
        }
        return out;
      }
      p = reinterpret_cast<const char*>(desc) + ((n->n_descsz + 3) & ~3u);
    }
  }
  return out;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Says once per object which in-scope objects have no line information
// (before main, and when the profiler thread notices a new library).
// Libraries are named in one line.
std::set<std::string>* g_reported_no_debug = nullptr;
void report_missing_debug_info() {
  if (!g_reported_no_debug) g_reported_no_debug = new std::set<std::string>();
  std::string exe = self_exe();
  std::string libraries;
  size_t count = 0;
  for (const std::string& path : g_lines->objects_without_debug_info()) {
    if (!g_reported_no_debug->insert(path).second) continue;
    if (path == exe) {
      warn("no-debug-info", path + " has no debug information: rebuild it with -g (or install its debug "
                                   "symbols), or choose other binaries with --binary-scope");
    } else {
      libraries += (count++ ? ", " : "") + path;
    }
  }
  if (count) {
    warn("no-debug-info",
         (count == 1 ? "1 in-scope library has" : std::to_string(count) + " in-scope libraries have") +
             " no debug information and cannot be profiled: " + libraries +
             " (install their debug symbols, or narrow --binary-scope)");
  }
  // Not a lack of debug information: the file could not be opened, most
  // often because the program's open-file limit was reached.
  for (const auto& [path, error] : g_lines->objects_not_opened()) {
    if (!g_reported_no_debug->insert(path).second) continue;
    bool no_fd = error == EMFILE || error == ENFILE;
    warn("object-not-opened", path + " could not be opened (" + std::string(strerror(error)) +
                                  "): its lines cannot be profiled" +
                                  (no_fd ? "; raise the open-file limit (ulimit -n)" : ""));
  }
}

// Called by the profiler thread between experiments and every few
// milliseconds: maps objects loaded (dlopen) since the last look, and
// forgets those unloaded (dlclose). Cheap when nothing changed: the loader's
// counters are read from the first object only.
void poll_objects() {
  static unsigned long long seen_changes = 0;
  unsigned long long changes = loader_changes();
  if (changes == seen_changes) return;
  seen_changes = changes;
  scan_objects();
  report_missing_debug_info();
}

void* profiler_main(void*) {
  // Everything this thread calls is the runtime's own: the locks libdw
  // initializes while symbolizing (one rwlock per compilation unit: over a
  // thousand for libc's debug file) are not the program's, and recording
  // each one's initialization site cost a whole stack unwind.
  tls_in_runtime = 1;
  g_profiler_tid.store(raw_gettid());
  sampler_ignore_thread(raw_gettid());  // it inherited the CPU rings' events (sampling-only)
  g_profiler->run();
  return nullptr;
}
}  // namespace

bool progress_points_counted() { return !g_config || !(g_config->sampling_only || g_config->locks_only); }

// The interposing library defines it (interpose.cpp); the unit tests' core
// library, which interposes nothing, has nothing to resolve.
__attribute__((weak)) void resolve_sample_handler_calls() {}

void runtime_init() {
  int expected = kUninit;
  if (!g_state.compare_exchange_strong(expected, kStarting)) return;
  RuntimeGuard guard;

  std::string error;
  Config config;
  if (!parse_config([](const char* name) { return getenv(name); }, &config, &error))
    fail_start(error, "set COZ_* variables through 'coz run' (see 'coz run --help')");
  g_config = new Config(config);

  bool root = config.launcher_pid == 0 || getppid() == config.launcher_pid;
  // Followed children need the variables; so does every process when the
  // runtime was preloaded by hand (no launcher: whoever loads it is profiled).
  if (!config.follow_children && config.launcher_pid != 0) {
    Dl_info self{};
    dladdr(reinterpret_cast<void*>(&runtime_init), &self);
    hide_runtime_environment(config_variables(), self.dli_fname, root);
  }
  if (!root && !config.follow_children) {
    g_state.store(kDormant);
    return;
  }
  g_pid = raw_getpid();
  resolve_sample_handler_calls();
  // Resolved before any handler can run: the sample handler masks signals
  // with its pthread_sigmask when it forwards a program's signal; the
  // internal lock's calls are resolved beside it.
  resolve_signal_calls();
  real_pthread_mutex_lock();
  real_pthread_mutex_unlock();
  raw_log_keep_stderr();
  registry_init();
  if (!g_seen_objects) g_seen_objects = new std::set<std::pair<uintptr_t, std::string>>();
  g_seen_objects->clear();

  g_lines = new LineMap(config.binary_scope, config.source_scope);
  scan_objects();

  uint64_t start_mono = now_mono();
  ProfilerHooks hooks;
  hooks.for_each_thread = for_each_thread;
  hooks.for_each_live_thread = for_each_live_thread;
  hooks.poll_objects = poll_objects;
  hooks.live_tids = [] {
    std::vector<pid_t> tids;
    with_live_threads([&](const std::vector<ThreadState*>& live) {
      for (ThreadState* t : live)
        if (t->tid) tids.push_back(t->tid);
    });
    return tids;
  };
  hooks.hardware_counters = [](std::vector<std::pair<std::string, uint64_t>>* out, std::string* why) {
    with_live_threads([&](const std::vector<ThreadState*>& live) { hardware_totals(live, out, why); });
  };
  hardware_probe();
  const UsableCpus cpus = usable_cpus();  // a container's CPU quota counts, not only the affinity mask
  shared().cpus.store(cpus.cpus, std::memory_order_relaxed);
  g_writer = new ProfileWriter();  // opened below, once the options are known to be good
  g_profiler = new Profiler(config, g_lines, g_writer, hooks);
  {
    uintptr_t start, end, unwinder_start, unwinder_end;
    runtime_text(&start, &end);
    unwinder_text(&unwinder_start, &unwinder_end);
    g_profiler->set_runtime_code(start, end, unwinder_start, unwinder_end, runtime_unwinding_frame());
  }
  g_profiler->set_start_time(start_mono);

  auto scope_text = [&]() {
    std::string s;
    for (auto& p : config.binary_scope) s += (s.empty() ? "" : ", ") + p;
    return s;
  };
  if (!config.fixed_line.empty()) {
    std::vector<const Line*> found = g_lines->find(config.fixed_line);
    if (found.empty())
      fail_start("--fixed-line " + config.fixed_line + " matches no line with code in the binary scope (" +
                     scope_text() + ")",
                 "check the file name and line number (a line with no code, such as a comment or a "
                 "declaration, cannot be chosen), or widen --binary-scope");
    std::vector<AddrRange> ranges;
    for (const Line* l : found) {
      std::vector<AddrRange> r = g_lines->ranges_of(l);
      ranges.insert(ranges.end(), r.begin(), r.end());
    }
    g_profiler->set_fixed(found[0], ranges);
  }
  if (!config.fixed_function.empty() || !config.fixed_callsite.empty()) {
    std::string why, hint;
    const bool fn = !config.fixed_function.empty();
    if (!g_profiler->set_fixed(fn ? Unit::kFunction : Unit::kCallsite, fn ? config.fixed_function : config.fixed_callsite,
                               &why, &hint))
      fail_start(why, hint.c_str());
  }
  if (!config.progress_points.empty()) {
    std::vector<std::pair<std::string, std::vector<uintptr_t>>> bps;
    for (const std::string& p : config.progress_points) {
      std::vector<const Line*> found = g_lines->find(p);
      if (found.empty())
        fail_start("--progress " + p + " matches no line with code in the binary scope (" + scope_text() + ")",
                   "check the file name and line number, or widen --binary-scope");
      // One hardware breakpoint per point: at the line's entry.
      bps.emplace_back(p, std::vector<uintptr_t>{g_lines->entry_address(found[0])});
    }
    if (bps.size() > static_cast<size_t>(ThreadState::kMaxBreakpoints))
      fail_start("at most 4 --progress points can be counted with hardware breakpoints", nullptr);
    progress().set_breakpoints(bps);
  }
  // An error above leaves no empty profile behind.
  std::string path = output_name(config, root);
  if (!g_writer->open(path, config.format == "legacy", &error))
    fail_start(error, "choose another file with 'coz run -o PATH'");
  fds_hold_reserve();
  // Runs without experiments may be long: their counts are kept as totals
  // (profile_writer.h), so that the profile grows with what was seen, not
  // with time.
  if (config.sampling_only || config.locks_only) g_writer->hold_totals();
  warnings_configure(config.warn_stderr, nullptr);
  if (!shared().scope.load())
    warn("no-line-in-scope", "the binary scope (" + scope_text() + ") matches no loaded object; nothing will be profiled");

  SamplerSettings settings;
  settings.period_ns = config.sample_period_ns;
  settings.signal_free = config.sampling_only;
  sampler_configure(settings);
  // Sampling-only: events per CPU that every thread inherits (sampler.h),
  // opened before the first thread state and the profiler thread; where
  // refused, each thread samples itself.
  if (config.sampling_only) {
    std::string why;
    if (!sampler_open_cpu_rings(&why) && config.verbose)
      raw_log("sampling-only: %s; each thread opens its own event", why.c_str());
  }
  // Once per process image: a followed child runs this again, and a second
  // registration would run every fork handler twice (taking each lock twice).
  static bool once = false;
  if (!once) {
    once = true;
    pthread_key_create(&g_thread_key, end_thread);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
  }
  install_signals();

  // The hooks of the interposed calls (in sampling-only mode they only
  // measure waits: no delay is ever owed, and the profiler thread alone
  // reads the perf rings).
  uint32_t scope_bits = 0;
  for (char c : config.blocked_scope)  // b (or y, its earlier spelling): synchronization
    scope_bits |= 1u << static_cast<int>(c == 'i' ? WaitKind::kIo : c == 'l' ? WaitKind::kLock
                                        : c == 's' ? WaitKind::kSleep : WaitKind::kSync);
  shared().blocked_scope.store(scope_bits);
  shared().delays.store(!config.sampling_only && !config.locks_only);
  shared().sampling.store(true);
  g_live_threads.store(1);
  ThreadState* main_state = alloc_state();
  begin_thread(main_state, false);

  StartupRecord sr;
  sr.time_ns = now_real();
  sr.pid = g_pid;
  sr.argv0 = self_exe();
  sr.build_id = main_build_id();
  sr.mode = config.locks_only      ? "locks-only"
            : config.sampling_only ? "sampling-only"
            : config.end_to_end  ? "end-to-end"
            : config.fixed_line.empty() && config.fixed_function.empty() && config.fixed_callsite.empty()
                ? "causal"
                : "fixed-line";
  sr.sample_period_ns = config.sample_period_ns;
  sr.experiment_length_ns = config.experiment_length_ns;
  sr.cpus = cpus.cpus;
  sr.cpu_quota = cpus.quota;
  sr.sampler = sampler_uses_timer() ? "timer" : sampler_cpu_rings() ? "perf_event_cpu" : "perf_event";
  sr.binary_scope = config.binary_scope;
  sr.source_scope = config.source_scope;
  sr.fixed_line = !config.fixed_function.empty() ? config.fixed_function
                  : !config.fixed_callsite.empty() ? config.fixed_callsite
                                                   : config.fixed_line;
  sr.fixed_unit = !config.fixed_function.empty() ? "function"
                  : !config.fixed_callsite.empty() ? "callsite"
                  : !config.fixed_line.empty()     ? "line"
                                                   : "";
  sr.units = config.units;
  sr.fixed_speedup = config.fixed_speedup;
  sr.blocked_scope = config.blocked_scope;
  g_writer->startup(sr);
  warnings_configure(config.warn_stderr, g_writer);  // the warnings held so far follow the startup record
  report_missing_debug_info();

  // The profiler thread takes no signal of the program's.
  sigset_t all, old;
  sigfillset(&all);
  real_pthread_sigmask()(SIG_SETMASK, &all, &old);
  pthread_t tid;
  int rc = real_pthread_create()(&tid, nullptr, profiler_main, nullptr);
  real_pthread_sigmask()(SIG_SETMASK, &old, nullptr);
  if (rc != 0) fail_start(std::string("cannot start the profiler thread: ") + strerror(rc), nullptr);
  pthread_detach(tid);

  g_state.store(kActive);
  atexit(at_exit_hook);
  // quick_exit runs no atexit handler, and ends with an _exit inside libc
  // that no wrapper sees: registered first, this one runs after the
  // program's own at_quick_exit handlers, as at_exit_hook after its atexit ones.
  at_quick_exit(at_exit_hook);
}

void finish_in_profiled_process(const char* reason) {
  if (g_state.load() != kActive || raw_getpid() != g_pid) return;
  finish(reason);
}

void on_fast_exit() { finish_in_profiled_process("exit"); }

namespace {
bool executable(const char* path) { return path && access(path, X_OK) == 0; }

// As execvp looks for `file`: as given when it names a folder, else in PATH.
// No allocation: execvp runs in vfork children too.
bool found_in_path(const char* file) {
  if (!file || !*file) return false;
  if (strchr(file, '/')) return executable(file);
  const char* path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  size_t flen = strlen(file);
  char full[PATH_MAX];
  for (const char* p = path;;) {
    const char* end = strchr(p, ':');
    size_t dlen = end ? static_cast<size_t>(end - p) : strlen(p);
    const char* dir = dlen ? p : ".";
    size_t use = dlen ? dlen : 1;
    if (use + 1 + flen < sizeof full) {
      memcpy(full, dir, use);
      full[use] = '/';
      memcpy(full + use + 1, file, flen + 1);
      if (executable(full)) return true;
    }
    if (!end) return false;
    p = end + 1;
  }
}
}  // namespace

void on_exec(const char* file, bool search_path) {
  // Only when the exec can succeed: a program (a shell) trying candidates in
  // turn stays profiled until one runs.
  if (search_path ? found_in_path(file) : executable(file)) finish_in_profiled_process("exec");
}

void on_exec_fd(int fd) {
  if (fcntl(fd, F_GETFD) != -1) finish_in_profiled_process("exec");
}

}  // namespace coz
