// The preload front end: start-up and the entry points that coz.h (ours or
// upstream's) finds with dlsym.
#include "progress.h"
#include "runtime.h"

#define COZ_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
// Shared libraries are initialized before the main program, so this runs
// before the program's own constructors and sees the threads they create.
// It may also run before the static initializers of the runtime's other
// files, and it starts the profiler thread: so the runtime has none (every
// global is constant-initialized or made on first use; tests/e2e/
// test_runtime.py checks the library's symbols).
__attribute__((constructor)) void coz_start() { coz::runtime_init(); }
}  // namespace

// The counter behind COZ_PROGRESS / COZ_PROGRESS_NAMED / COZ_BEGIN / COZ_END.
COZ_EXPORT coz_counter_layout* _coz_get_counter(int type, const char* name) {
  coz::RuntimeGuard guard;
  // Without experiments, no count is ever read: the point stays a no-op, as
  // without the profiler (a hot one shared by threads costs them a cache
  // line passed back and forth at every increment).
  if (!coz::progress_points_counted()) return nullptr;
  return coz::progress().counter(type, name);
}
// Custom synchronization: this thread is about to wait for another.
COZ_EXPORT void _coz_pre_block() { coz::hook_pre_block(); }
// ... and has resumed; `woken` when another program thread released it.
COZ_EXPORT void _coz_post_block(bool woken) {
  coz::hook_post_block(coz::WaitKind::kSync, woken, __builtin_return_address(0));
}
// This thread is about to release others: pay its delays first.
COZ_EXPORT void _coz_add_delays() { coz::hook_wake(); }
