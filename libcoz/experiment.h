// The profiler thread: symbolizes samples off the hot path, chooses a line
// and a speedup per experiment, runs the experiment, writes it, cools off.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "delays.h"
#include "line_map.h"
#include "profile_writer.h"
#include "progress.h"
#include "sampler.h"
#include "locks.h"
#include "stacks.h"
#include "symbolizer.h"
#include "targets.h"
#include "thread_state.h"

namespace coz {

// Speedup in percent for one experiment: 0 with probability 1/2 (the
// baseline every other speedup is compared with), else uniform over 5..100
// in steps of 5. `draw` is uniform over [0, 2^32). Four levels (25, 50, 75,
// 100) gave narrower intervals in simulation (benchmarks/speedup_design.py)
// but were reverted: a short run's few sped-up experiments all fell on one
// level often enough (4^(1-n) for n of them) to leave a fixed line without
// a curve (test_fsync_predicts_its_share under load: 4 sped-up
// experiments, all at 100%).
int choose_speedup(uint32_t draw);

// Next experiment length, on the visits of the least-visited live progress
// point: doubled (up to 64 times the initial length) below kMinVisits,
// halved above kHalveVisits, never below the shorter of the initial length
// and kShortestNs. The band is narrow (x2.4) so that the length comes back
// down after a chance dip doubled it: with the former band (5 to 200 visits)
// a program of a few visits per 0.5 s kept 2 s experiments for good.
constexpr uint64_t kMinVisits = 5;
constexpr uint64_t kHalveVisits = 12;
constexpr uint64_t kShortestNs = 100000000;  // 100 ms: frequent points get short experiments
uint64_t adapt_length(uint64_t current_ns, uint64_t initial_ns, uint64_t min_visits, bool any_point);

// Sampling-only: the profiler thread's next wait between looks at the
// rings, from the one just waited and the fill of the fullest ring it found
// then (permille of the ring's size; sampler_take_ring_fill_permille). Each
// look wakes a thread that takes a CPU from the program, and a program that
// starts threads often waits for the looks too (two_threads' cost halved
// from 5 to 50 ms: docs/runtime.md, "Sampling only"); a ring that fills
// loses records. So the wait is as long as keeps the fullest ring under
// kDrainFillPermille at the rate it just filled, between kShortestDrainNs
// and kLongestDrainNs, at most doubled from one look to the next (and
// shortened at once): the rest of the ring is slack for a look that comes
// late, on a busy machine.
constexpr uint64_t kShortestDrainNs = 5000000;   // 5 ms
constexpr uint64_t kLongestDrainNs = 50000000;   // 50 ms
constexpr uint64_t kDrainFillPermille = 125;     // an eighth of the ring
uint64_t next_drain_wait(uint64_t waited_ns, uint64_t fill_permille);

// The period the "short-threads" warning suggests to threads of mean_ns of
// CPU time each: the longest round one of at most a quarter of it (each
// thread then loses about an eighth of its time to the period under way
// when it ends, where it lost most of it), among 5 ms down to 10 us (the
// shortest --sample-period the runtime takes); 0 when even 10 us is more
// than that quarter. Whole numbers, which the native front reads.
uint64_t short_thread_period(uint64_t mean_ns);

// The visits an experiment's length adapts on: those of its least-visited
// live point, a point being live when it advanced in one of the last
// kLiveExperiments experiments (`last_seen`, name -> number of the last
// experiment where it advanced, is kept up to date here). A point registered
// but never reached (a --progress line of another mode of the program, a
// COZ_BEGIN without its COZ_END) or one of a phase that is over must not
// lengthen every experiment. 0 while no point is live; *any is false when no
// point is registered at all.
constexpr uint64_t kLiveExperiments = 8;
uint64_t least_visits(const std::vector<PointDelta>& progress, uint64_t experiment,
                      std::map<std::string, uint64_t>* last_seen, bool* any);

// The point an experiment's window is aligned on: its measurement starts at
// a visit of that point and ends at the first visit after the experiment's
// length, so that it counts whole intervals between visits. Counted over a
// fixed window, a point visited every P ns is off by up to one visit: a
// relative error of up to P / length, about 5% at 10 visits per experiment
// (two_threads: its baselines read 10 or 11 visits, most of their spread).
// The point is the least-visited throughput point that the last experiment
// saw, when its visits came at least kAlignPeriodNs apart (closer ones lose
// less to counting than to the polling that finds a visit); `period_ns` is 0
// when there is none. A point the last experiment missed is not waited for:
// its length doubles instead (adapt_length).
constexpr uint64_t kAlignPeriodNs = 1000000;
struct AlignPoint {
  std::string name;
  uint64_t period_ns = 0;  // wall time per visit in the last experiment
};
AlignPoint align_point(const std::vector<PointDelta>& progress, uint64_t wall_ns);

// Recently sampled targets (lines, functions, call sites), each weighted
// by the time its samples stand for (sampling periods: 1 for a CPU sample,
// n for a blocked sample of n periods), decayed with a half-life of wall
// time: choosing in proportion to the weights chooses in proportion to
// recent time, on and off the CPU alike. (A ring of the last 512 samples,
// the earlier pool, had to cap what one long wait could add, or it would
// push every CPU sample out: with the cap, a wait of 1 s between short
// bursts of work, half of two threads' time, was chosen 6% of the time.) Weights are kept scaled by 2^(age / half-life) so that adding is
// O(1); they are rescaled, and the negligible ones dropped, every few
// half-lives.
template <typename T>
class RecentPool {
 public:
  static constexpr uint64_t kHalfLifeNs = 500000000;  // 0.5 s of wall time

