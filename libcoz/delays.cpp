#include "delays.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "clock.h"
#include "sys.h"

namespace coz {

namespace {

std::atomic<PauseFn> g_pause{real_pause};
std::atomic<PauseFn> g_cpu_pause{real_cpu_pause};
std::atomic<HeldPauseFn> g_after_held_pause{nullptr};
std::atomic<ClockFn> g_clock{now_mono};
std::atomic<bool> g_test_clock{false};
// ns per counter tick (32.32) that waits are timed with; 0: the clock.
std::atomic<uint64_t> g_wait_tick_rate{0};

struct WakeStamp {
  std::atomic<uint64_t> seq{0};  // odd while written
  std::atomic<uintptr_t> object{0};
  std::atomic<uint64_t> epoch{0};
  std::atomic<uint64_t> debt{0};  // what the waker owed at the wake
};
constexpr size_t kWakeStamps = 4096;  // a power of two
WakeStamp g_wake_stamps[kWakeStamps];

WakeStamp& stamp_slot(const void* object) {
  uint64_t x = reinterpret_cast<uintptr_t>(object) * 0x9E3779B97F4A7C15ull;
  return g_wake_stamps[x >> 52];  // the top 12 bits
}

// The global count's history: each raise, with its time and experiment.
// An entry is valid while `index` holds the index it was written at (the
// ring wraps: a reader checks it before and after reading the rest).
struct GlobalRaise {
  std::atomic<uint64_t> index{UINT64_MAX};
  std::atomic<uint64_t> time{0};
  std::atomic<uint64_t> value{0};
  std::atomic<uint64_t> epoch{0};
};
constexpr uint64_t kGlobalHistory = 4096;  // a power of two
GlobalRaise g_history[kGlobalHistory];
std::atomic<uint64_t> g_history_next{0};

void note_raise(uint64_t value) {
  uint64_t i = g_history_next.fetch_add(1, std::memory_order_relaxed);
  GlobalRaise& e = g_history[i & (kGlobalHistory - 1)];
  e.index.store(UINT64_MAX, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.time.store(wait_clock(), std::memory_order_relaxed);  // CLOCK_MONOTONIC, as the switch records' times
  e.value.store(value, std::memory_order_relaxed);
  e.epoch.store(shared().epoch.load(std::memory_order_relaxed), std::memory_order_relaxed);
  e.index.store(i, std::memory_order_release);
}

// Entry i of the history, if it is still there and whole.
bool read_raise(uint64_t i, uint64_t* time, uint64_t* value, uint64_t* epoch) {
  const GlobalRaise& e = g_history[i & (kGlobalHistory - 1)];
  if (e.index.load(std::memory_order_acquire) != i) return false;
  *time = e.time.load(std::memory_order_relaxed);
  *value = e.value.load(std::memory_order_relaxed);
  *epoch = e.epoch.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return e.index.load(std::memory_order_relaxed) == i;
}

// The global count of experiment `epoch` at `time_ns`: the value of its
// last raise at or before then, or the experiment's starting count when none
// came before. Entries are in order of (experiment, time), nearly (raises
// race only by their clock reads). False when the history does not reach
// back that far.
bool global_at(uint64_t time_ns, uint64_t epoch, uint64_t start, uint64_t next, uint64_t* out) {
  auto before = [&](uint64_t e, uint64_t t) { return e < epoch || (e == epoch && t <= time_ns); };
  uint64_t lo = next > kGlobalHistory - 64 ? next - (kGlobalHistory - 64) : 0;  // (64: room for writers)
  uint64_t hi = next;
  uint64_t t, v, e;
  *out = start;
  if (lo == hi) return true;
  if (!read_raise(lo, &t, &v, &e)) return false;
  if (!before(e, t)) return lo == 0;  // the raises before time_ns are overwritten, unless there were none
  while (hi - lo > 1) {  // entry lo is before time_ns; the last such one is in [lo, hi)
    uint64_t mid = lo + (hi - lo) / 2;
    if (!read_raise(mid, &t, &v, &e)) return false;
    if (before(e, t)) lo = mid;
    else hi = mid;
  }
  if (!read_raise(lo, &t, &v, &e)) return false;
  if (e == epoch) *out = v;
  return true;
}

// Raises the global delay to at least `value`.
void raise_global(uint64_t value) {
  auto& g = shared().global_delay;
  uint64_t cur = g.load(std::memory_order_relaxed);
  while (cur < value) {
    if (g.compare_exchange_weak(cur, value, std::memory_order_relaxed)) {
      note_raise(value);
      return;
    }
  }
}

}  // namespace

uint64_t real_pause(uint64_t ns) {
  uint64_t start = now_mono();
  timespec req{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  timespec rem;
  // The system call itself: libc's clock_nanosleep is interposed by us.
  while (sys(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &req, &rem) != 0 && errno == EINTR) req = rem;
  return now_mono() - start;
}

void set_pause_fn(PauseFn fn) { g_pause.store(fn ? fn : real_pause); }

uint64_t real_cpu_pause(uint64_t cpu_ns) {
  uint64_t start = now_mono();
  uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  while (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0 < cpu_ns) {
  }
  return now_mono() - start;
}

void set_cpu_pause_fn(PauseFn fn) { g_cpu_pause.store(fn ? fn : real_cpu_pause); }
void set_after_held_pause_fn(HeldPauseFn fn) { g_after_held_pause.store(fn); }

void note_cpu_share(ThreadState* t, uint64_t cpu_ns, uint64_t preempted_ns) {
  t->recent_cpu_ns += cpu_ns - t->recent_cpu_ns / 16;
  t->recent_preempted_ns += preempted_ns - t->recent_preempted_ns / 16;
}

void CrowdWindow::publish() {
  uint64_t total = cpu_ns + preempted_ns;
  if (total < kCrowdWindowNs) return;
  shared().crowded.store(cpu_ns * 1000 < kSleepShareMin * total, std::memory_order_relaxed);
  cpu_ns /= 2;
  preempted_ns /= 2;
}

bool in_cpu_pause(const ThreadState* t, uint64_t time_ns) {
  for (uint32_t i = 0; i < ThreadState::kPauseWindows; i++)
    if (t->pause_from_ns[i] && t->pause_from_ns[i] <= time_ns && time_ns <= t->pause_to_ns[i]) return true;
  return false;
}

uint64_t cpu_share_permille(const ThreadState* t) {
  uint64_t total = t->recent_cpu_ns + t->recent_preempted_ns;
  return total ? t->recent_cpu_ns * 1000 / total : 1000;
}

void sync_epoch(ThreadState* t) {
  uint64_t e = shared().epoch.load(std::memory_order_acquire);
  if (t->epoch != e) {
    t->epoch = e;
    // Level with the experiment's start, not with now: delays inserted
    // before this thread first looked are still owed.
    t->local_delay = shared().epoch_start_global.load(std::memory_order_relaxed);
    t->excess_ns = 0;
    t->wait_debt_ns = 0;
  }
}

void add_hits(ThreadState* t, uint64_t weight_ns) {
  if (!weight_ns || !shared().paying.load(std::memory_order_acquire)) return;
  uint64_t pct = shared().speedup_pct.load(std::memory_order_relaxed);
  if (!pct) return;
  sync_epoch(t);
  t->hit_epoch = t->epoch;
  t->local_delay += weight_ns * pct / 100;
  raise_global(t->local_delay);
}

uint64_t delay_inserted_between(uint64_t from_ns, uint64_t to_ns) {
  if (to_ns <= from_ns) return 0;
  const Shared& sh = shared();
  uint64_t epoch = sh.epoch.load(std::memory_order_acquire);
  uint64_t start = sh.epoch_start_global.load(std::memory_order_relaxed);
  uint64_t next = g_history_next.load(std::memory_order_acquire);
  uint64_t a, b;
  if (!global_at(from_ns, epoch, start, next, &a) || !global_at(to_ns, epoch, start, next, &b)) return 0;
  return b > a ? b - a : 0;
}

void note_preempted(ThreadState* t, uint64_t from_ns, uint64_t to_ns, bool early) {
  if (!shared().paying.load(std::memory_order_acquire) || to_ns <= from_ns || in_cpu_pause(t, from_ns)) return;
  uint64_t e = shared().epoch.load(std::memory_order_acquire);
  if (t->preempt_credit_epoch != e) {
    t->preempt_credit_epoch = e;
    t->preempt_credit_ns = 0;
    t->preempt_credit_early_ns = 0;
  }
  uint64_t d = delay_inserted_between(from_ns, to_ns);
  uint64_t credit = d < to_ns - from_ns ? d : to_ns - from_ns;
  t->preempt_credit_ns += credit;
  if (early) t->preempt_credit_early_ns += credit;
}

namespace {
// Grants a held credit (settle_preempted, settle_preempted_by_wake): only in
// the experiment it was earned in, and at most what the thread owes.
void grant_preempted(ThreadState* t, uint64_t credit) {
  if (!credit || t->preempt_credit_epoch != shared().epoch.load(std::memory_order_acquire)) return;
  sync_epoch(t);
  uint64_t global = shared().global_delay.load(std::memory_order_relaxed);
  if (global <= t->local_delay) return;
  uint64_t owed = global - t->local_delay;
  uint64_t granted = credit < owed ? credit : owed;
  t->local_delay += granted;
  t->preempt_credited_ns.fetch_add(granted, std::memory_order_relaxed);
}
}  // namespace

bool program_fits_one_more() {
  const Shared& sh = shared();
  return sh.unblocked_threads.load(std::memory_order_relaxed) + 1 <= sh.cpus.load(std::memory_order_relaxed);
}

void settle_preempted(ThreadState* t, bool hit) {
  uint64_t credit = t->preempt_credit_ns;
  t->preempt_credit_ns = 0;
  t->preempt_credit_early_ns = 0;
  if (!hit) grant_preempted(t, credit);
}

void settle_preempted_by_wake(ThreadState* t) {
  uint64_t credit = t->preempt_credit_early_ns;
  t->preempt_credit_early_ns = 0;
  t->preempt_credit_ns -= credit;
  grant_preempted(t, credit);
}

void catch_up(ThreadState* t) {
  // A sample signal can interrupt a blocked call: the thread then owes
  // nothing yet; post_block settles what it owes or is credited.
  if (t->blocked || !shared().paying.load(std::memory_order_acquire)) return;
  sync_epoch(t);
  // A thread that has not run the selected unit in this experiment has its
  // preemptions' credit before it pays: its next sample is no hit that would
  // count that time again, and one that pays at every queue operation would
  // otherwise have paid the delay before the sample granted the credit
  // (docs/analysis.md, "A preemption's credit before the debt is paid").
  if (t->hit_epoch != t->epoch && t->preempt_credit_ns) settle_preempted(t, /*hit=*/false);
  uint64_t global = shared().global_delay.load(std::memory_order_relaxed);
  if (global <= t->local_delay) return;
  uint64_t owed = global - t->local_delay;
  if (t->mutexes_held && owed < kDeferInMutexNs) return;  // paid after the release
  // Counted as paid before sleeping, so that nothing re-entering meanwhile
  // can pay the same debt again.
  t->local_delay += owed;
  // Time slept beyond an earlier debt already slowed this thread down.
  uint64_t banked = t->excess_ns < owed ? t->excess_ns : owed;
  t->excess_ns -= banked;
  uint64_t to_sleep = owed - banked;
  // A wait that its waker's unpaid debt would have made longer: the thread
  // would have been blocked, off its CPU, so that part is slept.
  uint64_t as_wait = t->wait_debt_ns < to_sleep ? t->wait_debt_ns : to_sleep;
  t->wait_debt_ns = 0;
  if (!to_sleep) return;
  uint64_t share = cpu_share_permille(t);
  uint64_t slept = 0;
  if (as_wait) {
    slept = g_pause.load(std::memory_order_relaxed)(as_wait);
    to_sleep -= as_wait;
    if (slept > as_wait) {
      uint64_t over = slept - as_wait;  // oversleep: counts against the rest
      uint64_t off = over < to_sleep ? over : to_sleep;
      to_sleep -= off;
      t->excess_ns += over - off;
    }
    t->paused_ns.fetch_add(slept, std::memory_order_relaxed);
    if (!to_sleep) return;
  }
  if (share < kSleepShareMin || shared().crowded.load(std::memory_order_relaxed)) {
    // (In a crowded program a thread of full share holds it too: sleeping,
    // it would hand its CPU to a thread that waits for one.)
    // Holding the CPU for its share of the debt takes about the debt in
    // wall time, when the thread gets its share meanwhile; the rest of the
    // debt is slept if it took less (a sleep: off the CPU, not held), and
    // what it took beyond is banked, as a sleep's oversleep is.
    uint32_t w = t->pause_next++ % ThreadState::kPauseWindows;
    t->pause_to_ns[w] = UINT64_MAX;
    t->pause_from_ns[w] = now_mono();
    uint64_t cpu = to_sleep * share / 1000;
    slept = g_cpu_pause.load(std::memory_order_relaxed)(cpu);
    t->pause_to_ns[w] = now_mono();
    if (HeldPauseFn after = g_after_held_pause.load(std::memory_order_relaxed)) after(t);
    t->held_ns.fetch_add(slept, std::memory_order_relaxed);
    t->held_cpu_ns.fetch_add(cpu, std::memory_order_relaxed);
    if (slept < to_sleep) slept += g_pause.load(std::memory_order_relaxed)(to_sleep - slept);
  } else {
    slept = g_pause.load(std::memory_order_relaxed)(to_sleep);
  }
  if (slept > to_sleep) t->excess_ns += slept - to_sleep;
  t->paused_ns.fetch_add(slept, std::memory_order_relaxed);
}

uint64_t wait_clock() { return g_clock.load(std::memory_order_relaxed)(); }
void set_clock_fn(ClockFn fn) {
  g_test_clock.store(fn != nullptr);
  if (fn) g_wait_tick_rate.store(0);
  g_clock.store(fn ? fn : now_mono);
}

void calibrate_wait_ticks() {
  static TickCalibration calibration;
  static int usable = -1;  // -1: not known yet; 0: no (not the clock source, or strayed); 1: yes
  if (usable < 0) usable = tsc_is_clock_source() ? 1 : 0;
  if (!usable) return;
  uint64_t rate = calibration.measure(10000000);  // 10 ms
  if (!rate) return;
  uint64_t in_use = g_wait_tick_rate.load(std::memory_order_relaxed);
  uint64_t diff = rate > in_use ? rate - in_use : in_use - rate;
  if (in_use && diff > in_use / 1000) {
    usable = 0;
    g_wait_tick_rate.store(0, std::memory_order_relaxed);
    return;
  }
  if (!g_test_clock.load(std::memory_order_relaxed)) g_wait_tick_rate.store(rate, std::memory_order_relaxed);
}

uint64_t wait_elapsed(const ThreadState* t) {
  if (t->wait_tick_rate) {
    uint64_t now = cpu_ticks();
    return now > t->wait_start ? ticks_to_ns(now - t->wait_start, t->wait_tick_rate) : 0;
  }
  uint64_t now = wait_clock();
  return t->wait_start && now > t->wait_start ? now - t->wait_start : 0;
}

void pre_block(ThreadState* t) {
  // A wait inside a wait (a signal handler that sleeps during a read) is
  // part of the outer one: only the outer one is settled.
  if (t->wait_depth++) return;
  // The experiment first, the time after: a wait that saw the experiment
  // began after it (end_wait counts such a wait inside it whole).
  sync_epoch(t);
  t->wait_epoch = t->epoch;
  t->wait_tick_rate = g_wait_tick_rate.load(std::memory_order_relaxed);
  t->wait_start = t->wait_tick_rate ? cpu_ticks() : wait_clock();
  t->pre_block_global = shared().global_delay.load(std::memory_order_relaxed);
  if (!t->blocked) count_unblocked(-1);
  t->blocked = true;
}

bool leave_wait(ThreadState* t) { return t->wait_depth == 0 || --t->wait_depth == 0; }

void post_block(ThreadState* t, bool woken_by_program_thread) {
  if (!leave_wait(t)) return;
  // Hold off the sample handler meanwhile: it would pay from the same counts.
  if (!t->enter()) return;
  credit_wait(t, woken_by_program_thread);
  catch_up(t);
  t->leave();
}

void credit_wait(ThreadState* t, bool woken_by_program_thread) {
  if (t->blocked) count_unblocked(+1);
  t->blocked = false;
  uint64_t before_epoch = t->epoch;
  sync_epoch(t);
  if (woken_by_program_thread) {
    // The waker paid every delay inserted up to the wake before releasing
    // this thread, so what was inserted while it waited is already part of
    // its wait. When an experiment began meanwhile, that is everything the
    // new experiment inserted so far (its debts before the block belonged
    // to the old experiment and are forgiven).
    uint64_t global = shared().global_delay.load(std::memory_order_relaxed);
    uint64_t since = t->epoch == before_epoch ? t->pre_block_global
                                              : shared().epoch_start_global.load(std::memory_order_relaxed);
    if (global > since) {
      uint64_t credit = global - since;
      // A waker that had not paid let it go that much sooner than the
      // virtual program would have: its wait owes that much more.
      uint64_t waker_debt = 0;
      if (t->wake_object && find_wake_stamp(t->wake_object, t->epoch, &waker_debt)) {
        uint64_t longer = waker_debt < credit ? waker_debt : credit;
        credit -= longer;
        t->wait_debt_ns += longer;
      }
      // A wait absorbs at most its own length of delay. Delay that arrives
      // spread over the wait (samples of the line while it runs) never
      // exceeds it; a sped-up wait of the waker's earns its whole length at
      // once, at its end (end_wait), and this thread may have begun waiting
      // only near that end: had it paid before waiting, as it would have
      // in the virtual program, it would have arrived later and waited
      // less, not gained the waker's whole speedup. The rest it owes.
      uint64_t waited = wait_elapsed(t);
      if (credit > waited) credit = waited;
      t->local_delay += credit;
    }
  }
}

void record_wake_stamp(ThreadState* t, const void* object) {
  sync_epoch(t);
  WakeStamp& s = stamp_slot(object);
  uint64_t q = s.seq.load(std::memory_order_relaxed);
  if ((q & 1) || !s.seq.compare_exchange_strong(q, q + 1, std::memory_order_acquire)) return;
  s.object.store(reinterpret_cast<uintptr_t>(object), std::memory_order_relaxed);
  s.epoch.store(t->epoch, std::memory_order_relaxed);
  uint64_t global = shared().global_delay.load(std::memory_order_relaxed);
  s.debt.store(global > t->local_delay ? global - t->local_delay : 0, std::memory_order_relaxed);
  s.seq.store(q + 2, std::memory_order_release);
}

bool find_wake_stamp(const void* object, uint64_t epoch, uint64_t* debt) {
  WakeStamp& s = stamp_slot(object);
  uint64_t q = s.seq.load(std::memory_order_acquire);
  if (q & 1) return false;
  uintptr_t o = s.object.load(std::memory_order_relaxed);
  uint64_t e = s.epoch.load(std::memory_order_relaxed);
  uint64_t d = s.debt.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.seq.load(std::memory_order_relaxed) != q || o != reinterpret_cast<uintptr_t>(object) || e != epoch) return false;
  *debt = d;
  return true;
}

void inherit_delay(ThreadState* child, const ThreadState* parent) {
  child->epoch = parent ? parent->epoch : shared().epoch.load();
  child->local_delay = parent ? parent->local_delay : shared().global_delay.load();
  child->excess_ns = 0;
}

}  // namespace coz
