// The program's environment as it would be without the profiler.
//
// `coz run` hands the runtime its options in COZ_* variables and puts
// libcoz.so first in LD_PRELOAD. Once the runtime has read them, they are
// taken out of the process's environment (unless children are followed:
// they need them), so that the program reads the environment it gets
// without the profiler, and the processes it starts load no runtime: a
// sanitizer build among them refused to start ("ASan runtime does not come
// first in initial library list"), a 32-bit or chroot'ed one got a line
// from the dynamic loader, and each paid about 1 ms to load a runtime that
// stayed dormant. An exec of the profiled process itself (a wrapper
// script's `exec ./app`) is profiled as before: the variables go back into
// the environment that exec passes, whichever it is.
//
// /proc/PID/environ, the block the process started with, still shows them.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace coz {

// `preload` (LD_PRELOAD's value: entries separated by colons or spaces)
// without the first entry for which `is_self` holds, and that entry in
// *self ("" and `preload` as it is when none holds). The separators of the
// other entries are kept as they are.
std::string preload_without(const std::string& preload, const std::function<bool(const std::string&)>& is_self,
                            std::string* self);

// The environment an exec of the profiled process passes: `envp` without
// any of `names` or LD_PRELOAD, then `saved` (the runtime's variables, as
// "NAME=value"), and LD_PRELOAD with `self` first and envp's own entries
// after it, as `coz run` composed it.
std::vector<std::string> exec_environment(const char* const* envp, const std::vector<std::string>& saved,
                                          const std::string& self, const std::vector<const char*>& names);

// Takes the runtime's variables (`names`, and the entry of LD_PRELOAD that
// is this runtime's object, `self_path`) out of the environment; none of
// them when LD_PRELOAD has no such entry. With `profiled`, this process's
// execs get them back (ExecEnvironment). Before the program's threads run
// (the runtime's start).
void hide_runtime_environment(const std::vector<const char*>& names, const char* self_path, bool profiled);

// The environment to pass to an exec of `envp` (`environ` for the forms
// that take none): `envp` itself, unless this is the profiled process that
// hid the runtime's variables, which its next image must have. Allocates
// only then: in a vfork child (another process) it is `envp`.
class ExecEnvironment {
 public:
  explicit ExecEnvironment(char* const* envp);
  ExecEnvironment(const ExecEnvironment&) = delete;
  ExecEnvironment& operator=(const ExecEnvironment&) = delete;
  bool rebuilt() const { return rebuilt_; }
  char* const* get() const { return envp_; }

 private:
  bool rebuilt_ = false;
  char* const* envp_;
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

}  // namespace coz
