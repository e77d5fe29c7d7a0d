#include "warnings.h"

#include <mutex>
#include <new>
#include <set>
#include <utility>
#include <vector>

#include "profile_writer.h"
#include "rawlog.h"
#include "runtime.h"

namespace coz {

namespace {

struct State {
  std::mutex mu;
  bool to_stderr = true;
  ProfileWriter* writer = nullptr;
  std::set<std::string> said;                             // code + message, once each
  std::vector<std::pair<std::string, std::string>> held;  // before the profile is open
};

// Heap, never destroyed: warnings may come from exit hooks.
State& state() {
  static State* s = new State();
  return *s;
}

}  // namespace

void warnings_configure(bool to_stderr, ProfileWriter* writer) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.to_stderr = to_stderr;
  s.writer = writer;
  if (!writer || !writer->is_open()) return;
  for (auto& w : s.held) writer->warning(w.first, w.second);
  s.held.clear();
}

void warnings_fork_prepare() { state().mu.lock(); }
void warnings_fork_parent() { state().mu.unlock(); }
void warnings_fork_child() {
  State& s = state();
  new (&s.mu) std::mutex();
  s.writer = nullptr;
  s.said.clear();
  s.held.clear();
}

void warn(const char* code, const std::string& message) {
  RuntimeGuard guard;  // its lock and write are the runtime's, not the program's
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.said.insert(std::string(code) + '\n' + message).second) return;
  if (s.to_stderr) raw_log("warning: %s", message.c_str());
  if (s.writer && s.writer->is_open())
    s.writer->warning(code, message);
  else
    s.held.emplace_back(code, message);
}

}  // namespace coz
