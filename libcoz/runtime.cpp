#include "runtime.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
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
#include "sampler.h"
#include "warnings.h"
#include "sys.h"

COZ_REAL_FN(pthread_create, nullptr)
COZ_REAL_FN(pthread_mutex_lock, nullptr)
COZ_REAL_FN(pthread_mutex_unlock, nullptr)
COZ_REAL_FN(pthread_sigmask, nullptr)
COZ_REAL_FN(sigaction, nullptr)

namespace coz {

__thread ThreadState* tls_state __attribute__((tls_model("initial-exec"))) = nullptr;
__thread int tls_in_runtime __attribute__((tls_model("initial-exec"))) = 0;
__thread bool tls_in_daemon __attribute__((tls_model("initial-exec"))) = false;

namespace {

// The program's own sample signals (sigqueue, kill, its timers) that arrived
// while the program had blocked that signal. The runtime never really blocks
// it (its samples must flow), so it keeps them here and queues them again
// when the program unblocks the signal, as the kernel would have held them.
constexpr int kMaxDeferred = 8;
__thread siginfo_t tls_deferred[kMaxDeferred] __attribute__((tls_model("initial-exec")));
__thread int tls_deferred_count __attribute__((tls_model("initial-exec"))) = 0;

enum State { kUninit, kStarting, kActive, kDormant };
std::atomic<int> g_state{kUninit};
std::atomic<bool> g_shutdown_started{false};

Config* g_config = nullptr;  // heap: usable whatever the order of static initialization
LineMap* g_lines = nullptr;
ProfileWriter* g_writer = nullptr;
Profiler* g_profiler = nullptr;
pid_t g_pid = 0;
pthread_key_t g_thread_key;
std::atomic<bool> g_timer_announced{false};
// Program threads that have not ended yet (the main thread included). The
// profiler thread is not one of them, but glibc counts it: when the last
// program thread leaves with pthread_exit, glibc would wait for it forever
// instead of ending the process, so the runtime ends it (see thread_done).
std::atomic<long> g_live_threads{0};

// A lock that bypasses our own interposed pthread functions.
class InternalLock {
 public:
  void lock() { real_pthread_mutex_lock()(&m_); }
  void unlock() { real_pthread_mutex_unlock()(&m_); }
  void reinit() { new (&m_) pthread_mutex_t(PTHREAD_MUTEX_INITIALIZER); }

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};
struct Locked {
  explicit Locked(InternalLock& l) : l_(l) { l_.lock(); }
  ~Locked() { l_.unlock(); }
  InternalLock& l_;
};

// Thread registry: every tracked thread's state; exited ones are recycled
// once the profiler thread has drained their samples.
InternalLock g_registry_lock;
std::vector<ThreadState*>* g_threads = nullptr;
ThreadState* g_free = nullptr;

// Objects already seen by dl_iterate_phdr, by load address.
InternalLock g_objects_lock;
// Objects looked at (registered with the line map or not), by load bias and
// name: a library loaded where an unloaded one was is another object.
std::set<std::pair<uintptr_t, std::string>>* g_seen_objects = nullptr;

// Signal virtualization.
InternalLock g_signal_lock;
// The signals whose default action ends the process (signal(7)), which the
// runtime catches while the program leaves them at it: the final records are
// written before the process dies of it. Those that end it plainly: a user's
// or a supervisor's (SIGINT, SIGTERM, SIGHUP, SIGUSR1...), a write to a pipe
// whose reader left (SIGPIPE: `coz run --- prog | head`), a timer the
// program set without a handler (SIGALRM, SIGVTALRM, SIGPROF)...
const int kTerminateSignals[] = {SIGINT,    SIGTERM, SIGHUP, SIGPIPE, SIGALRM,  SIGUSR1,
                                 SIGUSR2,   SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT};
// ... and those that also dump core: a crash, SIGQUIT (Ctrl-\), the CPU time
// and file size limits, a seccomp filter's SIGSYS. (Not SIGTRAP: debuggers'.)
const int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGQUIT, SIGXCPU, SIGXFSZ, SIGSYS};
// Of those, the faults the kernel raises at an instruction, which happen
// again there when the handler returns (si_code > 0 tells them from the same
// signals sent by kill, raise or abort).
const int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
std::atomic<pid_t> g_profiler_tid{0};
struct sigaction g_program_action[_NSIG];  // the program's view of virtualized signals

pid_t raw_getpid() { return static_cast<pid_t>(sys(SYS_getpid)); }
pid_t raw_gettid() { return static_cast<pid_t>(sys(SYS_gettid)); }

ThreadState* alloc_state() {
  Locked g(g_registry_lock);
  ThreadState* t = g_free;
  if (t) {
    g_free = t->next_free;
    char* alt = t->alt_stack;  // (off since its thread ended: kept for the next one)
    t->~ThreadState();
    new (t) ThreadState();
    t->alt_stack = alt;
  } else {
    t = new ThreadState();
  }
  return t;
}

void register_state(ThreadState* t) {
  Locked g(g_registry_lock);
  g_threads->push_back(t);
}

void for_each_thread(const std::function<void(ThreadState*)>& fn) {
  Locked g(g_registry_lock);
  std::vector<ThreadState*>& v = *g_threads;
  for (ThreadState* t : v) fn(t);
  // Recycle the states of threads the drain retired (it took all they left).
  size_t keep = 0;
  for (ThreadState* t : v) {
    if (recyclable(*t)) {
      t->next_free = g_free;
      g_free = t;
    } else {
      v[keep++] = t;
    }
  }
  v.resize(keep);
}

// The calling thread's name, as the kernel has it, into its state.
void note_own_name(ThreadState* t) {
  char name[17] = {0};
  if (prctl(PR_GET_NAME, name) == 0) t->name.set(name);
}

// A thread without an alternate signal stack is given one of the runtime's:
// a crash by stack overflow (the kernel then finds no room on the thread's
// stack for a handler's frame) would otherwise kill the process before the
// final records are written. The program still sees none (sigaltstack is
// virtualized), and one it sets replaces the runtime's. 64 KiB (Go uses a
// thread's existing alternate stack for its signal handlers, and wants 32
// KiB), with an unmapped page below it. The mapping stays with the thread's
// state when the thread ends, turned off, and serves the next thread given
// that state: a program that starts a thread per task maps none after its
// first ones (mapping and unmapping cost a thread about 6 us).
constexpr size_t kAltStackBytes = 64 * 1024;
constexpr size_t kAltGuardBytes = 4096;  // map_guarded_stack's page

// The runtime's stack as sigaltstack names it (ss_sp: its lowest usable
// address), or null.
char* alt_stack_sp(const ThreadState* t) { return t->alt_stack ? t->alt_stack + kAltGuardBytes : nullptr; }

// The runtime's stack as sigaltstack sets it.
stack_t runtime_alt_stack(const ThreadState* t) {
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = alt_stack_sp(t);
  ss.ss_size = kAltStackBytes;
  return ss;
}

void give_alt_stack(ThreadState* t) {
  stack_t cur;
  if (sys(SYS_sigaltstack, nullptr, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
  if (!t->alt_stack) t->alt_stack = map_guarded_stack(kAltGuardBytes + kAltStackBytes);
  if (!t->alt_stack) return;
  const stack_t ss = runtime_alt_stack(t);
  sys(SYS_sigaltstack, &ss, nullptr);
}

// At the thread's end: turned off, unless the program set its own since.
// The mapping stays with the state (alloc_state).
void take_alt_stack(ThreadState* t) {
  if (!t->alt_stack) return;
  stack_t cur;
  if (sys(SYS_sigaltstack, nullptr, &cur) != 0) {
    t->alt_stack = nullptr;  // (not known to be off: left mapped, not reused)
    return;
  }
  if (cur.ss_sp == alt_stack_sp(t) && !(cur.ss_flags & SS_DISABLE)) {
    stack_t off;
    memset(&off, 0, sizeof off);
    off.ss_flags = SS_DISABLE;
    if (sys(SYS_sigaltstack, &off, nullptr) != 0) t->alt_stack = nullptr;  // (running on it)
  }
}

// A forked child's one thread had the parent thread's alternate stack: the
// child starts without one, as it would have without the profiler (a child
// profiled with --follow-children gets its own at its start).
void drop_alt_stack_in_child(ThreadState* t) {
  if (!t || !t->alt_stack) return;
  char* mapping = t->alt_stack;
  take_alt_stack(t);
  if (t->alt_stack) sys(SYS_munmap, mapping, kAltGuardBytes + kAltStackBytes);
  t->alt_stack = nullptr;
  // A stack of the program's that only its view held is the child's for real.
  if (t->program_alt_set) sys(SYS_sigaltstack, &t->program_alt, nullptr);
  t->program_alt_set = false;
}

// Whether an alternate stack of `bytes` is too small for the sample
// signal: the kernel's frame (AT_MINSIGSTKSZ: 3,376 bytes on an AVX-512
// CPU, where the constant MINSIGSTKSZ says 2,048) and the handler's own
// frame before it moves to the runtime's stack (528 bytes measured), with
// room to spare.
bool too_small_for_samples(size_t bytes) {
  const size_t frame = std::max<size_t>(getauxval(AT_MINSIGSTKSZ), 2048);
  return bytes < frame + 1024;
}

// Starts sampling the calling thread.
// `inherited`: the creator already set the thread's delay counts level with its own.
void begin_thread(ThreadState* t, bool inherited) {
  RuntimeGuard guard;
  if (!inherited) inherit_delay(t, nullptr);
  give_alt_stack(t);
  // A sample signal blocked before we were in charge (a mask inherited
  // through exec): the program's view keeps it blocked, the real mask not.
  sigset_t cur;
  if (real_pthread_sigmask()(SIG_BLOCK, nullptr, &cur) == 0 && sigismember(&cur, sample_signal()) == 1) {
    t->program_blocks_sample_signal = true;
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, sample_signal());
    real_pthread_sigmask()(SIG_UNBLOCK, &ss, nullptr);
  }
  std::string why;
  t->tid = raw_gettid();
  // --locks-only: no sampling at all, only the interposed calls' counters.
  SamplerKind kind = g_config->locks_only ? SamplerKind::kPerfEvent : sampler_start(t, &why);
  if (kind == SamplerKind::kTimer && !g_timer_announced.exchange(true)) {
    warn("perf-event-refused", why + "; sampling with per-thread CPU timers instead");
  } else if (kind == SamplerKind::kNone) {
    warn("thread-not-sampled", "some threads cannot be sampled: " + why);
  }
  t->start_ns = now_mono();
  note_own_name(t);
  t->handle = static_cast<uintptr_t>(pthread_self());
  hardware_thread_start(t);
  progress().attach_thread(t);
  register_state(t);
  count_unblocked(+1);
  tls_state = t;
  pthread_setspecific(g_thread_key, t);
  sampler_thread_ready(t);
}

// A program thread has ended. When it was the last one (the main thread left
// with pthread_exit earlier), end the process the way glibc does for the last
// thread, with exit(0): the profiler thread would otherwise keep it alive.
void thread_done() {
  if (g_live_threads.fetch_sub(1) == 1 && g_state.load() == kActive && raw_getpid() == g_pid) exit(0);
}

// Thread-exit destructor: every way out of a thread (return, pthread_exit,
// cancellation) passes here.
void end_thread(void* arg) {
  ThreadState* t = static_cast<ThreadState*>(arg);
  if (!t || raw_getpid() != g_pid) return;
  {
    RuntimeGuard guard;
    sampler_stop(t);
    progress().detach_thread(t);
    hardware_thread_end(t);
    // Who it was, for its `thread` record: the profiler thread writes it
    // once the thread is gone (and its /proc entries with it).
    t->end_ns = now_mono();
    note_own_name(t);  // (a rename through /proc/self/task/N/comm is seen here only)
    // Migrations: counted from the CPU rings, or from its own records'
    // CPUs (complete: sampler_stop drained them), or read from /proc.
    if (!sampler_cpu_rings()) t->migrations = t->counts_moves ? t->cpu_moves : thread_migrations(t->tid);
    t->cpu_clock_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (!t->blocked) count_unblocked(-1);
    take_alt_stack(t);
    tls_state = nullptr;
    t->state.store(kThreadEnded);
  }
  thread_done();
}

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

// --- signals ----------------------------------------------------------------

template <size_t N>
bool among(const int (&signals)[N], int sig) {
  for (int s : signals)
    if (s == sig) return true;
  return false;
}

bool is_crash_signal(int sig) { return among(kCrashSignals, sig); }
bool is_fault_signal(int sig) { return among(kFaultSignals, sig); }

// The signals whose default action ends the process and that the runtime
// catches, while the program leaves them at it, to write the final records.
bool is_final_signal(int sig) { return among(kTerminateSignals, sig) || is_crash_signal(sig); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGVTALRM: return "SIGVTALRM";
    case SIGPROF: return "SIGPROF";
    case SIGIO: return "SIGIO";
    case SIGPWR: return "SIGPWR";
    case SIGSTKFLT: return "SIGSTKFLT";
    case SIGQUIT: return "SIGQUIT";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    default: return "signal";
  }
}

// The kernel's default action for `sig` back, for real.
void restore_default_action(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  real_sigaction()(sig, &dfl, nullptr);
}

// Dies of `sig` the way the program would have without us.
void die_by_default(int sig) {
  restore_default_action(sig);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  real_pthread_sigmask()(SIG_UNBLOCK, &set, nullptr);
  sys(SYS_tgkill, raw_getpid(), raw_gettid(), sig);
}

// How long exit waits for the profiler thread's final records (threads,
// stacks, locks, counters, shutdown). Symbolizing the stacks takes a few
// milliseconds on a quiet machine but over a second on a loaded one, where
// a wait of 0.5 s lost every final record of 1 run in 4. Only a profiler
// thread that cannot finish makes the exit wait this long; it says so.
constexpr uint64_t kFinalRecordsWaitNs = 10000000000ull;  // 10 s

// runs in signal context too (on_final_signal): futex, write and
// clock calls only.
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

// runs in signal context: a signal of kTerminateSignals or kCrashSignals,
// while the program keeps its default action. Uses only futex, write,
// sigaction and kill-family calls.
void on_final_signal(int sig, siginfo_t* si, void*) {
  int saved = errno;
  // The profiler thread's own crash: nobody is left to write the records.
  if (!(is_crash_signal(sig) && raw_gettid() == g_profiler_tid.load())) finish(signal_name(sig));
  if (is_crash_signal(sig)) {
    // The default action back, the handler returns. A fault the kernel
    // raised at an instruction (si_code > 0) happens again there; any other
    // signal (abort, raise, kill, the kernel's SIGXCPU or a seccomp filter's
    // SIGSYS, which do not happen again) is sent again, pending while this
    // handler blocks it, and arrives where the first one did. Either way the
    // process dies of it at the same place as without the profiler, and a
    // core dump shows that place, not this handler.
    restore_default_action(sig);
    if (!(is_fault_signal(sig) && si && si->si_code > 0)) sys(SYS_tgkill, raw_getpid(), raw_gettid(), sig);
  } else {
    die_by_default(sig);
  }
  errno = saved;
}

// A sample signal's work, handed to the runtime's stack for the thread.
struct SignalWork {
  ThreadState* t;
  void* uc;
  bool timer;   // the timer sampler's signal, else the perf descriptor's
  int overrun;  // (timer) periods it stands for beyond the first
};

void do_signal_work(void* p) {
  auto* w = static_cast<SignalWork*>(p);
  if (w->timer) process_timer_sample(w->t, w->uc, w->overrun);
  else process_samples(w->t, w->uc);
}

// runs in signal context: the sample signal. Ours when it comes from our
// perf descriptor or timer; anything else the program sent goes to the
// program's own handler for it. It is installed with SA_ONSTACK (Go requires
// it of every handler), and its own work moves to the runtime's stack for
// the thread (run_on_signal_stack): the program's alternate stack holds
// only the kernel's frame and this function's.
void on_sample_signal(int sig, siginfo_t* si, void* uc) {
  int saved = errno;
  ThreadState* t = tls_state;
  bool from_poll = si->si_code == POLL_IN || si->si_code == POLL_HUP || si->si_code == POLL_MSG ||
                   si->si_code == POLL_ERR || si->si_code == POLL_PRI || si->si_code == POLL_OUT;
  const bool timer = si->si_code == SI_TIMER && t && t->has_timer && si->si_value.sival_ptr == t;
  if (timer || (from_poll && t && t->perf_fd >= 0 && si->si_fd == t->perf_fd)) {
    RuntimeGuard guard;  // libunwind's own locks are not waits of the program
    SignalWork w{t, uc, timer, timer ? si->si_overrun : 0};
    if (t->alone) do_signal_work(&w);  // (its one signal: ioctls, no unwinding, no stack of its own needed)
    else run_on_signal_stack(t, do_signal_work, &w);
  } else {
    // The program's own: its timers, its O_ASYNC descriptors, sigqueue, kill.
    struct sigaction& pa = g_program_action[sig];
    // (SIG_DFL and SIG_IGN mean the same with or without SA_SIGINFO.)
    if (t && t->program_blocks_sample_signal) {
      if (tls_deferred_count < kMaxDeferred) tls_deferred[tls_deferred_count++] = *si;
    } else if (pa.sa_handler == SIG_DFL) {
      // A timer or descriptor notification while the program has no handler
      // is a late one of ours (its thread has just stopped sampling): drop it.
      // Anything else kills, as it would without the profiler.
      if (!from_poll && si->si_code != SI_TIMER) die_by_default(sig);
    } else if (pa.sa_handler != SIG_IGN) {
      // Run it as the kernel would: with its sa_mask blocked, and reset to
      // the default first when it asked for SA_RESETHAND.
      struct sigaction h = pa;
      if (h.sa_flags & SA_RESETHAND) {
        pa.sa_handler = SIG_DFL;
        pa.sa_flags &= ~SA_SIGINFO;
      }
      // (This handler blocks nearly every signal: the mask is the one the
      // signal interrupted, with the handler's own added.)
      sigset_t mask = static_cast<ucontext_t*>(uc)->uc_sigmask, old;
      sigorset(&mask, &mask, &h.sa_mask);
      if (!(h.sa_flags & SA_NODEFER)) sigaddset(&mask, sig);
      real_pthread_sigmask()(SIG_SETMASK, &mask, &old);
      if (h.sa_flags & SA_SIGINFO) h.sa_sigaction(sig, si, uc);
      else h.sa_handler(sig);
      real_pthread_sigmask()(SIG_SETMASK, &old, nullptr);
    }
  }
  errno = saved;
}

// Installs fn for sig, for real, with `flags` besides SA_SIGINFO and
// SA_RESTART and `mask` blocked while it runs (none by default).
void install_handler(int sig, void (*fn)(int, siginfo_t*, void*), int flags = 0, const sigset_t* mask = nullptr) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | flags;
  if (mask) sa.sa_mask = *mask;
  else sigemptyset(&sa.sa_mask);
  real_sigaction()(sig, &sa, nullptr);
}

