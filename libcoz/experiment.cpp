#include "experiment.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <climits>
#include <sys/resource.h>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "clock.h"
#include "delays.h"
#include "counters.h"
#include "debuginfo.h"
#include "rawlog.h"
#include "sampler.h"
#include "unwind.h"
#include "waits.h"
#include "warnings.h"
#include "fds.h"
#include "sys.h"

namespace coz {

namespace {

constexpr uint64_t kSliceNs = 10000000;    // 10 ms: how often samples are drained
// A stall: a look of the profiler thread took this much longer than its
// sleep and its CPU time, beyond its own wait for a CPU (wait_and_drain). The
// experiment in progress ends there and is written with `stalled_ns`; the
// analysis leaves it out (docs/analysis.md).
constexpr uint64_t kStallNs = 100000000;  // 100 ms
constexpr uint64_t kCoolOffNs = 10000000;  // 10 ms of paying debts between experiments
constexpr uint64_t kPeriodRedrawNs = 100000000;  // sampling-only: a new random period every ~100 ms
constexpr uint64_t kPeriodsPerTurn = 10;    // sampling-only: mean turn of a CPU's event, in mean periods,
constexpr uint64_t kShortestTurnNs = 10000000;  // and 10 ms at least (each turn reaches every thread)
constexpr uint64_t kKeepUpNs = 2000000;     // during long symbolization, samples are taken this often
// The "short-threads" warning: threads under this many sampling periods of
// CPU time each, holding more than this share of the threads' CPU time.
constexpr uint64_t kShortThreadPeriods = 2;
constexpr double kShortThreadsShare = 0.2;
// Sampling-only samples new threads alone once this many short threads
// ended and they held that share: a few short helpers at the start of a
// program of long threads would otherwise give each of its later threads an
// event of its own (whose context switches then cost more: the kernel no
// longer swaps its events' context with its siblings').
constexpr uint64_t kAloneAfterThreads = 8;

// Waits while *word == expected, for at most ns. Safe to pair with a
// futex wake from a signal handler.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  sys(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word) {
  sys(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

int choose_speedup(uint32_t draw) {
  if (draw & 1) return 0;
  return static_cast<int>(((draw >> 1) % 20) + 1) * 5;
}

uint64_t adapt_length(uint64_t current_ns, uint64_t initial_ns, uint64_t min_visits, bool any_point) {
  if (!any_point) return current_ns;
  if (min_visits < kMinVisits) return std::min<uint64_t>(current_ns * 2, 64 * initial_ns);
  const uint64_t shortest = std::min(initial_ns, kShortestNs);
  if (min_visits > kHalveVisits && current_ns > shortest) return std::max(current_ns / 2, shortest);
  return current_ns;
}

uint64_t least_visits(const std::vector<PointDelta>& progress, uint64_t experiment,
                      std::map<std::string, uint64_t>* last_seen, bool* any) {
  *any = !progress.empty();
  uint64_t least = UINT64_MAX;
  for (const PointDelta& d : progress) {
    uint64_t v = d.latency ? d.arrivals : d.delta;
    if (v > 0) (*last_seen)[d.name] = experiment;
    auto it = last_seen->find(d.name);
    if (it != last_seen->end() && experiment - it->second < kLiveExperiments) least = std::min(least, v);
  }
  return least == UINT64_MAX ? 0 : least;
}

AlignPoint align_point(const std::vector<PointDelta>& progress, uint64_t wall_ns) {
  AlignPoint out;
  uint64_t least = UINT64_MAX;
  for (const PointDelta& d : progress) {
    if (d.latency || d.delta == 0 || d.delta >= least) continue;
    least = d.delta;
    out.name = d.name;
  }
  if (least == UINT64_MAX || wall_ns / least < kAlignPeriodNs) return AlignPoint();
  out.period_ns = wall_ns / least;
  return out;
}

Profiler::Profiler(const Config& config, LineMap* lines, ProfileWriter* writer, ProfilerHooks hooks)
    : config_(config),
      lines_(lines),
      writer_(writer),
      hooks_(std::move(hooks)),
      rng_(static_cast<uint32_t>(now_real() ^ static_cast<uint64_t>(getpid()))),
      targets_(lines, config.units),
      symbolizer_([lines](const std::string& path, bool is_main) { return lines->in_binary_scope(path, is_main); }),
      length_ns_(config.experiment_length_ns) {
  locks_.calibrate();  // the time-stamp counter's rate is measured from here on
  // Before the program's calls are hooked: they keep the counters or not.
  g_lock_counters.store(config.lock_counters, std::memory_order_relaxed);
}

void Profiler::set_fixed(const Line* line, std::vector<AddrRange> ranges) {
  fixed_ = targets_.of_line(line);
  fixed_ranges_ = std::move(ranges);
}

bool Profiler::set_fixed(Unit unit, const std::string& spec, std::string* error, std::string* hint) {
  fixed_ = targets_.fixed(unit, spec, &fixed_ranges_, error, hint);
  return fixed_ != nullptr;
}

void Profiler::add_candidates(const Sample& smp, const Line* l, bool cpu, uint64_t periods) {
  candidates_.clear();
  if (targets_.has(Unit::kLine)) candidates_.push_back(targets_.of_line(l));
  targets_.sample(smp, cpu, cpu, &rng_, &candidates_);
  // Line choice draws from samples taken while no experiment paused the
  // other threads: during a sped-up experiment or its cool-off, the
  // selected unit's thread runs while the others sleep, and its unit would
  // be over-represented (chosen again and again).
  // The samples of one drain are a few ms apart at most, against the
  // pool's 0.5 s half-life: one clock read per drain dates them all.
  const bool undisturbed = !(smp.flags & kSampleDelaying);
  if (!candidates_.empty()) {
    if (!first_candidate_ns_) first_candidate_ns_ = drain_ns_;
    if (undisturbed) undisturbed_periods_ += periods;
  }
  for (const Target* t : candidates_) {
    if (undisturbed) recent_.add(t, static_cast<double>(periods), drain_ns_);
    recent_all_.add(t, static_cast<double>(periods), drain_ns_);
  }
}

void Profiler::request_stop(const char* reason) {
  const char* expected = nullptr;
  pending_reason_.compare_exchange_strong(expected, reason);
  stop_word_.store(1, std::memory_order_release);
  futex_wake(&stop_word_);
}

bool Profiler::wait_final(uint64_t timeout_ns) {
  uint64_t deadline = now_mono() + timeout_ns;
  while (!final_written_.load(std::memory_order_acquire)) {
    uint64_t now = now_mono();
    if (now >= deadline) return false;
    futex_wait(&final_written_, 0, std::min<uint64_t>(deadline - now, 1000000));
  }
  return true;
}

void Profiler::wait_slice(uint64_t ns) {
  if (!stopping()) futex_wait(&stop_word_, 0, ns);
}

void Profiler::wait_and_drain(uint64_t ns, bool drain_too) {
  // (Without a drain the thread's CPU time is a few microseconds: not read.)
  Look look{now_mono(), drain_too ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0, 0};
  wait_slice(ns);
  if (drain_too) drain();
  note_stall(look, ns, drain_too);
}

void Profiler::note_stall(const Look& look, uint64_t slept_ns, bool cpu_read) {
  // The time this look took beyond the sleep asked for and the thread's own
  // CPU time. Waiting for a CPU (a busy machine, a container's CPU quota
  // spent) is in it, and is time the program's threads competed for too:
  // schedstat's run delay tells it. What is left is a stall: a stopped
  // process (Ctrl-Z, SIGSTOP, a debugger, a frozen cgroup) or a paused
  // virtual machine, where no thread of the program ran. (Or a drain that
  // blocked on a disk read that long: the experiment is lost, not misread.)
  const uint64_t took = now_mono() - look.wall, cpu = cpu_read ? clock_ns(CLOCK_THREAD_CPUTIME_ID) - look.cpu : 0;
  const uint64_t idle = took > cpu + slept_ns ? took - cpu - slept_ns : 0;
  if (idle < kStallNs) return;
  const uint64_t delay = own_run_delay_ns();
  const uint64_t waited = delay > run_delay_ns_ ? delay - run_delay_ns_ : 0;
  run_delay_ns_ = delay;
  if (idle > waited + kStallNs) stall_ns_ += idle - waited;
}

namespace {

// The calling thread's block reads and major faults: a look in which it did
// any may have waited for a disk, not for a stopped process. (Not its block
// writes: the kernel counts a page of the profile as written when it is
// dirtied, not when the thread waits for it.)
uint64_t thread_io_ops() {
  rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(ru.ru_majflt + ru.ru_inblock);
}

}  // namespace

Profiler::Look Profiler::begin_look_between() {
  // (Before the first experiment the descriptor is not open yet, and the
  // baseline stays: the look's run delay is then that since the thread's
  // start, a larger one, and a stall must be longer to be read.)
  if (schedstat_fd_ >= 0) run_delay_ns_ = own_run_delay_ns();
  return Look{now_mono(), clock_ns(CLOCK_THREAD_CPUTIME_ID), thread_io_ops()};
}

void Profiler::end_look_between(const Look& look, uint64_t slept_ns) {
  // Outside experiments (the stacks' symbolization, the choice of the next
  // one, the cool-off, the wait for a first sample): a stall here belongs to
  // no experiment, but it is no time the program could use either, and is
  // banked for the phase correction's T. Not if the thread touched a disk:
  // a long read of debug information is no stop of the process.
  const uint64_t io = thread_io_ops();
  if (io == look.io && io != UINT64_MAX) note_stall(look, slept_ns, true);
}

void Profiler::flush_between() {
  // A look of its own: the first symbolization reads debug information
  // from disk, and a look with a disk read is not measured.
  if (!stacks_due(now_mono() - start_mono_)) return;
  Look look = begin_look_between();
  maybe_flush_stacks();
  end_look_between(look, 0);
}

uint64_t Profiler::own_run_delay_ns() {
  // One descriptor kept open, high (fds.h): opened at each read, the file
  // takes the program's lowest free number for a moment. It is opened at
  // the first experiment (or stall), not at the start of the run: a program
  // that lists its descriptors as it starts saw it. (Not opened: the
  // open-file limit reached, tried again at the next read.)
  if (schedstat_fd_ < 0) schedstat_fd_ = open_high("/proc/thread-self/schedstat");
  return schedstat_fd_ >= 0 ? schedstat_wait_ns(schedstat_fd_) : 0;
}

void Profiler::bank_stall() {
  stalled_total_ns_ += stall_ns_;
  stall_ns_ = 0;
}

const Line* Profiler::line_of(uintptr_t pc) {
  // An object unloaded, or loaded where one was: cached answers may be stale.
  const uint64_t objects = lines_->objects_version();
  if (objects != pc_cache_objects_) {
    pc_cache_.clear();
    pc_cache_objects_ = objects;
  }
  auto it = pc_cache_.find(pc);
  if (it != pc_cache_.end()) return it->second;
  const Line* l = lines_->lookup(pc);
  if (pc_cache_.size() > (1u << 20)) pc_cache_.clear();
  pc_cache_.emplace(pc, l);
  return l;
}

const Line* Profiler::symbolize(const Sample& smp) {
  // The first frame with a line in scope: the same frame the sample
  // handler's hit test looks at (see Shared::scope).
  for (uint32_t i = 0; i < smp.n; i++)
    if (const Line* l = line_of(smp.pcs[i])) return l;
  return nullptr;
}

void Profiler::publish_scope() {
  uint64_t v = lines_->attributable_version();
  if (v == scope_version_) return;
  scope_version_ = v;
  shared().scope.store(make_range_set(lines_->attributable_ranges()), std::memory_order_release);
}

void Profiler::note_name(const ThreadState* t, ThreadInfo* info) {
  char name[16];
  if (t->name.get(name) && info->record.thread != name) info->record.thread = name;
}

void Profiler::note_thread(ThreadState* t) {
  ThreadInfo& info = threads_[t->tid];
  if (info.record.tid != t->tid || info.record.start_ns != t->start_ns) {
    // A new thread (or a thread id the kernel reused).
    info = ThreadInfo();
    info.record.tid = t->tid;
    info.record.start_ns = t->start_ns;
    info.record.group = t->start_fn ? "" : "main";
    info.start_fn = t->start_fn;
    info.origin_pc = t->origin_pc;
  }
}

Profiler::ThreadInfo& Profiler::known_thread(pid_t tid) {
  auto it = threads_.find(tid);
  if (it != threads_.end()) return it->second;
  late_ = ThreadInfo();
  return late_;
}

void Profiler::keep_up() {
  if (!hooks_.for_each_live_thread) return;
  uint64_t now = now_mono();
  if (now - last_keep_up_ns_ < kKeepUpNs) return;
  last_keep_up_ns_ = now;
  hooks_.for_each_live_thread([&](ThreadState* t) {
    if (t->state.load() != kThreadLive) return;  // an ended thread is the next drain's, whole
    Pending p;
    p.tid = t->tid;
    while (t->ring.pop(&p.smp)) held_.push_back(p);
    if (config_.sampling_only && t->page) take_own_ring(t, &held_bytes_, &held_taken_);
  });
  take_cpu_rings(&held_bytes_, &held_taken_);
}

void Profiler::take_own_ring(ThreadState* t, std::vector<char>* bytes, std::vector<Taken>* taken) {
  if (t->alone) alone_.insert(t->tid);  // (before the CPU rings' records of it are taken)
  const size_t at = bytes->size();
  take_records(t, bytes);
  if (bytes->size() > at) taken->push_back({t->tid, at, bytes->size() - at, t->period_ns, false});
}

void Profiler::take_cpu_rings(std::vector<char>* bytes, std::vector<Taken>* taken, const std::vector<pid_t>* ended) {
  if (!config_.sampling_only || (!hooks_.take_cpu_records && !sampler_cpu_rings())) return;
  static thread_local std::vector<ThreadRecords> chunks;
  chunks.clear();
  if (hooks_.take_cpu_records)
    hooks_.take_cpu_records(bytes, &chunks, &total_lost_);
  else
    cpu_cut_ns_ = take_cpu_records(bytes, &chunks, &total_lost_, ended, last_look_);
  for (const ThreadRecords& c : chunks)
    if (!alone_.count(c.tid)) taken->push_back({c.tid, c.offset, c.size, 0, true});
}

void Profiler::drain() {
  drain_ns_ = now_mono();
  if (hooks_.poll_objects) hooks_.poll_objects();
  calibrate_wait_ticks();  // the waits' clock (delays.h)
  // Under the registry lock only copy the samples out: symbolizing may read
  // DWARF for seconds, and pthread_create and fork wait for that lock.
  // What keep_up() took first: those samples are older.
  pending_.swap(held_);
  taken_.swap(held_taken_);
  taken_bytes_.swap(held_bytes_);
  held_.clear();
  held_taken_.clear();
  held_bytes_.clear();
  hooks_.for_each_thread([&](ThreadState* t) {
    // Whether it has ended is read once, before its samples: an ended
    // thread has pushed its last ones, and a thread that ends during this
    // look is the next one's, whole (its final lock counts and its record
    // are taken together; the registry recycles only a retired state).
    const bool ended = t->state.load() == kThreadEnded;
    // Its switch records come from its own ring or the CPU rings (not
    // under the timer sampler, nor in --locks-only); before sampler_forget.
    const bool switch_records = t->page != nullptr || sampler_cpu_rings() ||
                                (config_.sampling_only && hooks_.take_cpu_records);
    Pending p;
    p.tid = t->tid;
    while (t->ring.pop(&p.smp)) pending_.push_back(p);
    if (config_.sampling_only && t->page) {
      // No signal: the profiler takes the thread's perf records itself.
      take_own_ring(t, &taken_bytes_, &taken_);
      if (ended) {
        sampler_forget(t);  // its last records are taken: release the ring
      } else if (!t->alone && ++t->samples_at_period >= std::max<uint64_t>(1, kPeriodRedrawNs / drain_wait_)) {
        // DCPI: a new random period. Not at every look: the event's timer
        // restarts, and the part of a period the thread had run is lost.
        t->samples_at_period = 0;
        rerandomize_period(t);
      }
    }
    if (!config_.sampling_only && !ended) sampler_watch_signals(t);
    if (t->tid) {
      note_thread(t);
      ThreadInfo& info = threads_[t->tid];
      note_name(t, &info);
      for (int k = 0; k < kWaitKinds; k++) info.waits[k] = t->wait_total_ns[k].load(std::memory_order_relaxed);
      info.paused_ns = t->paused_ns.load(std::memory_order_relaxed);
      info.held_ns = t->held_ns.load(std::memory_order_relaxed);
      info.held_cpu_ns = t->held_cpu_ns.load(std::memory_order_relaxed);
      info.preempt_credited_ns = t->preempt_credited_ns.load(std::memory_order_relaxed);
      if (switch_records) info.switch_records = true;
      if (t->alone) info.alone = true;
      if (t->random_first) info.random_first = true;
      // A wait still open: its time so far, which write_final counts for the
      // threads alive at the end (a pool's idle workers, blocked all along,
      // read 100% `rest` without it). Read without the thread's cooperation:
      // wait_depth goes up before wait_start is set, a window of
      // nanoseconds at the start of a wait.
      info.open_wait_ns = 0;
      if (!ended && __atomic_load_n(&t->wait_depth, __ATOMIC_RELAXED) > 0) {
        info.open_wait_kind = __atomic_load_n(&t->open_wait_kind, __ATOMIC_RELAXED);
        info.open_wait_ns = wait_elapsed(t);
      }
      if (!config_.sampling_only) {
        info.voluntary_ns = __atomic_load_n(&t->switches.voluntary_ns, __ATOMIC_RELAXED);
        info.uncharged_ns = __atomic_load_n(&t->switches.uncharged_ns, __ATOMIC_RELAXED);
      }
    }
    // Statistics, before an exited thread's state is recycled.
    auto take = [](std::atomic<uint64_t>& counter, uint64_t* reported, uint64_t* total) {
      uint64_t v = counter.load(std::memory_order_relaxed);
      *total += v - *reported;
      *reported = v;
    };
    take(t->lost_records, &t->reported_lost, &total_lost_);
    take(t->dropped_samples, &t->reported_dropped, &total_dropped_);
    take(t->skipped_records, &t->reported_skipped, &total_skipped_);
    if (t->locks && ended) {
      locks_.take(t->tid, *t->locks, true);  // its final counts, once: the table goes with them
      free_lock_table(t->locks);
      t->locks = nullptr;
    } else if (t->locks && flush_locks_) {
      locks_.take(t->tid, *t->locks, false);
    }
    if (ended && t->tid) {  // ended: its record is written once its samples are counted
      ThreadInfo& info = threads_[t->tid];
      info.record.end_ns = t->end_ns;
      info.record.cpu_clock_ns = t->cpu_clock_ns;  // (its name, as at its end: note_name above)
      ended_.push_back(t->tid);
      if (!sampler_cpu_rings()) {  // (else counted from the CPU rings: write_counters)
        if (t->migrations >= 0) migrations_ += t->migrations;
        else migrations_known_ = false;
      }
    }
    if (ended) t->state.store(kThreadRetired);
  });
  // After the threads' look: an ended thread's last records are in the
  // CPU rings by now, all taken. Then its tid may come back for another
  // thread.
  take_cpu_rings(&taken_bytes_, &taken_, &ended_);
  if (sampler_cpu_rings())
    for (pid_t tid : ended_) {
      cpu_ring_thread_ended(tid);
      alone_.erase(tid);
    }
  const uint64_t period = config_.sample_period_ns;
  for (const Taken& tk : taken_) {
    // The CPU rings hold a thread's records from its start, and a thread
    // started after this look at the threads is not known yet: its records
    // (the switch out of its first wait, say) wait for the next look, once.
    if (tk.cpu_layout && !tk.waited && !last_look_ && !threads_.count(tk.tid)) {
      const size_t at = held_bytes_.size();
      held_bytes_.insert(held_bytes_.end(), taken_bytes_.begin() + tk.offset, taken_bytes_.begin() + tk.offset + tk.size);
      held_taken_.push_back(tk);
      held_taken_.back().offset = at;
      held_taken_.back().waited = true;
      continue;
    }
    ThreadInfo& info = known_thread(tk.tid);
    uint64_t lost = 0, skipped = 0;
    // The intervals of this look and the previous one are kept, for the
    // blocked samples of calls that ended in them (account_blocked).
    info.off_log.start_look(drain_ns_);
    info.switches.log = &info.off_log;
    parse_records(taken_bytes_.data() + tk.offset, tk.size, &info.switches, tk.period_ns, &lost, &skipped,
                  [&](Sample& smp) {
                    add_origin(info.origin_pc, shared().scope.load(std::memory_order_acquire), &smp);
                    pending_.push_back({tk.tid, smp});
                  },
                  tk.cpu_layout);
    total_lost_ += lost;
    total_skipped_ += skipped;
    info.voluntary_ns = info.switches.voluntary_ns;
    info.uncharged_ns = info.switches.uncharged_ns;
  }
  const uint64_t parsed_to = cpu_cut_ns_;  // (keep_up below takes more, for the next look)
  for (Pending& p : pending_) {
    Sample& smp = p.smp;
    // A blocked call whose switch records may be partly left for the next
    // take (CpuRecordCut): its time off the CPU is read at the next look.
    if (sample_kind(smp.flags) && smp.call_off_ns == Sample::kCallOffUnknown && smp.call_end_ns >= parsed_to) {
      held_.push_back(p);
      continue;
    }
    // A chain is kept only as far as its return addresses are code (one
    // check here, for every sampler): the kernel's, built from frame
    // pointers (a sample neither the handler nor the stack copy could
    // unwind), reads any stack word as one in code without them, and
    // libunwind guesses from the frame pointer where it finds no unwind
    // information (a stack address as the caller of a leaf, in about 1 of
    // 80 runs of tests/e2e/test_unloaded_libraries.py's program, some 600
    // samples each).
    if (uint32_t keep = code_frames(smp.pcs, smp.n); keep < smp.n) {
      smp.n = keep;
      smp.flags &= ~kSampleTruncated;
    }
    if (smp.flags & kSampleTruncated) truncated_++;
    ThreadInfo& info = known_thread(p.tid);
    if (uint32_t kind = sample_kind(smp.flags)) {
      account_blocked(p.tid, kind, smp);
      continue;
    }
    // Counted as processed: the threads' own counts would also hold a
    // sample pushed after the last look took their rings, which nothing
    // processes (the shutdown record said one more sample than its stacks).
    total_samples_++;
    info.last_cpu = &p.smp;
    info.record.cpu_ns += smp.weight_ns;
    crowd_.add(smp.weight_ns, smp.wait_ns);
    stacks_.add(p.tid, StackKind::kCpu, smp.pcs, smp.n, smp.weight_ns);
    if (smp.wait_ns) {
      // Preempted time: one blocked sample of the `sched` kind per period of it.
      info.record.wait_ns[static_cast<int>(WaitKind::kSched)] += smp.wait_ns;
      info.sched_rest_ns += smp.wait_ns;
      if (info.sched_rest_ns >= period) {
        uint64_t n = info.sched_rest_ns / period;
        info.sched_rest_ns -= n * period;
        stacks_.add(p.tid, StackKind::kSched, smp.pcs, smp.n, n * period, n);
      }
    }
    const Line* l = symbolize(smp);
    keep_up();  // the first sample in an object reads its line table
    if (!l) {
      out_of_scope_++;
      continue;
    }
    counts_since_write_[l]++;
    add_candidates(smp, l, true, 1);
  }
  account_other_waits(period);
  crowd_.publish();
  std::vector<ThreadInfo*> ended;
  for (pid_t tid : ended_) {
    auto it = threads_.find(tid);
    if (it != threads_.end()) ended.push_back(&it->second);
  }
  finish_threads(ended);
  for (pid_t tid : ended_) threads_.erase(tid);
  ended_.clear();
  publish_scope();
}

std::string Profiler::group_of(ThreadInfo* info) {
  if (info->record.group.empty() && info->start_fn) {
    // Once per start function: a program that starts a thread per task
    // would otherwise read DWARF scopes at each thread's end (two_threads:
    // 600 threads, half of the profiler thread's CPU time).
    auto it = group_names_.find(info->start_fn);
    if (it == group_names_.end()) {
      std::string name = symbolizer_.function_name(info->start_fn);
      it = group_names_.emplace(info->start_fn, name.empty() ? "?" : name).first;
    }
    info->record.group = it->second;
  }
  return info->record.group;
}

void Profiler::finish_threads(const std::vector<ThreadInfo*>& infos) {
  if (infos.empty()) return;
  for (ThreadInfo* info : infos) {
    group_of(info);
    info->record.paused_ns = info->paused_ns;
    info->record.paused_cpu_ns = info->held_cpu_ns;
    info->record.preempt_credited_ns = info->preempt_credited_ns;
    info->record.sampled_alone = info->alone;
    if (info->switch_records) {
      const uint64_t slept = info->slept_ns();
      info->record.off_cpu_ns = static_cast<int64_t>(info->voluntary_ns > slept ? info->voluntary_ns - slept : 0);
    }
  }
  // Their last stacks must be defined before the flush that follows forgets
  // them: one flush for all the threads that ended since the last look.
  flush_stacks();
  for (ThreadInfo* info : infos) {
    writer_->thread(info->record);
    const ThreadRecord& r = info->record;
    short_threads_.threads++;
    short_threads_.clock_ns += r.cpu_clock_ns;
    // (A thread sampled from a random first period is not under-sampled,
    // however short: sampled alone, or in the causal modes.)
    if (!info->random_first && r.cpu_clock_ns < kShortThreadPeriods * config_.sample_period_ns) {
      short_threads_.short_threads++;
      short_threads_.short_clock_ns += r.cpu_clock_ns;
      short_threads_.short_sampled_ns += r.cpu_ns + r.call_cpu_ns;  // (the CPU stacks: user mode, and the kernel in calls)
    }
  }
  // Sampling-only: once short threads, kAloneAfterThreads of them at least,
  // hold more than kShortThreadsShare of the ended threads' CPU time, the
  // threads started from then on are sampled alone, for the rest of the run
  // (sampler_sample_new_threads_alone).
  const ShortThreads& st = short_threads_;
  if (config_.sampling_only && sampler_cpu_rings() && !sampler_samples_new_threads_alone() &&
      st.short_threads >= kAloneAfterThreads && st.dominant(kShortThreadsShare))
    sampler_sample_new_threads_alone();
}

// A thread's period under way when it ends is in no sample, and where its
// first period is a whole one (sampling-only's CPU events; the timer
// sampler), threads that each run for under a couple of periods are mostly
// unsampled, whatever their share (threads sampled from a random first
// period are not counted)
// (docs/runtime.md, "What the weights miss"). Said when they hold more than
// kShortThreadsShare of the threads' CPU time.
void Profiler::warn_short_threads() {
  const ShortThreads& s = short_threads_;
  // (--locks-only samples nothing: no thread is under-sampled.)
  if (config_.locks_only || !s.short_threads || !s.dominant(kShortThreadsShare)) return;
  const uint64_t suggested = short_thread_period(s.short_clock_ns / s.short_threads);
  char advice[160];
  if (!suggested)
    snprintf(advice, sizeof advice, "; they are too short for any period the runtime takes (10us at the least)");
  else {
    const bool ms = suggested % 1000000 == 0;
    snprintf(advice, sizeof advice,
             "; a shorter period samples them (--sample-period %llu%s: a quarter of their mean CPU time or less)",
             static_cast<unsigned long long>(ms ? suggested / 1000000 : suggested / 1000), ms ? "ms" : "us");
  }
  char msg[600];
  snprintf(msg, sizeof msg,
           "%llu of %llu threads ran under %llu sampling periods (%g ms) of CPU time each, %.2f s in all, "
           "and their samples hold %.2f s of it: a thread's period under way when it ends is in no sample, "
           "so short threads are under-sampled, whatever their share%s",
           static_cast<unsigned long long>(s.short_threads), static_cast<unsigned long long>(s.threads),
           static_cast<unsigned long long>(kShortThreadPeriods), config_.sample_period_ns / 1e6,
           s.short_clock_ns / 1e9, s.short_sampled_ns / 1e9, advice);
  warn("short-threads", msg);
}

uint64_t next_drain_wait(uint64_t waited_ns, uint64_t fill_permille) {
  const uint64_t doubled = std::min(2 * waited_ns, kLongestDrainNs);
  const uint64_t keeps = fill_permille ? waited_ns * kDrainFillPermille / fill_permille : doubled;
  return std::max(std::min(keeps, doubled), kShortestDrainNs);
}

uint64_t short_thread_period(uint64_t mean_ns) {
  for (uint64_t p : {5000000ull, 2000000ull, 1000000ull, 500000ull, 200000ull, 100000ull, 50000ull, 20000ull, 10000ull})
    if (p <= mean_ns / 4) return p;
  return 0;
}

void Profiler::flush_stacks() {
  StackTable::Flush f = stacks_.flush(&symbolizer_, [&](pid_t tid, std::string* name, std::string* group) {
    auto it = threads_.find(tid);
    if (it == threads_.end()) return;
    ThreadInfo& info = it->second;
    *name = info.record.thread;
    *group = group_of(&info);
  }, [this] { keep_up(); });
  writer_->locations(f.locations);
  writer_->stacks(f.stacks);
  writer_->stack_counts(f.counts);
}

void Profiler::maybe_flush_stacks() {
  uint64_t elapsed = now_mono() - start_mono_;
  if (!stacks_due(elapsed)) return;
  flush_stacks();
  write_locks();
  writer_->checkpoint();  // totals mode's (sampling-only, locks-only); else nothing
  next_flush_ns_ = next_stack_flush_ns(elapsed);
}

std::string Profiler::site_name(uintptr_t pc) {
  if (!pc) return "";
  if (const Line* l = line_of(pc)) return l->name();
  // Outside the scope: the function and its object, from the symbolizer.
  Symbolized s = symbolizer_.symbolize(pc);
  std::string fn = s.frames.empty() ? "" : s.frames.back().function;
  std::string obj = path_base(s.object);
  return (fn.empty() ? "?" : fn) + " (" + (obj.empty() ? "?" : obj) + ")";
}

void Profiler::write_locks() {
  // Live threads' tables are read at this look (their counts replace what
  // they gave last time); ended ones were taken at their end.
  flush_locks_ = true;
  drain();
  flush_locks_ = false;
  locks_.calibrate();
  LocksRecord r;
  r.elapsed_ns = now_mono() - start_mono_;
  // A lock's or a call site's totals, in the record's units (ticks to ns).
  auto counts = [&](const LockSiteTotals& s, LockSiteRecord* x) {
    x->acquisitions = s.acquisitions;
    x->acquisitions_sd = static_cast<uint64_t>(std::llround(std::sqrt(s.acquisitions_var)));
    x->contended = s.contended;
    x->wait_ns = s.wait_ns;
    x->hold_ns = static_cast<uint64_t>(static_cast<double>(s.hold_ticks) * locks_.ns_per_tick());
    x->hold_sd_ns = static_cast<uint64_t>(std::sqrt(s.hold_var) * locks_.ns_per_tick());
    x->hold_top_ns = static_cast<uint64_t>(static_cast<double>(s.top_excess_ticks) * locks_.ns_per_tick());
    x->trylocks = s.trylocks;
    x->trylock_failures = s.trylock_failures;
  };
  auto convert = [&](const LockTotals& t, LockRecord* l) {
    l->kind = lock_kind_name(t.kind);
    l->site = site_name(t.init_site ? t.init_site : t.first_site);
    counts(t.all, &l->all);
    l->threads = t.threads.size();
    for (auto& s : t.sites) {
      LockSiteRecord x;
      x.site = site_name(s.first);
      counts(s.second, &x);
      l->sites.push_back(std::move(x));
    }
    std::sort(l->sites.begin(), l->sites.end(),
              [](const LockSiteRecord& a, const LockSiteRecord& b) { return a.site < b.site; });
  };
  for (auto& kv : locks_.objects()) {
    LockRecord l;
    auto it = lock_ids_.find(kv.first);
    if (it == lock_ids_.end()) it = lock_ids_.emplace(kv.first, lock_ids_.size() + 1).first;
    l.id = it->second;
    l.address = kv.first;
    convert(kv.second, &l);
    r.locks.push_back(std::move(l));
  }
  std::sort(r.locks.begin(), r.locks.end(), [](const LockRecord& a, const LockRecord& b) { return a.id < b.id; });
  for (auto& kv : locks_.folded()) {
    LockRecord l;
    convert(kv.second, &l);
    l.id = kv.second.all.acquisitions;  // (written as "objects": not known exactly, acquisitions bound it)
    r.folded.push_back(std::move(l));
  }
  writer_->locks(r);
}

void Profiler::run_one_experiment(const Target* target, const std::vector<AddrRange>& ranges, int speedup) {
  Shared& s = shared();
  const RangeSet* set = make_range_set(ranges);
  s.selected_any_frame.store(target->unit == Unit::kCallsite, std::memory_order_relaxed);
  ProgressTotals before = progress().totals();
  s.speedup_pct.store(static_cast<uint32_t>(speedup));
  // What the measured window counts from its start: the selected unit's
  // samples and waits, and the stalls of the process.
  auto open_window = [&] {
    s.selected_samples.store(0);
    s.selected_ns.store(0);
    s.selected_blocked_ns.store(0);
    bank_stall();  // one before the window: left out of T, not of this experiment
    run_delay_ns_ = own_run_delay_ns();
  };
  open_window();
  s.experiment_start_ns.store(now_mono());
  uint64_t g0 = s.global_delay.load();
  s.epoch_start_global.store(g0, std::memory_order_relaxed);
  s.epoch.fetch_add(1, std::memory_order_acq_rel);
  s.paying.store(true, std::memory_order_release);
  s.selected.store(set, std::memory_order_release);
  uint64_t t0 = now_mono();

  bool end_to_end = config_.end_to_end;
  // A rarely visited point: the window starts at its next visit and ends at
  // its first visit after the length (align_point). The speedup is in force
  // from the start of the wait to the end of the window.
  const coz_counter_layout* ref = nullptr;
  uint64_t poll_ns = 0, timeout_ns = 0;
  bool aligned = false;
  if (align_.period_ns && !end_to_end) ref = progress().throughput_counter(align_.name);
  if (ref) {
    poll_ns = std::min<uint64_t>(std::max<uint64_t>(align_.period_ns / 16, 50000), 1000000);
    timeout_ns = 3 * align_.period_ns + 2000000;  // a sped-up experiment slows the visits
    aligned = await_visit(ref, __atomic_load_n(&ref->count, __ATOMIC_RELAXED), poll_ns, timeout_ns);
    // Measured from here, at a visit (or, without one, from here: no visit was missed).
    before = progress().totals();
    g0 = s.global_delay.load();
    open_window();  // (a stall while waiting for the visit is outside it)
    t0 = now_mono();
  }
  // (An end-to-end run's one experiment goes on to the end, marked.)
  while (!stopping() && (!stall_ns_ || end_to_end)) {
    uint64_t elapsed = now_mono() - t0;
    if (!end_to_end && elapsed >= length_ns_) break;
    wait_and_drain(end_to_end ? kSliceNs : std::min(kSliceNs, length_ns_ - elapsed));
    // Stacks are flushed between experiments: symbolizing them can take
    // hundreds of milliseconds, which would lengthen this one (measured: a
    // 50 ms experiment lasted up to 1.2 s on a loaded machine). An
    // end-to-end run is one experiment: its stacks are flushed as it goes.
    if (end_to_end) maybe_flush_stacks();
  }
  if (ref && !stopping() && !stall_ns_)
    aligned = await_visit(ref, __atomic_load_n(&ref->count, __ATOMIC_RELAXED), poll_ns, timeout_ns) && aligned;

  uint64_t t1 = now_mono();
  s.selected.store(nullptr, std::memory_order_release);
  uint64_t g1 = s.global_delay.load();
  ProgressTotals after = progress().totals();

  ExperimentRecord r;
  r.selected = target->name;
  r.unit = unit_name(target->unit);
  r.speedup_percent = speedup;
  r.wall_ns = t1 - t0;
  r.delay_ns = g1 - g0;
  r.duration_ns = r.wall_ns > r.delay_ns ? r.wall_ns - r.delay_ns : 0;
  r.selected_samples = s.selected_samples.load();
  r.selected_ns = s.selected_ns.load();
  r.selected_blocked_ns = s.selected_blocked_ns.load();
  r.partial = stopping();
  r.stalled_ns = stall_ns_;
  bank_stall();
  r.progress = ProgressRegistry::deltas(before, after);
  if (aligned) r.aligned = align_.name;
  if (end_to_end) {
    PointDelta d;
    d.name = "end-to-end";
    d.delta = 1;
    r.progress.push_back(d);
  }
  writer_->experiment(r);
  experiments_++;
  if (config_.verbose)
    raw_log("experiment %lu: %s at %d%%, %lu ms, %lu selected samples", static_cast<unsigned long>(experiments_),
            r.selected.c_str(), speedup, static_cast<unsigned long>(r.wall_ns / 1000000),
            static_cast<unsigned long>(r.selected_samples));

  if (r.stalled_ns) return;  // its visits say nothing of the program's pace
  bool any = false;
  uint64_t min_visits = least_visits(r.progress, experiments_, &point_last_seen_, &any);
  length_ns_ = adapt_length(length_ns_, config_.experiment_length_ns, min_visits, any);
  align_ = align_point(r.progress, r.wall_ns);
}

bool Profiler::await_visit(const coz_counter_layout* counter, uint64_t from, uint64_t poll_ns, uint64_t timeout_ns) {
  uint64_t start = now_mono();
  while (!stopping() && !stall_ns_) {
    if (__atomic_load_n(&counter->count, __ATOMIC_RELAXED) != from) return true;
    uint64_t now = now_mono();
    if (now - start >= timeout_ns) return false;
    wait_and_drain(poll_ns, now - drain_ns_ >= kSliceNs);
  }
  return false;
}

void Profiler::account_blocked(pid_t tid, uint32_t kind, const Sample& smp) {
  // One blocked sample per period of waiting: `weight_ns` holds them all.
  const uint64_t period = config_.sample_period_ns;
  uint64_t n = period ? smp.weight_ns / period : 0;
  if (!n) return;
  // The stacks keep the wait's time off the CPU, and its CPU time (the
  // kernel's work for the call) as CPU time under the frame
  // coz_kernel_in_io (_lock, _sleep, _sync); its time preempted is in
  // `sched` already, on the stack where the thread resumed. The pushing
  // call's shares stand for the sample's (docs/runtime.md, "Blocked
  // samples in the stacks").
  ThreadInfo& info = known_thread(tid);
  uint64_t off = smp.call_off_ns, preempted = smp.call_preempted_ns;
  // Sampling-only: from the profiler's log of the thread's intervals.
  if (off == Sample::kCallOffUnknown && config_.sampling_only && info.switch_records && smp.call_end_ns &&
      !info.switches.call_within(smp.call_end_ns, smp.call_ns, &off, &preempted))
    off = Sample::kCallOffUnknown;
  uint64_t off_part = smp.weight_ns, cpu_part = 0;
  if (off != Sample::kCallOffUnknown && smp.call_ns) {
    auto share = [&](uint64_t part) {
      return static_cast<uint64_t>(static_cast<unsigned __int128>(smp.weight_ns) * part / smp.call_ns);
    };
    off_part = std::min(smp.weight_ns, share(off));
    const uint64_t on = smp.call_ns > off + preempted ? smp.call_ns - off - preempted : 0;
    cpu_part = std::min(smp.weight_ns - off_part, share(on));
  }
  uint64_t& rest = info.blocked_rest_ns[kind - 1];
  rest += off_part;
  if (uint64_t shown = rest / period) {
    rest -= shown * period;
    stacks_.add(tid, static_cast<StackKind>(kind), smp.pcs, smp.n, shown * period, shown);
  }
  uint64_t& kernel_rest = info.kernel_rest_ns[kind - 1];
  kernel_rest += cpu_part;
  if (uint64_t shown = kernel_rest / period) {
    kernel_rest -= shown * period;
    uintptr_t pcs[kMaxFrames];
    pcs[0] = kernel_in_call_frame(static_cast<WaitKind>(kind - 1));
    const uint32_t n = std::min<uint32_t>(smp.n, kMaxFrames - 1);  // a full chain loses its outermost frame
    std::copy(smp.pcs, smp.pcs + n, pcs + 1);
    stacks_.add(tid, StackKind::kCpu, pcs, n + 1, shown * period, shown);
    info.record.call_cpu_ns += shown * period;
  }
  const Line* l = symbolize(smp);
  if (!l) return;
  blocked_since_write_[kind - 1][l] += n;
  // Line choice draws from on- and off-CPU samples in proportion to their
  // time, for the waits experiments can speed up.
  if (shared().blocked_scope.load(std::memory_order_relaxed) >> (kind - 1) & 1)
    add_candidates(smp, l, false, n);
}

void Profiler::account_other_waits(uint64_t period) {
  // Off the CPU but in no wait the runtime interposes (a futex of an inline
  // system call, a page fault): the switch records' voluntary time, less the
  // interposed waits and the runtime's own sleeps. Its blocked samples go
  // on the stack of the thread's latest CPU sample (where it resumed).
  for (auto& kv : threads_) {
    ThreadInfo& info = kv.second;
    uint64_t known = 0;
    for (int k = 0; k < kWaitKinds; k++)
      if (k != static_cast<int>(WaitKind::kSched) && k != static_cast<int>(WaitKind::kOther)) known += info.waits[k];
    known += info.slept_ns();  // a pause that held the CPU is not off it
    uint64_t other = info.voluntary_ns > known ? info.voluntary_ns - known : 0;
    if (info.uncharged_ns > info.uncharged_shown_ns) {
      crowd_.add(0, info.uncharged_ns - info.uncharged_shown_ns);  // preempted by a thread it had just woken
      info.record.wait_ns[static_cast<int>(WaitKind::kSched)] += info.uncharged_ns - info.uncharged_shown_ns;
      info.uncharged_shown_ns = info.uncharged_ns;
    }
    uint64_t& shown = info.record.wait_ns[static_cast<int>(WaitKind::kOther)];
    if (other > shown) {
      info.other_rest_ns += other - shown;
      shown = other;
    }
    for (int k = 0; k < kWaitKinds; k++)
      if (k != static_cast<int>(WaitKind::kSched) && k != static_cast<int>(WaitKind::kOther))
        info.record.wait_ns[k] = info.waits[k];
    if (info.other_rest_ns >= period && info.last_cpu) {
      uint64_t n = info.other_rest_ns / period;
      info.other_rest_ns -= n * period;
      stacks_.add(kv.first, StackKind::kOther, info.last_cpu->pcs, info.last_cpu->n, n * period, n);
    }
    info.last_cpu = nullptr;
  }
}

void Profiler::write_periodic() {
  SamplesRecord rec;
  rec.counts.reserve(counts_since_write_.size());
  for (auto& c : counts_since_write_) rec.counts.emplace_back(c.first->name(), c.second);
  std::sort(rec.counts.begin(), rec.counts.end());
  counts_since_write_.clear();
  for (int k = 0; k < kWaitKinds; k++) {
    if (blocked_since_write_[k].empty()) continue;
    Counts c;
    for (auto& kv : blocked_since_write_[k]) c.emplace_back(kv.first->name(), kv.second);
    std::sort(c.begin(), c.end());
    rec.blocked.emplace_back(stack_kind_name(static_cast<StackKind>(k + 1)), std::move(c));
    blocked_since_write_[k].clear();
  }
  rec.out_of_scope = out_of_scope_ - out_of_scope_written_;
  targets_.take_counts(&rec);
  writer_->samples(rec);
  out_of_scope_written_ = out_of_scope_;
  // Neither the delays nor the stalls measured in experiments (in which no
  // thread ran) are time the program could use: the phase correction's T.
  uint64_t elapsed = now_mono() - start_mono_;
  uint64_t lost = shared().global_delay.load() + stalled_total_ns_;
  writer_->runtime(elapsed > lost ? elapsed - lost : 0);
}

void Profiler::write_final() {
  last_look_ = true;  // nothing left for a next take
  drain();
  bank_stall();  // one since the last experiment
  write_periodic();
  // The threads still alive end with the run.
  uint64_t now = now_mono();
  std::vector<ThreadInfo*> live;
  for (auto& kv : threads_) {
    // Only threads seen starting (note_thread): an entry without a start has
    // no thread to describe (written, it read tid 0 from time 0). Entries
    // come only from note_thread now (known_thread); this stays the guard.
    if (!kv.second.record.tid) continue;
    ThreadInfo& info = kv.second;
    info.record.end_ns = now;
    info.record.cpu_clock_ns = thread_cpu_ns(kv.first);
    // Off the CPU now, of its own accord: in sampling-only the profiler
    // parsed the switch out (the time since it counts); in causal mode the
    // thread reads its own switch records only when it runs again, so a
    // wait under way stands for it.
    if (config_.sampling_only) {
      if (info.switches.out_ns && !info.switches.out_preempted && now > info.switches.out_ns)
        info.voluntary_ns += now - info.switches.out_ns;
    } else if (info.open_wait_ns) {
      info.voluntary_ns += info.open_wait_ns;
    }
    if (info.open_wait_ns && info.open_wait_kind < kWaitKinds)  // the wait under way, in its kind
      info.record.wait_ns[info.open_wait_kind] += info.open_wait_ns;
    live.push_back(&info);
  }
  finish_threads(live);
  warn_short_threads();
  threads_.clear();
  flush_stacks();
  write_locks();
  write_counters();
  ShutdownRecord r;
  r.time_ns = now_real();
  const char* reason = pending_reason_.load();
  r.reason = reason ? reason : "exit";
  r.samples = total_samples_;
  r.lost_records = total_lost_;
  r.dropped_samples = total_dropped_;
  r.skipped_records = total_skipped_;
  r.truncated_stacks = truncated_;
  r.experiments = experiments_;
  r.period_turns = period_turns_;
  // (--end-to-end: the run's end is its progress point.)
  // (A daemon's parent ends before the work: the warning "daemon" says where it went.
  // An image replaced by exec hands the process, and its progress, to the next.)
  if (progress().empty() && !config_.sampling_only && !config_.locks_only && !config_.end_to_end &&
      r.reason != "daemon" && r.reason != "exec") {
    std::string msg =
        "no progress point was reached: add COZ_PROGRESS to the program (include <coz.h>), "
        "or give --progress file:line or --end-to-end";
    warn("no-progress-point", msg);
  }
  writer_->shutdown(r);
  final_written_.store(1, std::memory_order_release);
  futex_wake(&final_written_);
}

// Another thread's CPU time, by the kernel's per-thread clock id.
uint64_t Profiler::thread_cpu_ns(pid_t tid) {
  clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);  // CPUCLOCK_SCHED, per thread
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Profiler::write_counters() {
  CountersRecord c;
  rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    c.user_ns = static_cast<uint64_t>(ru.ru_utime.tv_sec) * 1000000000ull + static_cast<uint64_t>(ru.ru_utime.tv_usec) * 1000ull;
    c.system_ns = static_cast<uint64_t>(ru.ru_stime.tv_sec) * 1000000000ull + static_cast<uint64_t>(ru.ru_stime.tv_usec) * 1000ull;
    c.voluntary_switches = static_cast<uint64_t>(ru.ru_nvcsw);
    c.involuntary_switches = static_cast<uint64_t>(ru.ru_nivcsw);
    c.minor_faults = static_cast<uint64_t>(ru.ru_minflt);
    c.major_faults = static_cast<uint64_t>(ru.ru_majflt);
  }
  // Work done in child processes is not in this profile: said, so that
  // `coz run --- sh -c ./app` is not taken for an idle program.
  if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
    c.children_cpu_ns = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
                        static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
  c.children_profiled = config_.follow_children;
  // (write_final runs in the profiler thread: its clock is the profiler's.)
  c.profiler_cpu_ns = static_cast<int64_t>(clock_ns(CLOCK_THREAD_CPUTIME_ID));
  // Migrations: with the CPU rings, the moves they showed (reading each
  // thread's /proc/self/task/N/sched at its end cost it about 30 us, a third
  // of sampling-only's whole cost per thread start and end); else the ended
  // threads' (each read its own at its end) and the live ones' now.
  int64_t migrations = migrations_known_ ? migrations_ : -1;
  if (sampler_cpu_rings()) {
    migrations = static_cast<int64_t>(cpu_ring_migrations());
  } else if (migrations >= 0 && hooks_.live_tids) {
    for (pid_t tid : hooks_.live_tids()) {
      int64_t m = thread_migrations(tid);
      if (m < 0) {
        migrations = -1;
        break;
      }
      migrations += m;
    }
  }
  c.migrations = migrations;
  if (hooks_.hardware_counters) hooks_.hardware_counters(&c.hardware, &c.hardware_unavailable);
  c.wall_ns = now_mono() - start_mono_;
  writer_->counters(c);
}

bool Profiler::can_choose() const {
  if (experiments_started_) return true;
  if (!first_candidate_ns_) return false;
  return undisturbed_periods_ >= kLeastChoicePeriods || drain_ns_ - first_candidate_ns_ >= kLongestChoiceWaitNs;
}

const Target* Profiler::pick() {
  uint32_t draw = static_cast<uint32_t>(rng_());
  // Only while no undisturbed sample exists yet (a --fixed-speedup run
  // delays in every experiment) do disturbed ones count.
  return recent_.size() ? recent_.pick(draw) : recent_all_.pick(draw);
}

uint64_t Profiler::next_alternation(uint64_t now) {
  // Uniform over [M/2, 3M/2), M = kPeriodsPerTurn mean periods (at least
  // kShortestTurnNs): continuous, so that a turn's length is no multiple of
  // the program's round.
  const uint64_t m = std::max(kPeriodsPerTurn * config_.sample_period_ns, kShortestTurnNs);
  const uint64_t draw = (static_cast<uint64_t>(rng_()) << 32) | rng_();
  return now + m / 2 + draw % m;
}

void Profiler::run_sampling_only() {
  // No experiments, no delays: the conventional profile only. Samples,
  // stacks and the run time are written at the stack flushes.
  // Sampling-only's CPU rings: each CPU's two events take turns at random
  // times (sampler.h), so that no stretch of samples longer than a turn
  // keeps one period's phase against the program's loops.
  uint64_t alternate_at = config_.sampling_only && sampler_cpu_rings_alternate() ? next_alternation(now_mono())
                                                                                 : UINT64_MAX;
  // The wait between looks adapts to how fast the rings fill (next_drain_wait),
  // from 5 ms: the rings hold about 110 records of 2.3 KiB (sampler.cpp), and
  // the profiler thread waits for a CPU like any other on a busy machine.
  while (!stopping()) {
    uint64_t now = now_mono(), since = now - drain_ns_;
    uint64_t wait = since < drain_wait_ ? drain_wait_ - since : 0;
    if (alternate_at != UINT64_MAX) wait = alternate_at > now ? std::min(wait, alternate_at - now) : 0;
    if (wait) wait_slice(wait);
    if (alternate_at != UINT64_MAX && now_mono() >= alternate_at) {
      sampler_alternate_cpu_events();
      period_turns_++;
      alternate_at = next_alternation(now_mono());
      if (now_mono() - drain_ns_ < drain_wait_) continue;  // the drain keeps its pace
    }
    const uint64_t waited = std::max(drain_ns_ ? now_mono() - drain_ns_ : 0, kShortestDrainNs);
    drain();
    drain_wait_ = next_drain_wait(waited, sampler_take_ring_fill_permille());
    uint64_t elapsed = now_mono() - start_mono_;
    if (stacks_due(elapsed)) write_periodic();
    maybe_flush_stacks();
  }
  write_final();
}

void Profiler::run() {
  if (config_.sampling_only || config_.locks_only) return run_sampling_only();
  Shared& s = shared();
  while (!stopping()) {
    Look look = begin_look_between();
    drain();
    const Target* target = fixed_ ? fixed_ : can_choose() ? pick() : nullptr;
    if (!target) {
      wait_slice(kSliceNs);
      end_look_between(look, kSliceNs);
      flush_between();
      continue;
    }
    std::vector<AddrRange> ranges = fixed_ ? fixed_ranges_ : targets_.ranges(target);
    int speedup = config_.fixed_speedup >= 0 ? config_.fixed_speedup : choose_speedup(static_cast<uint32_t>(rng_()));
    publish_scope();  // ranges_of read every in-scope table: the hit test now sees exactly what is attributed
    experiments_started_++;
    end_look_between(look, 0);
    run_one_experiment(target, ranges, speedup);
    if (config_.end_to_end || stopping()) break;
    write_periodic();
    flush_between();
    // Cool off: no line selected, threads still pay what they owe.
    look = begin_look_between();
    wait_slice(kCoolOffNs);
    s.paying.store(false, std::memory_order_release);
    end_look_between(look, kCoolOffNs);
  }
  s.paying.store(false, std::memory_order_release);
  s.selected.store(nullptr, std::memory_order_release);
  write_final();
}

}  // namespace coz
