// The only code that writes the profile (format: docs/profile-format.md).
//
// Each record is formatted whole in memory and written with a single
// write(2) on an O_APPEND descriptor, so it is in the file whole or not at
// all. Thread-safe (a mutex); never to be called from a signal handler.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace coz {

struct StartupRecord {
  uint64_t time_ns = 0;
  long pid = 0;
  std::string argv0;
  std::string build_id;  // hex GNU build-id of the main executable; empty: none
  std::string mode;  // causal | fixed-line | end-to-end
  uint64_t sample_period_ns = 0;
  uint64_t experiment_length_ns = 0;
  std::string sampler;  // perf_event | timer
  int cpus = 0;       // CPUs the program can run on at once (affinity, CPU quota); 0: not known
  int cpu_quota = 0;  // its cgroup's CPU quota in whole CPUs; 0: none
  std::vector<std::string> binary_scope;
  std::vector<std::string> source_scope;
  std::string fixed_line;  // empty: none
  int fixed_speedup = -1;  // percent; -1: none
  std::string blocked_scope;  // letters of the waits experiments speed up
  std::vector<std::string> units{"line"};  // units experiments choose among
  std::string fixed_unit;  // unit of --fixed-line/-function/-callsite; empty: none
};

struct PointDelta {
  std::string name;
  bool latency = false;
  uint64_t delta = 0;       // throughput visits
  uint64_t arrivals = 0;    // latency: COZ_BEGIN visits
  uint64_t departures = 0;  // latency: COZ_END visits
  int64_t difference = 0;   // latency: begins - ends, in flight at the end
};

struct ExperimentRecord {
  std::string selected;
  std::string unit = "line";
  int speedup_percent = 0;
  uint64_t duration_ns = 0;
  uint64_t wall_ns = 0;
  uint64_t delay_ns = 0;
  uint64_t selected_samples = 0;
  uint64_t selected_ns = 0;
  uint64_t selected_blocked_ns = 0;
  uint64_t stalled_ns = 0;  // the process stood still this long in it (Profiler::wait_and_drain): left out
  bool partial = false;
  std::string aligned;  // the point whose visits began and ended the window, if any
  std::vector<PointDelta> progress;
};

using Counts = std::vector<std::pair<std::string, uint64_t>>;

// Samples since the previous `samples` record of the run.
struct SamplesRecord {
  Counts counts;  // per "path:line", CPU samples
  uint64_t out_of_scope = 0;
  std::vector<std::pair<std::string, Counts>> blocked;  // wait kind -> blocked samples per "path:line"
  bool with_functions = false, with_callsites = false;  // written (even empty) when among the units
  Counts functions;  // CPU samples per function
  Counts callsites;  // CPU samples per call site "path:line"
  bool empty() const { return counts.empty() && !out_of_scope && blocked.empty(); }
};

struct ShutdownRecord {
  uint64_t time_ns = 0;
  std::string reason;
  uint64_t samples = 0;
  uint64_t lost_records = 0;
  uint64_t dropped_samples = 0;
  uint64_t skipped_records = 0;
  uint64_t truncated_stacks = 0;
  uint64_t experiments = 0;
  uint64_t period_turns = 0;
};

// The conventional profile (docs/profile-format.md: locations, stacks,
// stack_counts).
struct LocationRecord {
  uint32_t id = 0;
  uint64_t address = 0;
  std::string object;
  uint64_t object_address = 0;  // in the object's own (link-time) addresses
  std::string build_id;         // empty: none
  struct Line {
    std::string function, file;  // empty: unknown
    uint32_t line;
  };
  std::vector<Line> lines;  // innermost first
};

struct StackRecord {
  uint32_t id = 0;
  std::vector<uint32_t> locations;  // innermost first
  std::string kind;                 // cpu, io, lock, sleep, sync, sched, other
  long tid = 0;
  std::string thread, group;
};

struct StackCount {
  uint32_t id;
  uint64_t samples, ns;
};

// Where one thread's time went (a `thread` record).
struct ThreadRecord {
  long tid = 0;
  std::string thread, group;
  uint64_t start_ns = 0, end_ns = 0, cpu_ns = 0;
  uint64_t cpu_clock_ns = 0;  // its CPU time by its own clock, user and system
  uint64_t wait_ns[6] = {0, 0, 0, 0, 0, 0};  // io, lock, sleep, sync, sched, other
  uint64_t paused_ns = 0;  // paused paying the delays of experiments (virtual speedup's own pauses), wall time
  uint64_t paused_cpu_ns = 0;  // CPU time of the pauses that held the CPU (delays.h, real_cpu_pause)
  uint64_t preempt_credited_ns = 0;  // delay credited for sitting preempted (delays.h, note_preempted)
  // Off the CPU of its own accord, by its switch records, less the
  // runtime's pauses that slept: the program's own time off the CPU, in
  // interposed calls or not. -1 (not written) without switch records.
  int64_t off_cpu_ns = -1;
  // The kernel's CPU time inside its interposed calls, as its blocked
  // samples measured it: the CPU stacks under coz_kernel_in_io (_lock,
  // _sleep, _sync). Written with off_cpu_ns.
  uint64_t call_cpu_ns = 0;
  // Sampling-only: sampled by an event of its own, from a random first
  // period (sampler_sample_new_threads_alone), not by the CPU rings'.
  bool sampled_alone = false;
};