// The sample signal's handler: on the thread's alternate stack, if it has
// one (SA_ONSTACK), and with every signal but the faults blocked while it
// runs. Its work runs on the runtime's stack, where the kernel does not
// know the thread is still using the alternate stack: a signal nested then
// would be given the top of that stack, over this handler's frame.
void install_sample_handler(int sig) {
  sigset_t mask;
  sigfillset(&mask);
  for (int fault : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS}) sigdelset(&mask, fault);
  install_handler(sig, on_sample_signal, SA_ONSTACK, &mask);
}

// runs in signal context: a handler of a final signal (is_final_signal) the
// program installed with SA_RESETHAND. The kernel would set the default action back
// as the handler starts: the runtime does so in its books (sigaction reads
// SIG_DFL back) and catches the signal again for the final records, then
// runs the handler.
void on_resethand_final_signal(int sig, siginfo_t* si, void* uc) {
  struct sigaction h = g_program_action[sig];
  memset(&g_program_action[sig], 0, sizeof g_program_action[sig]);
  g_program_action[sig].sa_handler = SIG_DFL;
  install_handler(sig, on_final_signal, SA_ONSTACK);
  if (h.sa_flags & SA_SIGINFO) h.sa_sigaction(sig, si, uc);
  else if (h.sa_handler != SIG_DFL && h.sa_handler != SIG_IGN) h.sa_handler(sig);
}

