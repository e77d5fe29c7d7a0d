// The thread registry: every program thread's state, from the creating call
// (prepare_thread) through its start (begin_thread) to its end (end_thread),
// and the recycling of ended threads' states once the profiler thread has
// drained their samples.
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>

#include <functional>
#include <new>
#include <string>
#include <vector>

#include "clock.h"
#include "config.h"
#include "counters.h"
#include "progress.h"
#include "real.h"
#include "runtime_internal.h"
#include "sampler.h"
#include "warnings.h"

COZ_REAL_FN(pthread_sigmask, nullptr)

namespace coz {

InternalLock g_registry_lock;
pthread_key_t g_thread_key;
// Program threads that have not ended yet (the main thread included). The
// profiler thread is not one of them, but glibc counts it: when the last
// program thread leaves with pthread_exit, glibc would wait for it forever
// instead of ending the process, so the runtime ends it (see thread_done).
std::atomic<long> g_live_threads{0};

namespace {

// Every tracked thread's state; exited ones are recycled once the profiler
// thread has drained their samples.
std::vector<ThreadState*>* g_threads = nullptr;
ThreadState* g_free = nullptr;
std::atomic<bool> g_timer_announced{false};

void register_state(ThreadState* t) {
  Locked g(g_registry_lock);
  g_threads->push_back(t);
}

// The calling thread's name, as the kernel has it, into its state.
void note_own_name(ThreadState* t) {
  char name[17] = {0};
  if (prctl(PR_GET_NAME, name) == 0) t->name.set(name);
}

// A program thread has ended. When it was the last one (the main thread left
// with pthread_exit earlier), end the process the way glibc does for the last
// thread, with exit(0): the profiler thread would otherwise keep it alive.
void thread_done() {
  if (g_live_threads.fetch_sub(1) == 1 && g_state.load() == kActive && raw_getpid() == g_pid) exit(0);
}

}  // namespace

void registry_init() {
  if (!g_threads) g_threads = new std::vector<ThreadState*>();
}

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

void for_each_live_thread(const std::function<void(ThreadState*)>& fn) {
  Locked g(g_registry_lock);
  for (ThreadState* t : *g_threads) fn(t);
}

void with_live_threads(const std::function<void(const std::vector<ThreadState*>&)>& fn) {
  std::vector<ThreadState*> live;
  Locked g(g_registry_lock);
  for (ThreadState* t : *g_threads)
    if (t->state.load() == kThreadLive) live.push_back(t);
  fn(live);
}

void forget_threads_in_child() {
  for (ThreadState* t : *g_threads) {
    t->ring_watch.store(0);  // (the profiler thread's look is not here: sampler_forget would wait for it)
    sampler_forget(t);
  }
  sampler_forget_cpu_rings();
  g_threads->clear();
}

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

}  // namespace coz