  void add(const T* t, double periods, uint64_t now_ns) {
    if (periods <= 0) return;
    if (origin_ns_ == UINT64_MAX) origin_ns_ = now_ns;
    if (now_ns > origin_ns_ + kRescaleAfter * kHalfLifeNs) rescale(now_ns);
    double w = periods * std::exp2(static_cast<double>(now_ns - std::min(now_ns, origin_ns_)) / kHalfLifeNs);
    weights_[t] += w;
    total_ += w;
  }
  // The target whose cumulated weight reaches draw's share of the total.
  const T* pick(uint32_t draw) const {
    if (weights_.empty()) return nullptr;
    double at = total_ * (static_cast<double>(draw) / 4294967296.0);
    const T* last = nullptr;
    for (const auto& kv : weights_) {
      last = kv.first;
      if (at < kv.second) return kv.first;
      at -= kv.second;
    }
    return last;  // rounding
  }
  size_t size() const { return weights_.size(); }
  // A target's share of the weight now (for tests).
  double share(const T* t) const {
    auto it = weights_.find(t);
    return it == weights_.end() || total_ <= 0 ? 0.0 : it->second / total_;
  }

 private:
  static constexpr uint64_t kRescaleAfter = 32;  // half-lives
  void rescale(uint64_t now_ns) {
    double f = std::exp2(-static_cast<double>(now_ns - origin_ns_) / kHalfLifeNs);
    origin_ns_ = now_ns;
    total_ = 0;
    for (auto it = weights_.begin(); it != weights_.end();) {
      it->second *= f;
      if (it->second < 1e-6) {  // under a millionth of a period today: gone
        it = weights_.erase(it);
      } else {
        total_ += it->second;
        ++it;
      }
    }
  }
  std::map<const T*, double> weights_;
  double total_ = 0;
  uint64_t origin_ns_ = UINT64_MAX;
};
using RecentLines = RecentPool<Line>;
using RecentTargets = RecentPool<Target>;

// What the profiler thread needs from the rest of the runtime.
struct ProfilerHooks {
  // Calls fn for each thread state (live or exited but not yet recycled),
  // then recycles the exited ones once drained.
  std::function<void(const std::function<void(ThreadState*)>&)> for_each_thread;
  // Calls fn for each live thread state, recycling none (optional: the
  // profiler thread then keeps up with the threads' samples while it reads
  // debug information).
  std::function<void(const std::function<void(ThreadState*)>&)> for_each_live_thread;
  // Maps objects loaded since the last call (dlopen), if any.
  std::function<void()> poll_objects;
  // The ids of the threads alive now (for the counters at the end).
  std::function<std::vector<pid_t>()> live_tids;
  // Hardware counter totals of every thread, or why there are none.
  std::function<void(std::vector<std::pair<std::string, uint64_t>>*, std::string*)> hardware_counters;
  // Sampling-only: takes the CPU rings' records, split by thread (optional:
  // else the sampler's own, take_cpu_records, when it opened CPU rings).
  std::function<void(std::vector<char>*, std::vector<ThreadRecords>*, uint64_t*)> take_cpu_records;
};

class Profiler {
 public:
  Profiler(const Config& config, LineMap* lines, ProfileWriter* writer, ProfilerHooks hooks);