void install_signals() {
  Locked g(g_signal_lock);
  int ss = sample_signal();
  real_sigaction()(ss, nullptr, &g_program_action[ss]);
  install_sample_handler(ss);
  for (int sig = 1; sig < _NSIG; sig++) {
    if (!is_final_signal(sig)) continue;
    real_sigaction()(sig, nullptr, &g_program_action[sig]);
    if (g_program_action[sig].sa_handler == SIG_DFL) install_handler(sig, on_final_signal, SA_ONSTACK);
  }
}

// Gives the program back the real dispositions it asked for (a dormant child).
void restore_signals() {
  Locked g(g_signal_lock);
  real_sigaction()(sample_signal(), &g_program_action[sample_signal()], nullptr);
  for (int sig = 1; sig < _NSIG; sig++)
    if (is_final_signal(sig)) real_sigaction()(sig, &g_program_action[sig], nullptr);
}

// --- fork ---------------------------------------------------------------------

// Every runtime lock the child goes on using is taken around fork, so that
// none is inherited held by a thread that does not exist in the child (the
// profiler thread, or another program thread in the middle of a hook). The
// order is the one the runtime nests them in: objects, registry, signals,
// progress, warnings, then the leaves: the epoll table's and the unloaded
// objects' (loaded_objects.h). The line map and the profile writer are not
// among them: a child never uses its parent's (a followed child builds its
// own, a dormant one none), so a fork never waits for the profiler thread's
// DWARF reading.
void finish_in_profiled_process(const char* reason);
void fork_prepare() {
  g_objects_lock.lock();
  g_registry_lock.lock();
  g_signal_lock.lock();
  progress().fork_prepare();
  warnings_fork_prepare();
  fds_fork_prepare();
  unloaded_objects_fork_prepare();
}
// Both sides also treat the descriptors open at the fork as shared with
// another process from now on (fds_fork_parent/child, waits.h).
void fork_parent() {
  unloaded_objects_fork_parent();
  fds_fork_parent();
  warnings_fork_parent();
  progress().fork_parent();
  g_signal_lock.unlock();
  g_registry_lock.unlock();
  g_objects_lock.unlock();
  if (tls_in_daemon && g_state.load() == kActive) {  // glibc's daemon() _exits the parent next, unseen
    if (!g_config->follow_children)
      warn("daemon", "the program became a daemon (daemon()): its work goes on in a child process, which is "
                     "not profiled; --follow-children profiles it in its own file");
    finish_in_profiled_process("daemon");
  }
}
void fork_child() {
  tls_in_daemon = false;  // (daemon()'s child goes on as the program)
  RuntimeGuard guard;  // it closes the parent's descriptors of the runtime (close())
  unloaded_objects_fork_child();
  fds_fork_child();
  warnings_fork_child();
  progress().fork_child();
  g_signal_lock.reinit();
  g_registry_lock.reinit();
  g_objects_lock.reinit();
  drop_alt_stack_in_child(tls_state);
  if (g_state.load() != kActive) return;
  // The parent's threads, events and profiler thread do not exist here.
  for (ThreadState* t : *g_threads) {
    t->ring_watch.store(0);  // (the profiler thread's look is not here: sampler_forget would wait for it)
    sampler_forget(t);
  }
  sampler_forget_cpu_rings();
  g_threads->clear();
  shared().unblocked_threads.store(0);
  tls_state = nullptr;
  shared().sampling.store(false);
  shared().delays.store(false);
  shared().paying.store(false);
  shared().selected.store(nullptr);
  if (g_writer) g_writer->abandon();
  g_state.store(kDormant);
  restore_signals();
  if (g_config->follow_children) {
    // Profile the child afresh, into its own file.
    g_state.store(kUninit);
    g_shutdown_started.store(false);
    runtime_init();
  }
}

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

