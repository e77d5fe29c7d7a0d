#include "config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace coz {

std::vector<std::string> split_tabs(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t tab = s.find('\t', start);
    if (tab == std::string::npos) tab = s.size();
    if (tab > start) out.push_back(s.substr(start, tab - start));
    start = tab + 1;
  }
  return out;
}

std::string expand_output_name(const std::string& pattern, long pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); i++) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(pid);
      i++;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

namespace {

bool parse_uint(const char* text, uint64_t min, uint64_t max, uint64_t* out) {
  if (!text || !*text) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || *end || text[0] == '-' || v < min || v > max) return false;
  *out = v;
  return true;
}

bool parse_bool(const char* text, bool* out) {
  std::string t(text);
  if (t == "1" || t == "yes" || t == "true") { *out = true; return true; }
  if (t == "0" || t == "no" || t == "false" || t.empty()) { *out = false; return true; }
  return false;
}

bool is_file_line(const std::string& s) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  for (size_t i = colon + 1; i < s.size(); i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// One row per option: its variable, what it takes, and how it is stored.
struct Option {
  const char* env;
  const char* takes;  // for the error message
  std::function<bool(const char*, Config*)> set;
};

const std::vector<Option>& options() {
  static const std::vector<Option> table = {
      {"COZ_OUTPUT", "a file name",
       [](const char* v, Config* c) { c->output = v; return *v != 0; }},
      {"COZ_FORMAT", "json or legacy",
       [](const char* v, Config* c) {
         c->format = v;
         return c->format == "json" || c->format == "legacy";
       }},
      {"COZ_BINARY_SCOPE", "tab-separated patterns",
       [](const char* v, Config* c) { c->binary_scope = split_tabs(v); return !c->binary_scope.empty(); }},
      {"COZ_SOURCE_SCOPE", "tab-separated patterns",
       [](const char* v, Config* c) { c->source_scope = split_tabs(v); return !c->source_scope.empty(); }},
      {"COZ_PROGRESS_POINTS", "tab-separated file:line entries",
       [](const char* v, Config* c) {
         c->progress_points = split_tabs(v);
         for (auto& p : c->progress_points)
           if (!is_file_line(p)) return false;
         return true;
       }},
      {"COZ_FIXED_LINE", "file:line",
       [](const char* v, Config* c) { c->fixed_line = v; return c->fixed_line.empty() || is_file_line(v); }},
      {"COZ_FIXED_FUNCTION", "a function's name",
       [](const char* v, Config* c) { c->fixed_function = v; return true; }},
      {"COZ_FIXED_CALLSITE", "file:line",
       [](const char* v, Config* c) { c->fixed_callsite = v; return c->fixed_callsite.empty() || is_file_line(v); }},
      {"COZ_UNITS", "a comma-separated list of line, function and callsite, each at most once",
       [](const char* v, Config* c) {
         c->units.clear();
         std::string s(v);
         size_t start = 0;
         while (start <= s.size()) {
           size_t comma = s.find(',', start);
           if (comma == std::string::npos) comma = s.size();
           std::string u = s.substr(start, comma - start);
           if (u != "line" && u != "function" && u != "callsite") return false;
           for (const std::string& seen : c->units)
             if (seen == u) return false;
           c->units.push_back(u);
           start = comma + 1;
         }
         return !c->units.empty();
       }},
      {"COZ_FIXED_SPEEDUP", "a whole percentage from 0 to 100",
       [](const char* v, Config* c) {
         uint64_t n;
         if (!parse_uint(v, 0, 100, &n)) return false;
         c->fixed_speedup = static_cast<int>(n);
         return true;
       }},
      {"COZ_END_TO_END", "0 or 1", [](const char* v, Config* c) { return parse_bool(v, &c->end_to_end); }},
      {"COZ_SAMPLE_PERIOD", "nanoseconds from 10000 (10 us) to 1000000000 (1 s)",
       [](const char* v, Config* c) { return parse_uint(v, 10000, 1000000000ull, &c->sample_period_ns); }},
      {"COZ_EXPERIMENT_LENGTH", "nanoseconds from 1000000 (1 ms) to 600000000000 (10 min)",
       [](const char* v, Config* c) { return parse_uint(v, 1000000, 600000000000ull, &c->experiment_length_ns); }},
      {"COZ_VERBOSE", "0, 1 or 2",
       [](const char* v, Config* c) {
         uint64_t n;
         if (!parse_uint(v, 0, 2, &n)) return false;
         c->verbose = static_cast<int>(n);
         return true;
       }},
      {"COZ_FOLLOW_CHILDREN", "0 or 1",
       [](const char* v, Config* c) { return parse_bool(v, &c->follow_children); }},
      {"COZ_BLOCKED_SCOPE", "letters among i (I/O), l (locks), s (sleeps), b (synchronization; y before), or nothing",
       [](const char* v, Config* c) {
         c->blocked_scope = v;
         return c->blocked_scope.find_first_not_of("ilsby") == std::string::npos;
       }},
      {"COZ_LOCKS_ONLY", "0 or 1",
       [](const char* v, Config* c) { return parse_bool(v, &c->locks_only); }},
      {"COZ_LOCK_COUNTERS", "0 or 1",
       [](const char* v, Config* c) { return parse_bool(v, &c->lock_counters); }},
      {"COZ_SAMPLING_ONLY", "0 or 1",
       [](const char* v, Config* c) { return parse_bool(v, &c->sampling_only); }},
      {"COZ_WARN_STDERR", "0 or 1",
       [](const char* v, Config* c) { return parse_bool(v, &c->warn_stderr); }},
      {"COZ_LAUNCHER_PID", "a process id",
       [](const char* v, Config* c) {
         uint64_t n;
         if (!parse_uint(v, 0, 1ull << 31, &n)) return false;
         c->launcher_pid = static_cast<long>(n);
         return true;
       }},
  };
  return table;
}

}  // namespace

