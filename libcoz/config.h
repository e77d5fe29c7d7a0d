// The runtime's options: one table, read from COZ_* environment variables
// (set by `coz run`), validated, with clear errors. Nothing else in the
// runtime reads its options from the environment (environment.h takes them
// out of it once read).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace coz {

// The sample period of a sampling-only run that sets none: pprof's 100 Hz.
// At 1 ms, sampling alone (perf record, same clock) cost 1.7% of the
// programs' time on a 2-CPU VM, 3.2% at worst; sampling-only's target is 2%.
constexpr uint64_t kSamplingOnlyPeriodNs = 10000000;

struct Config {
  std::string output = "profile.coz";           // COZ_OUTPUT; "%p" becomes the pid
  std::string format = "json";                  // COZ_FORMAT: json | legacy
  std::vector<std::string> binary_scope{"MAIN"};  // COZ_BINARY_SCOPE, tab separated
  std::vector<std::string> source_scope{"%"};     // COZ_SOURCE_SCOPE, tab separated
  std::vector<std::string> progress_points;       // COZ_PROGRESS_POINTS, file:line, tab separated
  std::string fixed_line;                         // COZ_FIXED_LINE, file:line
  std::string fixed_function;                     // COZ_FIXED_FUNCTION, a function's name
  std::string fixed_callsite;                     // COZ_FIXED_CALLSITE, file:line
  std::vector<std::string> units{"line"};         // COZ_UNITS, comma separated: line, function, callsite
  int fixed_speedup = -1;                         // COZ_FIXED_SPEEDUP, percent 0-100; -1 = chosen per experiment
  bool end_to_end = false;                        // COZ_END_TO_END
  uint64_t sample_period_ns = 1000000;            // COZ_SAMPLE_PERIOD (1 ms; kSamplingOnlyPeriodNs with COZ_SAMPLING_ONLY)
  uint64_t experiment_length_ns = 500000000;      // COZ_EXPERIMENT_LENGTH (0.5 s)
  int verbose = 0;                                // COZ_VERBOSE
  bool follow_children = false;                   // COZ_FOLLOW_CHILDREN
  bool warn_stderr = true;                        // COZ_WARN_STDERR; 0: warnings go to the profile only
  bool sampling_only = false;                     // COZ_SAMPLING_ONLY: the conventional profile, no experiments
  bool locks_only = false;                        // COZ_LOCKS_ONLY: synchronization counters and threads only
  bool lock_counters = true;                      // COZ_LOCK_COUNTERS; 0: no synchronization counters (to measure their cost)
  std::string blocked_scope = "ils";              // COZ_BLOCKED_SCOPE: waits experiments speed up: i io, l lock, s sleep, y sync
  long launcher_pid = 0;                          // COZ_LAUNCHER_PID; 0 = profile whoever loads us
};

// Reads every option through `get` (getenv in the runtime, a map in tests).
// Returns false and sets `error` to one sentence naming the variable on a bad
// value, or the variables that cannot go together.
using EnvLookup = std::function<const char*(const char*)>;
bool parse_config(const EnvLookup& get, Config* out, std::string* error);

// The variables parse_config reads, in its table's order.
std::vector<const char*> config_variables();

// "%p" in an output name becomes the pid.
std::string expand_output_name(const std::string& pattern, long pid);

// Splits on tabs, dropping empty fields.
std::vector<std::string> split_tabs(const std::string& s);

}  // namespace coz