  // Runs in a thread created by the runtime, with every signal blocked.
  void run();
  // The threads it keeps an entry of (tests).
  size_t threads_known() const { return threads_.size(); }
  // The runtime's own code, whose frames a stack keeps only the outermost of (stacks.h).
  void set_runtime_code(uintptr_t start, uintptr_t end, uintptr_t unwinder_start, uintptr_t unwinder_end,
                        uintptr_t unwinding) {
    stacks_.set_runtime_code(start, end, unwinder_start, unwinder_end, unwinding);
  }

  // From any context, including a signal handler: asks the loop to end.
  void request_stop(const char* reason);
  // Waits up to timeout for the final records; true when they are written.
  bool wait_final(uint64_t timeout_ns);

  // For the fixed-line mode: resolved before main.
  void set_fixed(const Line* line, std::vector<AddrRange> ranges);
  // --fixed-function, --fixed-callsite: false and an error (and a hint)
  // when the spec names nothing, or more than one function.
  bool set_fixed(Unit unit, const std::string& spec, std::string* error, std::string* hint);
  void set_start_time(uint64_t mono_ns) { start_mono_ = mono_ns; }

  // Takes every thread's pending samples and symbolizes them (the loop
  // calls it every few milliseconds; public for tests).
  void drain();
  // The unit of the next experiment without --fixed-line: one of the
  // recent samples' lines (functions, call sites: --unit), drawn in
  // proportion to their samples.
  const Target* pick();
  // Whether the first experiment may choose its unit: once the samples
  // taken with no delay inserted stand for kLeastChoicePeriods periods, or
  // kLongestChoiceWaitNs after the first sample with a unit (a program
  // whose samples are mostly out of scope). A unit drawn from the first
  // sample or two is drawn by chance: a run once chose the first visit of
  // COZ_PROGRESS, the line of its first sample, which ran once.
  static constexpr uint64_t kLeastChoicePeriods = 16;
  static constexpr uint64_t kLongestChoiceWaitNs = 100000000;
  bool can_choose() const;


 private:
  void wait_slice(uint64_t ns);  // sleeps `ns` (less if stopping)
  // wait_slice, then drain() (if `drain_too`). Time beyond both that the
  // profiler thread's own wait for a CPU does not explain is a stall of the
  // whole process: added to stall_ns_.
  void wait_and_drain(uint64_t ns, bool drain_too = true);
  // A look of the profiler thread: when it began, the thread's CPU clock
  // then (if read), and its disk operations (looks between experiments).
  struct Look {
    uint64_t wall, cpu, io;
  };
  // The look's stall, if any (time beyond slept_ns and its CPU time that
  // its own wait for a CPU does not explain), added to stall_ns_.
  void note_stall(const Look& look, uint64_t slept_ns, bool cpu_read);
  // Looks outside experiments: a stall in them is banked for T too, unless
  // the thread read or wrote a disk meanwhile.
  Look begin_look_between();
  void end_look_between(const Look& look, uint64_t slept_ns);
  void flush_between();  // maybe_flush_stacks, in a look of its own if it flushes
  // Whether maybe_flush_stacks flushes at `elapsed` ns since the start.
  bool stacks_due(uint64_t elapsed) const { return elapsed >= next_flush_ns_; }
  void bank_stall();  // stall_ns_ added to stalled_total_ns_, then zeroed
  // The profiler thread's schedstat run delay (schedstat_wait_ns), from a
  // descriptor it keeps (-1: not open).
  uint64_t own_run_delay_ns();
  int schedstat_fd_ = -1;
  bool stopping() const { return stop_word_.load(std::memory_order_acquire) != 0; }
  void run_one_experiment(const Target* target, const std::vector<AddrRange>& ranges, int speedup);
  // Adds a sample's candidates to the pools, weighted by the sample's time
  // in periods (a blocked sample may stand for many).
  void add_candidates(const Sample& smp, const Line* l, bool cpu, uint64_t periods);
  void write_periodic();
  void write_final();
  const Line* line_of(uintptr_t pc);
  const Line* symbolize(const Sample& smp);
  void publish_scope();