// --- public -------------------------------------------------------------------

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
  // This file's own copies: the sample handler masks signals with this
  // pthread_sigmask when it forwards a program's signal; the internal
  // lock's calls are resolved beside it.
  real_pthread_sigmask();
  real_pthread_mutex_lock();
  real_pthread_mutex_unlock();
  raw_log_keep_stderr();
  if (!g_threads) g_threads = new std::vector<ThreadState*>();
  if (!g_seen_objects) g_seen_objects = new std::set<std::pair<uintptr_t, std::string>>();
  g_seen_objects->clear();

  g_lines = new LineMap(config.binary_scope, config.source_scope);
  scan_objects();

  uint64_t start_mono = now_mono();
  ProfilerHooks hooks;
  hooks.for_each_thread = for_each_thread;
  hooks.for_each_live_thread = [](const std::function<void(ThreadState*)>& fn) {
    Locked g(g_registry_lock);
    for (ThreadState* t : *g_threads) fn(t);
  };
  hooks.poll_objects = poll_objects;
  hooks.live_tids = [] {
    std::vector<pid_t> tids;
    Locked g(g_registry_lock);
    for (ThreadState* t : *g_threads)
      if (t->state.load() == kThreadLive && t->tid) tids.push_back(t->tid);
    return tids;
  };
  hooks.hardware_counters = [](std::vector<std::pair<std::string, uint64_t>>* out, std::string* why) {
    Locked g(g_registry_lock);
    std::vector<ThreadState*> live;
    for (ThreadState* t : *g_threads)
      if (t->state.load() == kThreadLive) live.push_back(t);
    hardware_totals(live, out, why);
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

struct ThreadStart {
  void* (*fn)(void*);
  int (*c11_fn)(void*);  // thrd_create's start routine, or null
  void* arg;
  ThreadState* state;
};

namespace {
// The new thread's origin (ThreadState::origin_pc): none when it starts in
// scope; else the creating call's first in-scope frame, else the creator's
// own origin (a library's thread starting another).
uintptr_t thread_origin(uintptr_t fn) {
  const RangeSet* scope = shared().scope.load(std::memory_order_acquire);
  if (!scope || scope->contains(fn)) return 0;
  uintptr_t pcs[kMaxFrames];
  bool truncated = false;
  uint32_t n = call_stack(pcs, kMaxFrames, &truncated);
  for (uint32_t i = 0; i < n; i++)
    if (scope->contains(pcs[i])) return pcs[i];
  return tls_state ? tls_state->origin_pc : 0;
}
}  // namespace

ThreadStart* prepare_c11_thread(int (*fn)(void*), void* arg) {
  ThreadStart* s = prepare_thread(nullptr, arg);
  s->c11_fn = fn;
  if (s->state) {
    s->state->start_fn = reinterpret_cast<uintptr_t>(fn);
    s->state->origin_pc = thread_origin(s->state->start_fn);
  }
  return s;
}

ThreadStart* prepare_thread(void* (*fn)(void*), void* arg) {
  ThreadStart* s = new ThreadStart{fn, nullptr, arg, nullptr};
  if (g_state.load() == kActive && !tls_in_runtime) {
    RuntimeGuard guard;
    s->state = alloc_state();
    s->state->start_fn = reinterpret_cast<uintptr_t>(fn);  // its thread group
    if (fn) s->state->origin_pc = thread_origin(s->state->start_fn);
    inherit_delay(s->state, tls_state);  // a new thread starts level with its creator
    // ... and with its creator's signal mask, as the program sees it.
    s->state->program_blocks_sample_signal = tls_state && tls_state->program_blocks_sample_signal;
    g_live_threads.fetch_add(1);         // counted from here: its creator may leave before it starts
  }
  return s;
}

void on_thread_renamed(pthread_t handle, const char* name) {
  if (!name || g_state.load() != kActive || raw_getpid() != g_pid) return;
  if (pthread_equal(handle, pthread_self())) {
    if (tls_state) tls_state->name.set(name);
    return;
  }
  Locked g(g_registry_lock);
  for (ThreadState* t : *g_threads)
    if (t->state.load() == kThreadLive && t->handle == static_cast<uintptr_t>(handle)) t->name.set(name);
}

void discard_thread_start(ThreadStart* s) {
  if (s->state) {
    s->state->state.store(kThreadEnded);
    register_state(s->state);  // recycled by the profiler thread
    g_live_threads.fetch_sub(1);
  }
  delete s;
}

namespace {
// In the new thread: starts sampling it (when its creator prepared it to be)
// and frees its start block.
void enter_thread(ThreadStart* s) {
  if (s->state) {
    if (g_state.load() == kActive && raw_getpid() == g_pid) {
      begin_thread(s->state, true);
    } else {
      s->state->state.store(kThreadEnded);
      register_state(s->state);
      thread_done();
    }
  }
  delete s;
}
}  // namespace

void* thread_trampoline(void* arg) {
  ThreadStart* s = static_cast<ThreadStart*>(arg);
  void* (*fn)(void*) = s->fn;
  void* fn_arg = s->arg;
  enter_thread(s);
  return fn(fn_arg);
}

int c11_thread_trampoline(void* arg) {
  ThreadStart* s = static_cast<ThreadStart*>(arg);
  int (*fn)(void*) = s->c11_fn;
  void* fn_arg = s->arg;
  enter_thread(s);
  return fn(fn_arg);
}

namespace {
// The final records, when this is the profiled process (not a vfork child,
// which shares its memory: the parent's profile goes on).
void finish_in_profiled_process(const char* reason) {
  if (g_state.load() != kActive || raw_getpid() != g_pid) return;
  finish(reason);
}
}  // namespace

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

bool signal_is_virtualized(int sig) {
  return g_state.load() == kActive && (sig == sample_signal() || is_final_signal(sig));
}

int virtual_sigaction(int sig, const struct sigaction* act, struct sigaction* oldact) {
  Locked g(g_signal_lock);
  struct sigaction previous = g_program_action[sig];
  if (act) {
    g_program_action[sig] = *act;
    if (is_final_signal(sig)) {
      bool dfl = act->sa_handler == SIG_DFL;  // whatever SA_SIGINFO says
      struct sigaction once = *act;
      if (!dfl && act->sa_handler != SIG_IGN && (act->sa_flags & SA_RESETHAND)) {
        once.sa_flags = (act->sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
        once.sa_sigaction = on_resethand_final_signal;
      }
      if (dfl)
        install_handler(sig, on_final_signal, SA_ONSTACK);
      else if (real_sigaction()(sig, &once, nullptr) != 0) {
        g_program_action[sig] = previous;
        return -1;
      }
    }
  }
  if (oldact) *oldact = previous;
  return 0;
}

int virtual_sigaltstack(const stack_t* ss, stack_t* old) {
  ThreadState* t = tls_state;
  char* ours = t ? alt_stack_sp(t) : nullptr;
  stack_t cur;
  if (!ours || sys(SYS_sigaltstack, nullptr, &cur) != 0) return static_cast<int>(sys(SYS_sigaltstack, ss, old));
  const bool ours_in_place = cur.ss_sp == ours && !(cur.ss_flags & SS_DISABLE);
  const bool enabling = ss && !(ss->ss_flags & SS_DISABLE);
  const bool too_small = enabling && too_small_for_samples(ss->ss_size);
  if (!ours_in_place && !too_small) return static_cast<int>(sys(SYS_sigaltstack, ss, old));
  // What the program reads: while the runtime's is in place, its own too
  // small one, or none; else the one in place (its own).
  stack_t view = cur;
  if (ours_in_place) {
    memset(&view, 0, sizeof view);
    view.ss_flags = SS_DISABLE;
    if (t->program_alt_set) {
      view = t->program_alt;
      view.ss_flags &= ~SS_ONSTACK;
      if (cur.ss_flags & SS_ONSTACK) view.ss_flags |= SS_ONSTACK;  // (a handler on the runtime's)
    }
  }
  if (too_small) {
    // A stack the sample signal's frame would overflow (a program that
    // sets MINSIGSTKSZ, 2 KiB, on an AVX-512 CPU: its first sample killed
    // it): the kernel checks it, then the runtime's is put back, with every
    // signal blocked meanwhile; the program reads its own back. Its own
    // handlers that ask for the alternate stack run on the runtime's, where
    // on its own the kernel's frame alone would not have fit.
    const stack_t back = runtime_alt_stack(t);
    sigset_t all, mask;
    sigfillset(&all);
    real_pthread_sigmask()(SIG_SETMASK, &all, &mask);
    const long rc = sys(SYS_sigaltstack, ss, nullptr);
    const int err = errno;
    if (rc == 0) sys(SYS_sigaltstack, &back, nullptr);
    real_pthread_sigmask()(SIG_SETMASK, &mask, nullptr);
    if (rc != 0) {
      errno = err;
      return -1;
    }
    t->program_alt = *ss;
    t->program_alt_set = true;
  } else if (enabling) {
    // A stack of the program's that fits replaces the runtime's (the kernel
    // checks it); the runtime's stays mapped until the thread ends.
    if (sys(SYS_sigaltstack, ss, nullptr) != 0) return -1;
    t->program_alt_set = false;
  } else if (ss) {
    t->program_alt_set = false;  // disabled: the runtime's stays, read as none
  }
  if (old) *old = view;
  return 0;
}

int virtual_sigmask(SigmaskFn real, int how, const sigset_t* set, sigset_t* oldset) {
  int ss = sample_signal();
  ThreadState* t = tls_state;
  // The runtime's own calls (libunwind masks every signal while it holds
  // its locks) block the sample signal for real: a sample that interrupted
  // them would unwind with the same locks and deadlock.
  if (g_state.load() != kActive || !t || tls_in_runtime) return real(how, set, oldset);
  bool was_blocked = t->program_blocks_sample_signal;
  int rc;
  if (set) {
    sigset_t copy = *set;
    bool mentions = sigismember(&copy, ss) == 1;
    sigdelset(&copy, ss);
    rc = real(how, &copy, oldset);
    if (rc == 0) {
      if (how == SIG_SETMASK) t->program_blocks_sample_signal = mentions;
      else if (how == SIG_BLOCK && mentions) t->program_blocks_sample_signal = true;
      else if (how == SIG_UNBLOCK && mentions) t->program_blocks_sample_signal = false;
    }
  } else {
    rc = real(how, nullptr, oldset);
  }
  if (rc == 0 && oldset) {
    if (was_blocked) sigaddset(oldset, ss);
    else sigdelset(oldset, ss);
  }
  if (rc == 0 && was_blocked && !t->program_blocks_sample_signal) {
    // Unblocked: queue again what arrived meanwhile; it is delivered before
    // this call returns, as a pending signal would be.
    int n = tls_deferred_count;
    tls_deferred_count = 0;
    for (int i = 0; i < n; i++)
      sys(SYS_rt_tgsigqueueinfo, raw_getpid(), raw_gettid(), ss, &tls_deferred[i]);
  }
  return rc;
}

}  // namespace coz