// Synchronization counters (a `locks` record).
struct LockSiteRecord {
  std::string site;
  uint64_t acquisitions = 0, contended = 0, wait_ns = 0, hold_ns = 0, trylocks = 0, trylock_failures = 0;
  uint64_t hold_sd_ns = 0;  // the standard error of hold_ns (0: exact)
  uint64_t hold_top_ns = 0;  // of hold_ns, what each slot's weightiest sampled hold adds beyond itself
  uint64_t acquisitions_sd = 0;  // the standard error of acquisitions (0: exact)
};
struct LockRecord {
  uint64_t id = 0;
  std::string kind;
  uint64_t address = 0;  // for folded entries: 0
  std::string site;      // init or first-use site; empty: unknown
  LockSiteRecord all;
  uint64_t threads = 0;
  std::vector<LockSiteRecord> sites;
};
struct LocksRecord {
  uint64_t elapsed_ns = 0;
  std::vector<LockRecord> locks, folded;
};

// A perf stat-style summary of the run (a `counters` record).
struct CountersRecord {
  uint64_t user_ns = 0, system_ns = 0, wall_ns = 0;
  uint64_t voluntary_switches = 0, involuntary_switches = 0;
  uint64_t minor_faults = 0, major_faults = 0;
  int64_t migrations = -1;  // -1: unknown
  // CPU time of the child processes waited for (RUSAGE_CHILDREN), and
  // whether they were profiled (each in its own file, --follow-children).
  uint64_t children_cpu_ns = 0;
  bool children_profiled = false;
  // The profiler thread's own CPU time, user and system (part of the
  // above): what the profiler costs in CPU; -1 where not read.
  int64_t profiler_cpu_ns = -1;
  std::vector<std::pair<std::string, uint64_t>> hardware;  // empty: unavailable
  std::string hardware_unavailable;
};

std::string json_string(const std::string& s);

class ProfileWriter {
 public:
  ProfileWriter() = default;
  ~ProfileWriter();
  ProfileWriter(const ProfileWriter&) = delete;
  ProfileWriter& operator=(const ProfileWriter&) = delete;

  // Opens (creating, appending) `path`. On failure returns false with a sentence in *error.
  // A checkpoint left beside it by a run that was killed (below) is first
  // appended to it, then removed.
  bool open(const std::string& path, bool legacy, std::string* error);
  bool is_open() const { return fd_ >= 0; }
  void close();
  // After fork: forget the parent's descriptor (and its checkpoint) without touching its files.
  void abandon() {
    fd_ = -1;
    totals_ = false;
  }

  // Totals mode (sampling-only and locks-only runs, JSON format): the
  // records whose counts grow with time (samples, stack_counts, locks,
  // runtime) are summed in memory instead of appended; checkpoint() writes
  // their totals so far, as one `totals` record, to `<path>.checkpoint`
  // (written aside and renamed over it), and shutdown() appends the final
  // `totals` record to the profile before its own, then removes the
  // checkpoint. So a run's profile grows with its distinct stacks, lines and
  // locks, not with its length; a run killed without a shutdown leaves its
  // last checkpoint, which `coz run`, the next run writing the same profile
  // and the profile's reader each take (docs/profile-format.md, "totals").
  void hold_totals();
  void checkpoint();

  void startup(const StartupRecord& r);
  void experiment(const ExperimentRecord& r);
  void samples(const SamplesRecord& r);
  void runtime(uint64_t time_ns);
  void warning(const std::string& code, const std::string& message);
  void shutdown(const ShutdownRecord& r);
  void locations(const std::vector<LocationRecord>& v);
  void stacks(const std::vector<StackRecord>& v);
  void stack_counts(const std::vector<StackCount>& v);
  void thread(const ThreadRecord& r);
  void counters(const CountersRecord& r);
  void locks(const LocksRecord& r);

  // Formatting, exposed for tests.
  std::string format_startup(const StartupRecord& r) const;
  std::string format_experiment(const ExperimentRecord& r) const;
  std::string format_samples(const SamplesRecord& r) const;
  std::string format_runtime(uint64_t time_ns) const;
  std::string format_warning(const std::string& code, const std::string& message) const;
  std::string format_shutdown(const ShutdownRecord& r) const;
  std::string format_locations(const std::vector<LocationRecord>& v) const;
  std::string format_stacks(const std::vector<StackRecord>& v) const;
  std::string format_stack_counts(const std::vector<StackCount>& v) const;
  std::string format_thread(const ThreadRecord& r) const;
  std::string format_counters(const CountersRecord& r) const;
  std::string format_locks(const LocksRecord& r) const;
  void set_legacy(bool legacy) { legacy_ = legacy; }
  // As if the last write had stopped part-way through a record (tests).
  void mark_cut_for_test() { cut_ = true; }

 private:
  void emit(const std::string& record);
  void emit_locked(const std::string& record);
  void emit_if(const std::string& record);  // nothing for an empty record
  std::string totals_record(bool final_totals);  // (mu_ held)
  int fd_ = -1;
  std::string path_;
  // Totals mode's sums (see hold_totals).
  bool totals_ = false;
  long owner_pid_ = 0;  // the process that opened the profile: the only one to write its checkpoint
  uint64_t totals_seq_ = 0;
  bool totals_changed_ = false;
  std::map<std::string, uint64_t> line_counts_, function_counts_, callsite_counts_;
  std::map<std::string, std::map<std::string, uint64_t>> blocked_counts_;
  uint64_t out_of_scope_ = 0;
  bool with_functions_ = false, with_callsites_ = false, any_samples_ = false;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> stack_totals_;  // id -> samples, ns
  std::string locks_text_;  // the latest locks record, formatted (it holds totals already)
  uint64_t runtime_ns_ = 0;
  bool any_runtime_ = false;
  bool legacy_ = false;
  bool cut_ = false;  // the last write stopped part-way through a record
  bool write_failed_ = false;  // a write failed (disk full, file size limit): said once on stderr
  bool at_size_limit_ = false;  // a record did not fit under the file size limit: nothing more is written
  void say_write_failed();
  std::mutex mu_;
};

}  // namespace coz