  Config config_;
  LineMap* lines_;
  ProfileWriter* writer_;
  ProfilerHooks hooks_;
  std::mt19937 rng_;
  Targets targets_;
  RecentTargets recent_;      // targets of samples taken while no delay was inserted
  RecentTargets recent_all_;  // of every sample
  uint64_t undisturbed_periods_ = 0;  // periods of the samples added to recent_, all time
  uint64_t first_candidate_ns_ = 0;   // drain_ns_ of the first sample with a unit; 0: none yet
  uint64_t experiments_started_ = 0;
  std::vector<const Target*> candidates_;  // scratch
  uint64_t drain_ns_ = 0;  // CLOCK_MONOTONIC at the start of the current drain(): the samples' age
  uint64_t drain_wait_ = kShortestDrainNs;  // sampling-only: the wait between looks (next_drain_wait)
  std::unordered_map<uintptr_t, const Line*> pc_cache_;
  uint64_t pc_cache_objects_ = 0;  // lines_->objects_version() the cache was filled at
  struct Pending {
    pid_t tid;
    Sample smp;
  };
  std::vector<Pending> pending_;  // copied out of the threads' rings, to symbolize
  // Sampling-only: perf records taken from the threads' rings, to parse.
  struct Taken {
    pid_t tid;
    size_t offset, size;
    uint64_t period_ns;  // the period they were taken at
    bool cpu_layout;     // from the CPU rings: each sample says its period
    bool waited = false;  // left for a look by a thread not yet known (drain)
  };
  // Appends a thread's records from its own ring (sampling-only), noting
  // it in alone_ when it is sampled alone.
  void take_own_ring(ThreadState* t, std::vector<char>* bytes, std::vector<Taken>* taken);
  // Appends the CPU rings' records (sampler_open_cpu_rings), split by
  // thread: all of the threads in `ended`, all at the last look, else those
  // before cpu_cut_ns_ (CpuRecordCut; the later ones at the next take).
  void take_cpu_rings(std::vector<char>* bytes, std::vector<Taken>* taken,
                      const std::vector<pid_t>* ended = nullptr);
  uint64_t cpu_cut_ns_ = UINT64_MAX;
  bool last_look_ = false;  // write_final's drain
  std::vector<Taken> taken_;
  // Threads sampled alone while the CPU rings sample too: the rings'
  // records of them are dropped (their own ring has them).
  std::unordered_set<pid_t> alone_;
  std::vector<char> taken_bytes_;
  // What keep_up() took since the last drain: drain() starts from it.
  std::vector<Pending> held_;
  std::vector<Taken> held_taken_;
  std::vector<char> held_bytes_;
  uint64_t last_keep_up_ns_ = 0;
  // Takes the live threads' samples (signal mode) or perf records
  // (sampling-only) without symbolizing them, at most every 2 ms: called
  // during long symbolization, so that rings do not overflow meanwhile.
  void keep_up();
  // The conventional profile.
  struct ThreadInfo {
    ThreadRecord record;
    uintptr_t start_fn = 0;
    uintptr_t origin_pc = 0;  // ThreadState::origin_pc
    uint64_t sched_rest_ns = 0;  // preempted time not yet worth a whole blocked sample
    SwitchState switches;        // sampling-only: its switch records, parsed here
    SwitchState::OffLog off_log;  // sampling-only: switches' intervals of the last two looks
    uint64_t waits[6] = {0, 0, 0, 0, 0, 0};  // interposed waits' totals (the thread's counters)
    uint64_t voluntary_ns = 0;   // off the CPU of its own accord (switch records)
    bool switch_records = false;  // sampled by perf, with switch records: voluntary_ns is known
    bool alone = false;           // sampling-only: sampled by its own event (ThreadState::alone)
    bool random_first = false;    // sampled from a random first period (ThreadState::random_first)
    uint64_t open_wait_ns = 0;    // its interposed wait under way at the last look: time so far
    uint8_t open_wait_kind = 0;   // and its kind
    uint64_t uncharged_ns = 0;        // wakeup preemptions (switch records), charged to no line
    uint64_t uncharged_shown_ns = 0;  // how much of it the record's sched wait already holds
    uint64_t paused_ns = 0;      // the runtime's own pauses (delays), wall time
    uint64_t held_ns = 0;        // of them, pauses that held the CPU: wall time
    uint64_t held_cpu_ns = 0;    // and their CPU time
    // The pauses that slept: the runtime's time off the CPU, not the program's.
    uint64_t slept_ns() const { return paused_ns > held_ns ? paused_ns - held_ns : 0; }
    uint64_t preempt_credited_ns = 0;  // delay credited for sitting preempted
    uint64_t other_rest_ns = 0;  // `other` waiting time not yet worth a whole blocked sample
    // Per wait kind: blocked samples' time off the CPU not yet worth a whole
    // one in the stacks (account_blocked).
    uint64_t blocked_rest_ns[6] = {0, 0, 0, 0, 0, 0};
    uint64_t kernel_rest_ns[6] = {0, 0, 0, 0, 0, 0};  // and their calls' CPU time (coz_kernel_in_io...)
    const Sample* last_cpu = nullptr;  // its latest CPU sample in this look (where waits resumed)
  };
  void note_thread(ThreadState* t);
  // Its name as its state has it now (ThreadState::name): renames are seen
  // at the next look, stacks flushed meanwhile keep the name they had.
  static void note_name(const ThreadState* t, ThreadInfo* info);
  // The entry of a thread seen starting (note_thread), else a scratch one:
  // a CPU ring's records that come after their thread's end and record
  // (its exit path) count in the stacks, but make no entry that would stay
  // for the rest of the run, one per thread ended.
  ThreadInfo& known_thread(pid_t tid);
  ThreadInfo late_;
  std::string group_of(ThreadInfo* info);
  // Ended threads' `thread` records, after one stack flush for them all.
  void finish_threads(const std::vector<ThreadInfo*>& infos);
  std::unordered_map<uintptr_t, std::string> group_names_;  // start function -> thread group
  void flush_stacks();
  void maybe_flush_stacks();
  void write_counters();
  void write_locks();
  static uint64_t thread_cpu_ns(pid_t tid);
  std::string site_name(uintptr_t pc);
  LockMerger locks_;
  std::unordered_map<uintptr_t, uint64_t> lock_ids_;
  bool flush_locks_ = false;  // the next drain reads the live threads' lock tables
  void run_sampling_only();
  uint64_t next_alternation(uint64_t now);  // when the CPUs' events next take turns
  uint64_t period_turns_ = 0;
  // The threads' CPU time by their clocks, of all and of those under
  // kShortThreadPeriods sampling periods each, and what their samples hold:
  // the "short-threads" warning at the end (write_final).
  struct ShortThreads {
    uint64_t threads = 0, clock_ns = 0;
    uint64_t short_threads = 0, short_clock_ns = 0, short_sampled_ns = 0;
    // Whether the short threads held more than `share` of the threads' CPU time.
    bool dominant(double share) const { return short_clock_ns > share * static_cast<double>(clock_ns); }
  } short_threads_;
  void warn_short_threads();
  void account_blocked(pid_t tid, uint32_t kind, const Sample& smp);
  void account_other_waits(uint64_t period);
  Symbolizer symbolizer_;
  StackTable stacks_;
  std::unordered_map<pid_t, ThreadInfo> threads_;
  std::vector<pid_t> ended_;  // threads that ended since the last drain
  uint64_t next_flush_ns_ = 0;       // since the start
  int64_t migrations_ = 0;            // of the threads that ended
  bool migrations_known_ = true;
  uint64_t scope_version_ = UINT64_MAX;
  uint64_t out_of_scope_ = 0;
  uint64_t truncated_ = 0;
  std::unordered_map<const Line*, uint64_t> counts_since_write_;
  std::unordered_map<const Line*, uint64_t> blocked_since_write_[6];  // per wait kind
  uint64_t out_of_scope_written_ = 0;
  uint64_t samples_written_ = 0;
  const Target* fixed_ = nullptr;
  std::vector<AddrRange> fixed_ranges_;
  uint64_t length_ns_;
  uint64_t stall_ns_ = 0;       // stalls since the last bank_stall, summed (note_stall)
  uint64_t stalled_total_ns_ = 0;  // the run's, in experiments and between them
  uint64_t run_delay_ns_ = 0;   // the profiler thread's schedstat wait at the last look
  uint64_t total_delay_ns_ = 0;
  uint64_t start_mono_ = 0;
  uint64_t experiments_ = 0;
  // Totals over every thread, including those that exited and were recycled.
  uint64_t total_samples_ = 0;
  CrowdWindow crowd_;  // the program's recent share of the CPUs (Shared::crowded)
  uint64_t total_lost_ = 0;
  uint64_t total_dropped_ = 0;
  uint64_t total_skipped_ = 0;
  std::map<std::string, uint64_t> point_last_seen_;
  AlignPoint align_;  // the next experiment's (align_point)
  // Polls the counter every poll_ns until it leaves `from`, for at most
  // timeout_ns (draining samples every slice meanwhile). Whether it moved.
  bool await_visit(const coz_counter_layout* counter, uint64_t from, uint64_t poll_ns, uint64_t timeout_ns);
  std::atomic<uint32_t> stop_word_{0};
  std::atomic<uint32_t> final_written_{0};
  std::atomic<const char*> pending_reason_{nullptr};
};

}  // namespace coz
