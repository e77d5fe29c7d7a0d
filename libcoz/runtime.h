// The runtime as the interposed symbols see it: start-up, threads, the
// delay hooks each wrapper calls, signal virtualization, fork and exit.
#pragma once

#include <pthread.h>

#include <signal.h>

#include <cerrno>

#include "delays.h"
#include "sampler.h"
#include "thread_state.h"
#include "waits.h"

namespace coz {

// Per-thread: the thread's state (null for untracked threads such as the
// profiler's), and a depth counter set while a thread runs runtime code, so
// that the runtime's own locks and calls do not trigger delay hooks.
extern __thread ThreadState* tls_state __attribute__((tls_model("initial-exec")));
extern __thread int tls_in_runtime __attribute__((tls_model("initial-exec")));

struct RuntimeGuard {
  RuntimeGuard() { tls_in_runtime++; }
  ~RuntimeGuard() { tls_in_runtime--; }
  RuntimeGuard(const RuntimeGuard&) = delete;
  RuntimeGuard& operator=(const RuntimeGuard&) = delete;
};

// Start-up, from the library constructor (idempotent).
void runtime_init();
// Resolves, before the first sample, the originals of the interposed calls
// the sample handler reaches (interpose.cpp).
void resolve_sample_handler_calls();
// Whether progress points are counted: only where experiments read them
// (not with --sampling-only or --locks-only).
bool progress_points_counted();

// The calling thread's state when its calls should carry delay hooks.
inline ThreadState* hooked_thread() {
  ThreadState* t = tls_state;
  if (!t || tls_in_runtime || !shared().sampling.load(std::memory_order_relaxed)) return nullptr;
  return t;
}

// Whether an experiment runs (or its delays drain) for a hooked thread:
// the answers that matter for delays only then are looked up only then.
inline bool experiment_running() { return hooked_thread() && shared().paying.load(std::memory_order_relaxed); }
inline bool fd_woken_by_sibling(int fd) { return experiment_running() && fd_links_siblings(fd); }

// Delay hooks of the wrappers (see delays.h for what they mean). They keep
// errno as the wrapped call left it.
// Without experiments (sampling-only, locks-only) a wake has nothing to
// settle: the profiler thread reads the samples, and no delay is owed. It
// cost a third of the hooks' time on locks_oversync, whose every unlock is one.
inline void wake(ThreadState* t) {  // before this thread releases another: catch up on own samples and debts
  if (!shared().delays.load(std::memory_order_relaxed)) return;
  int e = errno;
  process_samples(t, nullptr);
  errno = e;
}
// Before this thread takes a lock: pays what it owes now, outside the
// critical section. Owed delays paid inside one (at the holder's wake,
// unlock or sample) lengthen it for every thread queued on the lock, so the
// debts of threads sharing the lock are paid one after another instead of
// side by side (docs/analysis.md, "More threads than cores: where a debt is paid").
//
// The thread's records are read first when its ring holds any (switch
// records of a preemption since its last look, most often): the credit for
// that preemption is then known before the debt is paid (delays.h,
// note_preempted). An empty ring, as in a loop of uncontended locks, costs
// one comparison.
inline void settle_before_lock(ThreadState* t) {
  if (!shared().paying.load(std::memory_order_relaxed)) return;
  int e = errno;
  if (ring_has_records(t)) {
    process_samples(t, nullptr);
  } else if (t->enter()) {
    catch_up(t);
    t->leave();
  }
  errno = e;
}
inline void hook_wake() {
  if (ThreadState* t = hooked_thread()) wake(t);
}
inline void hook_pre_block() {
  if (ThreadState* t = hooked_thread()) pre_block(t);
}
// `caller`: the interposed function's return address (the call site when
// the program called it directly).
inline void hook_post_block(WaitKind kind, bool woken_by_program_thread, void* caller) {
  if (ThreadState* t = hooked_thread()) {
    int e = errno;
    end_wait(t, kind, woken_by_program_thread, reinterpret_cast<uintptr_t>(caller));
    errno = e;
  }
}
inline void hook_unwound_wait(WaitKind kind, void* caller) {
  if (ThreadState* t = hooked_thread()) {
    int e = errno;
    unwound_wait(t, kind, reinterpret_cast<uintptr_t>(caller));
    errno = e;
  }
}
// A wrapped wait, from before the call to its return (then hook_post_block
// ends it): the constructor begins it (pre_block) and notes its kind and call
// site; the destructor ends a wait left by an unwind instead of a return (a
// thread cancelled in it, an exception thrown through it), which
// hook_post_block would otherwise never end: the thread's waited time read
// as `other`, and it stayed blocked to the runtime.
class WaitGuard {
 public:
  WaitGuard(WaitKind kind, void* caller) : kind_(kind), caller_(caller) {
    if (ThreadState* t = hooked_thread()) {
      pre_block(t);
      armed_ = true;  // ends only a wait it began
      if (t->wait_depth == 1) {
        t->open_wait_kind = static_cast<uint8_t>(kind);
        t->open_wait_caller = reinterpret_cast<uintptr_t>(caller);
      }
    }
  }
  WaitGuard(const WaitGuard&) = delete;
  WaitGuard& operator=(const WaitGuard&) = delete;
  ~WaitGuard() {
    if (armed_) hook_unwound_wait(kind_, caller_);
  }
  void returned() { armed_ = false; }

