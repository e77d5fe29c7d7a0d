// Signals: the runtime's handlers and the program's view of the signals it
// shares with it (docs/runtime.md, "Signals, masks and the program's own
// handlers").
//
// runs in signal context: no malloc, no locks, no stdio, in the functions
// whose comment says "runs in signal context" (the handlers and what they
// call). The rest (install_signals, virtual_sigaction and the other
// virtual_* calls, the alternate stacks) runs in program threads outside
// any handler.
//
// The runtime owns the sample signal, and the signals whose default action
// ends the process while the program leaves them at it: it catches those to
// write the final records, then dies of them as the program would have. The
// program sees its own dispositions, masks and alternate stacks.
#include <fcntl.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "real.h"
#include "runtime_internal.h"
#include "sampler.h"
#include "stacks.h"

COZ_REAL_FN(pthread_sigmask, nullptr)
COZ_REAL_FN(sigaction, nullptr)

namespace coz {

InternalLock g_signal_lock;

namespace {

// The program's own sample signals (sigqueue, kill, its timers) that arrived
// while the program had blocked that signal. The runtime never really blocks
// it (its samples must flow), so it keeps them here and queues them again
// when the program unblocks the signal, as the kernel would have held them.
constexpr int kMaxDeferred = 8;
__thread siginfo_t tls_deferred[kMaxDeferred] __attribute__((tls_model("initial-exec")));
__thread int tls_deferred_count __attribute__((tls_model("initial-exec"))) = 0;

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
struct sigaction g_program_action[_NSIG];  // the program's view of virtualized signals

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

// Whether an alternate stack of `bytes` is too small for the sample
// signal: the kernel's frame (AT_MINSIGSTKSZ: 3,376 bytes on an AVX-512
// CPU, where the constant MINSIGSTKSZ says 2,048) and the handler's own
// frame before it moves to the runtime's stack (528 bytes measured), with
// room to spare.
bool too_small_for_samples(size_t bytes) {
  const size_t frame = std::max<size_t>(getauxval(AT_MINSIGSTKSZ), 2048);
  return bytes < frame + 1024;
}

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

}  // namespace

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

void resolve_signal_calls() {
  real_pthread_sigmask();
  real_sigaction();
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
