// The runtime's own state, shared by its parts and by nothing else: start-up
// and exit (runtime.cpp), the thread registry (threads.cpp), the virtualized
// signals and their handlers (signals.cpp) and the fork handlers (fork.cpp).
// The interposed symbols see runtime.h.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

#include <atomic>
#include <functional>
#include <vector>

#include "runtime.h"
#include "sys.h"

namespace coz {

struct Config;
class LineMap;
class ProfileWriter;
class Profiler;

// --- the run (runtime.cpp) ----------------------------------------------------

enum RunState { kUninit, kStarting, kActive, kDormant };
extern std::atomic<int> g_state;
extern std::atomic<bool> g_shutdown_started;

extern Config* g_config;  // heap: usable whatever the order of static initialization
extern LineMap* g_lines;
extern ProfileWriter* g_writer;
extern Profiler* g_profiler;
extern pid_t g_pid;
extern std::atomic<pid_t> g_profiler_tid;

inline pid_t raw_getpid() { return static_cast<pid_t>(sys(SYS_getpid)); }
inline pid_t raw_gettid() { return static_cast<pid_t>(sys(SYS_gettid)); }

// A lock that bypasses our own interposed pthread functions (its calls are
// resolved once, in runtime.cpp, at start-up).
class InternalLock {
 public:
  void lock();
  void unlock();
  void reinit();

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};
struct Locked {
  explicit Locked(InternalLock& l) : l_(l) { l_.lock(); }
  ~Locked() { l_.unlock(); }
  InternalLock& l_;
};

// Objects already seen by dl_iterate_phdr.
extern InternalLock g_objects_lock;

// Has the profiler thread write the final records and waits for them (at
// most 10 s). runs in signal context too (on_final_signal): futex, write
// and clock calls only.
void finish(const char* reason);
// The same, when this is the profiled process (not a vfork child, which
// shares its memory: the parent's profile goes on).
void finish_in_profiled_process(const char* reason);

// --- the thread registry (threads.cpp) ----------------------------------------

extern InternalLock g_registry_lock;
extern pthread_key_t g_thread_key;
// Program threads that have not ended yet (the main thread included).
extern std::atomic<long> g_live_threads;

void registry_init();
ThreadState* alloc_state();
// Starts sampling the calling thread. `inherited`: the creator already set
// the thread's delay counts level with its own.
void begin_thread(ThreadState* t, bool inherited);
// Thread-exit destructor (the key's): every way out of a thread passes here.
void end_thread(void* arg);
// Every tracked thread, ended ones included; then recycles the states the
// drain retired.
void for_each_thread(const std::function<void(ThreadState*)>& fn);
// Every registered thread, ended ones not yet recycled too, recycling none
// (the profiler thread's looks while it reads debug information).
void for_each_live_thread(const std::function<void(ThreadState*)>& fn);
// Calls fn with the threads running now, the registry's lock held.
void with_live_threads(const std::function<void(const std::vector<ThreadState*>&)>& fn);
// A forked child: the parent's threads, events and rings do not exist here.
void forget_threads_in_child();

// --- signals (signals.cpp) ------------------------------------------------------

extern InternalLock g_signal_lock;

// Resolves the real calls the signal handlers make, before any can run.
void resolve_signal_calls();
void install_signals();
// Gives the program back the real dispositions it asked for (a dormant child).
void restore_signals();
// A thread without an alternate signal stack is given one of the runtime's
// at its start; at its end it is turned off (the mapping stays with the
// state); a forked child's one thread starts without one.
void give_alt_stack(ThreadState* t);
void take_alt_stack(ThreadState* t);
void drop_alt_stack_in_child(ThreadState* t);

// --- fork (fork.cpp) ------------------------------------------------------------

void fork_prepare();
void fork_parent();
void fork_child();

}  // namespace coz