 private:
  WaitKind kind_;
  void* caller_;
  bool armed_ = false;
};

// longjmp and siglongjmp: called with a wait open, the thread is in a signal
// handler that interrupted the wait, and jumps out of it: the wait ends there
// (jumped_out_of_waits), as it does when unwound.
inline void hook_jump() {
  if (ThreadState* t = hooked_thread()) {
    if (t->wait_depth) {
      int e = errno;
      jumped_out_of_waits(t);
      errno = e;
    }
  }
}

// Threads.
struct ThreadStart;
ThreadStart* prepare_thread(void* (*fn)(void*), void* arg);  // in the creating thread
void* thread_trampoline(void* start);                        // start routine of the new thread
ThreadStart* prepare_c11_thread(int (*fn)(void*), void* arg);  // thrd_create
int c11_thread_trampoline(void* start);
void discard_thread_start(ThreadStart* start);               // pthread_create failed
// A rename that succeeded: prctl(PR_SET_NAME) by the calling thread, or
// pthread_setname_np(`handle`, ...) by any thread. The thread's state keeps
// the name (ThreadState::name) for the profiler thread.
void on_thread_renamed(pthread_t handle, const char* name);


// _exit/_Exit in the profiled process: write the final records first.
void on_fast_exit();

// daemon(3) in the profiled process. glibc's ends the parent with an _exit
// of its own, which no interposition sees: the thread calling daemon() is
// marked, and the fork's parent handler, which runs only once the child
// exists, writes the parent's final records (as on_fast_exit). A failed fork
// returns -1 and the profile goes on.
extern __thread bool tls_in_daemon __attribute__((tls_model("initial-exec")));

// execve and the like in the profiled process: when the exec can succeed
// (`file` is executable, looked for in PATH with `search_path` as execvp
// does; `fd` is open for fexecve), the final records are written first: the
// new image keeps nothing of this one (the run ends with reason "exec"; the
// new image's runtime starts a new run).
void on_exec(const char* file, bool search_path);
void on_exec_fd(int fd);

// Signals: the runtime owns the sample signal and, while the program leaves
// them at their default action, SIGINT/SIGTERM/SIGHUP and the crashes' SIGSEGV,
// SIGBUS, SIGILL, SIGFPE and SIGABRT (to write the final
// records before dying the same way). The program sees its own view.
bool signal_is_virtualized(int sig);
int virtual_sigaction(int sig, const struct sigaction* act, struct sigaction* oldact);
// Filters the sample signal out of masks the program sets, and puts the
// program's own view back into the old mask it reads.
using SigmaskFn = int (*)(int, const sigset_t*, sigset_t*);
int virtual_sigmask(SigmaskFn real, int how, const sigset_t* set, sigset_t* oldset);
// sigaltstack as the program sees it: the alternate stack the runtime gave
// a thread that had none (give_alt_stack, signals.cpp) reads as none, a
// stack the program sets replaces it (one too small for the sample signal's
// frame only in the program's view), and disabling it keeps it.
int virtual_sigaltstack(const stack_t* ss, stack_t* old);

}  // namespace coz
