#include "environment.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "sys.h"

extern char** environ;

namespace coz {

namespace {

bool is_separator(char c) { return c == ':' || c == ' '; }

// The hidden variables, kept for the profiled process's execs.
struct Hidden {
  long pid = 0;  // the profiled process; 0: none (a dormant one hid them for its children only)
  std::vector<const char*> names;
  std::vector<std::string> saved;
  std::string self;
};
Hidden* g_hidden = nullptr;

// Whether `entry` ("NAME=value") is the variable `name`.
bool names_variable(const char* entry, const char* name) {
  size_t n = strlen(name);
  return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

}  // namespace

std::string preload_without(const std::string& preload, const std::function<bool(const std::string&)>& is_self,
                            std::string* self) {
  self->clear();
  for (size_t at = 0; at < preload.size();) {
    if (is_separator(preload[at])) {
      at++;
      continue;
    }
    size_t end = at;
    while (end < preload.size() && !is_separator(preload[end])) end++;
    std::string entry = preload.substr(at, end - at);
    if (is_self(entry)) {
      *self = entry;
      // The entry and the separators after it (before it, when it is last).
      size_t cut_from = at, cut_to = end;
      while (cut_to < preload.size() && is_separator(preload[cut_to])) cut_to++;
      if (cut_to == preload.size())
        while (cut_from > 0 && is_separator(preload[cut_from - 1])) cut_from--;
      return preload.substr(0, cut_from) + preload.substr(cut_to);
    }
    at = end;
  }
  return preload;
}

std::vector<std::string> exec_environment(const char* const* envp, const std::vector<std::string>& saved,
                                          const std::string& self, const std::vector<const char*>& names) {
  std::vector<std::string> out;
  std::string preload;
  bool has_preload = false;
  for (const char* const* e = envp; e && *e; e++) {
    if (names_variable(*e, "LD_PRELOAD")) {
      preload = *e + strlen("LD_PRELOAD=");
      has_preload = true;
      continue;
    }
    bool ours = false;
    for (const char* name : names) ours = ours || names_variable(*e, name);
    if (!ours) out.emplace_back(*e);
  }
  for (const std::string& s : saved) out.push_back(s);
  if (!self.empty()) out.push_back("LD_PRELOAD=" + self + (has_preload && !preload.empty() ? ":" + preload : ""));
  else if (has_preload) out.push_back("LD_PRELOAD=" + preload);
  return out;
}

void hide_runtime_environment(const std::vector<const char*>& names, const char* self_path, bool profiled) {
  // The runtime's entry of LD_PRELOAD first: without it (not found there),
  // nothing is hidden. Children would load the runtime all the same, and
  // without its variables each would take itself for a process preloaded
  // by hand, and profile itself.
  const char* preload = getenv("LD_PRELOAD");
  if (!preload) return;
  struct stat own;
  const bool known = self_path && stat(self_path, &own) == 0;
  Hidden* h = new Hidden();
  std::string rest = preload_without(preload, [&](const std::string& entry) {
    if (self_path && entry == self_path) return true;
    struct stat st;
    return known && stat(entry.c_str(), &st) == 0 && st.st_dev == own.st_dev && st.st_ino == own.st_ino;
  }, &h->self);
  if (h->self.empty()) {
    delete h;
    return;
  }
  if (rest.find_first_not_of(": ") == std::string::npos) unsetenv("LD_PRELOAD");
  else setenv("LD_PRELOAD", rest.c_str(), 1);
  h->names = names;
  for (const char* name : names) {
    const char* v = getenv(name);
    if (!v) continue;
    h->saved.push_back(std::string(name) + "=" + v);
    unsetenv(name);
  }
  if (profiled) h->pid = sys(SYS_getpid);
  g_hidden = h;
}

ExecEnvironment::ExecEnvironment(char* const* envp) : envp_(envp) {
  const Hidden* h = g_hidden;
  if (!h || !h->pid || sys(SYS_getpid) != h->pid) return;
  strings_ = exec_environment(envp, h->saved, h->self, h->names);
  for (std::string& s : strings_) pointers_.push_back(&s[0]);
  pointers_.push_back(nullptr);
  envp_ = pointers_.data();
  rebuilt_ = true;
}

}  // namespace coz
