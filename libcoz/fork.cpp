// The fork handlers (pthread_atfork): the runtime's locks across the fork,
// and a child that starts without the parent's threads, events and profile.
#include "config.h"
#include "fds.h"
#include "loaded_objects.h"
#include "profile_writer.h"
#include "progress.h"
#include "runtime_internal.h"
#include "sampler.h"
#include "warnings.h"

namespace coz {

// Every runtime lock the child goes on using is taken around fork, so that
// none is inherited held by a thread that does not exist in the child (the
// profiler thread, or another program thread in the middle of a hook). The
// order is the one the runtime nests them in: objects, registry, signals,
// progress, warnings, then the leaves: the epoll table's and the unloaded
// objects' (loaded_objects.h). The line map and the profile writer are not
// among them: a child never uses its parent's (a followed child builds its
// own, a dormant one none), so a fork never waits for the profiler thread's
// DWARF reading.
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
  forget_threads_in_child();
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

}  // namespace coz