std::vector<const char*> config_variables() {
  std::vector<const char*> names;
  for (const Option& o : options()) names.push_back(o.env);
  return names;
}

bool parse_config(const EnvLookup& get, Config* out, std::string* error) {
  Config c;
  for (const Option& o : options()) {
    const char* v = get(o.env);
    if (!v) continue;
    if (!o.set(v, &c)) {
      *error = std::string(o.env) + "='" + v + "' is not valid: it takes " + o.takes;
      return false;
    }
  }
  // Sampling-only's default period: 10 ms, pprof's 100 Hz (the launcher's too).
  if (c.sampling_only && !get("COZ_SAMPLE_PERIOD")) c.sample_period_ns = kSamplingOnlyPeriodNs;
  int fixed = !c.fixed_line.empty() + !c.fixed_function.empty() + !c.fixed_callsite.empty();
  if (fixed > 1) {
    *error = "COZ_FIXED_LINE, COZ_FIXED_FUNCTION and COZ_FIXED_CALLSITE cannot go together: an experiment speeds up one unit";
    return false;
  }
  // A fixed unit is among the units: its samples are counted.
  const char* fixed_unit = !c.fixed_function.empty() ? "function" : !c.fixed_callsite.empty() ? "callsite" : nullptr;
  if (fixed_unit && std::find(c.units.begin(), c.units.end(), fixed_unit) == c.units.end())
    c.units.push_back(fixed_unit);
  bool lines_only = c.units.size() == 1 && c.units[0] == "line";
  if (c.format == "legacy" && (!lines_only || !c.fixed_function.empty() || !c.fixed_callsite.empty())) {
    *error = "COZ_FORMAT=legacy names lines only: COZ_UNITS, COZ_FIXED_FUNCTION and COZ_FIXED_CALLSITE need the json format";
    return false;
  }
  *out = c;
  return true;
}

}  // namespace coz
