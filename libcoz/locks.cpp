#include "locks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "clock.h"
#include "runtime.h"
#include "thread_state.h"
#include "waits.h"

namespace coz {

const char* lock_kind_name(LockKind k) {
  switch (k) {
    case LockKind::kMutex: return "mutex";
    case LockKind::kRwlock: return "rwlock";
    case LockKind::kSpinlock: return "spinlock";
    case LockKind::kSemaphore: return "semaphore";
    case LockKind::kCond: return "cond";
    case LockKind::kBarrier: return "barrier";
    case LockKind::kC11Mutex: return "c11-mutex";
    case LockKind::kC11Cond: return "c11-cond";
    case LockKind::kFutex: return "futex";
    case LockKind::kJoin: return "join";
  }
  return "mutex";
}

std::atomic<bool> g_lock_counters{true};

namespace {

inline void bump(std::atomic<uint64_t>& c, uint64_t by = 1) {
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);  // one writer: no locked add
}

}  // namespace

void free_lock_table(LockTable* table) {
  if (!table) return;
  table->~LockTable();
  munmap(table, sizeof(LockTable));
}

namespace {

uint64_t mix(uintptr_t a, uintptr_t b) {
  uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// The sampler's next countdown: 1 + floor(ln(u) / ln(1 - p)) with u uniform
// in (0, 1] is geometric, P(countdown > j) = (1 - p)^j: every acquisition
// is timed with probability p = 1/mean whatever came before (the mean in
// force while it counts down). `log_keep` is ln(1 - p). log() of u > 0
// neither allocates nor sets errno.
uint64_t draw_geometric(LockTable* tab, double log_keep) {
  uint64_t x = tab->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  tab->rng = x;
  double u = static_cast<double>((x >> 11) + 1) * 0x1.0p-53;  // (0, 1]
  return 1 + static_cast<uint64_t>(std::log(u) / log_keep);
}
__attribute__((noinline)) void draw_countdown(LockTable* tab, uint64_t mean) {
  int k = 0;
  while ((kHoldSampleEvery << k) < mean) k++;
  tab->countdown_mean = kHoldSampleEvery << k;
  tab->countdown = draw_geometric(tab, tab->log_keep[k]);
}
// The acquisition sampler's, the same way with p = 1/kAcquisitionSampleEvery.
void draw_acq_countdown(LockTable* tab) { tab->acq_countdown = draw_geometric(tab, tab->log_keep_acq); }

__attribute__((noinline)) LockTable* new_table(ThreadState* t) {
  // The table comes from mmap, never from malloc: the hook may run inside
  // the program's own allocator, holding the lock it just took.
  void* m = mmap(nullptr, sizeof(LockTable), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  t->locks = new (m) LockTable();  // zero pages: touched as slots fill
  seed_lock_sampler(t->locks, cpu_ticks() ^ mix(reinterpret_cast<uintptr_t>(m), 0));
  return t->locks;
}
inline LockTable* table_of(ThreadState* t) { return t->locks ? t->locks : new_table(t); }

// The call site: the caller when the program called the function itself
// (its address is in scope), else the first in-scope frame of the stack.
uintptr_t resolve_site(uintptr_t caller) {
  const RangeSet* scope = shared().scope.load(std::memory_order_acquire);
  if (!caller || (scope && scope->contains(caller - 1))) return caller ? caller - 1 : 0;
  uintptr_t pcs[kMaxFrames];
  bool truncated = false;
  uint32_t n = call_stack(pcs, kMaxFrames, &truncated);
  for (uint32_t i = 0; scope && i < n; i++)
    if (scope->contains(pcs[i])) return pcs[i];
  return caller - 1;
}

// Counts taken for the first time. `object` is published last: the
// profiler thread reads a slot whose object is set.
LockCounts* claim(LockCounts* c, LockKind kind, uintptr_t caller, uintptr_t object) {
  c->kind = kind;
  c->caller = caller;
  c->site.store(resolve_site(caller), std::memory_order_relaxed);
  c->object.store(object, std::memory_order_release);
  return c;
}
// A free slot, or a call site's folded entry, taken (out of line: the
// lookup is inlined into the acquisition's slow path).
__attribute__((noinline)) LockCounts* new_slot(LockTable* tab, uint32_t i, uint8_t tag, LockKind kind,
                                               uintptr_t object, uintptr_t caller) {
  tab->tags[i] = tag;
  tab->used.fetch_add(1, std::memory_order_relaxed);
  return claim(&tab->slots[i], kind, caller, object);
}
__attribute__((noinline)) LockCounts* new_folded(LockCounts* f, LockKind kind, uintptr_t caller) {
  return claim(f, kind, caller, 1);  // a folded entry's object: 1, then the count of objects seen
}

inline LockCounts* find_counts(LockTable* tab, LockKind kind, uintptr_t object, uintptr_t caller) {
  // A bucket of kWays slots, with a byte of tag per slot (SwissTable's way):
  // 0 for a free slot, else 0x80 and 7 bits of the hash. The 8 tags are
  // compared at once in a 64-bit word; only slots whose tag matches are read.
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  uint64_t h = mix(object, caller);
  uint32_t b = static_cast<uint32_t>(h % (LockTable::kSlots / LockTable::kWays)) * LockTable::kWays;
  uint8_t tag = static_cast<uint8_t>(0x80 | (h >> 57));
  uint64_t word;
  std::memcpy(&word, tab->tags + b, sizeof word);
  uint64_t x = word ^ (kOnes * tag);
  for (uint64_t match = (x - kOnes) & ~x & kHighs; match; match &= match - 1) {  // (may flag extra bytes)
    LockCounts& c = tab->slots[b + __builtin_ctzll(match) / 8];
    if (c.object.load(std::memory_order_relaxed) == object && c.caller == caller) return &c;
  }
  if (uint64_t free = ~word & kHighs)  // slots fill in order and are never freed
    return new_slot(tab, b + __builtin_ctzll(free) / 8, tag, kind, object, caller);
  // Full around here: counted per call site only (a million locks of one
  // site stay a few entries), and the acquisition sampler starts.
  tab->overflowed = true;
  LockCounts& f = tab->folded[mix(caller, 0) % LockTable::kFolded];
  if (f.caller == caller || f.object.load(std::memory_order_relaxed)) return &f;  // (a collision: with that site)
  return new_folded(&f, kind, caller);
}

// The slot of (object, caller), remembered as the latest one.
inline LockCounts* counts_for(LockTable* tab, LockKind kind, uintptr_t object, uintptr_t caller) {
  LockCounts* c = find_counts(tab, kind, object, caller);
  tab->last_object = object;
  tab->last_caller = caller;
  tab->last = c;
  return c;
}

// Initialization sites: insert-only open addressing over object addresses.
constexpr size_t kInitSlots = 1u << 16;
std::atomic<uintptr_t> g_init_object[kInitSlots];
std::atomic<uintptr_t> g_init_site[kInitSlots];

}  // namespace

namespace {
// A hold begins (`acquisitions`: the slot's count, this one included):
// timed when contended or among the slot's first, else when the sampler
// says so.
// An acquisition the acquisition sampler counted (`weight` > 1) has its
// hold timed too, standing for as many.
inline void begin_hold(LockTable* tab, LockCounts* c, uintptr_t object, uint64_t acquisitions, bool contended,
                       LockClock clock, uint64_t weight = 1) {
  if (weight == 1 && !contended && acquisitions > kExactHolds) {
    if (--tab->countdown != 0) return;
    weight = tab->countdown_mean;
    draw_countdown(tab, hold_sample_mean(acquisitions));
  }
  if (tab->nheld < LockTable::kHeld) tab->held[tab->nheld++] = {object, clock(), c, weight};
}

inline uint64_t count_acquisition(LockCounts* c) {
  uint64_t n = c->acquisitions.load(std::memory_order_relaxed) + 1;
  c->acquisitions.store(n, std::memory_order_relaxed);  // one writer: no locked add
  return n;
}
}  // namespace

void seed_lock_sampler(LockTable* table, uint64_t seed) {
  table->rng = seed ? seed : 0x2545f4914f6cdd1dull;  // xorshift's one forbidden state
  for (int k = 0; k < kHoldSampleMeans; k++)
    table->log_keep[k] = std::log1p(-1.0 / static_cast<double>(kHoldSampleEvery << k));
  table->log_keep_acq = std::log1p(-1.0 / static_cast<double>(kAcquisitionSampleEvery));
  draw_countdown(table, kHoldSampleEvery);
  draw_acq_countdown(table);
}

void lock_acquired_slow(ThreadState* t, LockKind kind, const void* object, uintptr_t caller, bool contended,
                        uint64_t waited_ns, LockClock clock, bool sampled) {
  LockTable* tab = table_of(t);
  if (!tab) return;
  LockCounts* c = counts_for(tab, kind, reinterpret_cast<uintptr_t>(object), caller);
  if (sampled) {
    draw_acq_countdown(tab);
    bump(c->sampled_acquisitions);
    if (lock_kind_holds(kind))
      begin_hold(tab, c, reinterpret_cast<uintptr_t>(object), 0, false, clock, kAcquisitionSampleEvery);
    return;
  }
  uint64_t n = count_acquisition(c);
  if (contended) {
    bump(c->contended);
    bump(c->wait_ns, waited_ns);
  }
  // Hold times for the objects one holds: locks, not waits for others' work.
  if (!lock_kind_holds(kind)) return;
  begin_hold(tab, c, reinterpret_cast<uintptr_t>(object), n, contended, clock);
}

void lock_released_slow(LockTable* tab, const void* object, LockClock clock) {
  for (uint32_t i = tab->nheld; i-- > 0;) {
    if (tab->held[i].object != reinterpret_cast<uintptr_t>(object)) continue;
    uint64_t now = clock();
    const LockTable::Held& h = tab->held[i];
    uint64_t ticks = now > h.since ? now - h.since : 0;
    if (h.weight > 1) {
      bump(h.counts->weighted_hold_ticks, h.weight * ticks);
      bump(h.counts->sampled_holds);
      // Its share of the variance (Bernoulli sampling with p = 1/w,
      // Horvitz-Thompson): (1 - p) / p^2 times its square, (w - 1) w t^2.
      const double w = static_cast<double>(h.weight), t2 = static_cast<double>(ticks) * static_cast<double>(ticks);
      std::atomic<double>& var = h.counts->hold_var;  // (one writer, as bump)
      var.store(var.load(std::memory_order_relaxed) + (w - 1) * w * t2, std::memory_order_relaxed);
      const uint64_t excess = (h.weight - 1) * ticks;
      if (excess > h.counts->top_excess_ticks.load(std::memory_order_relaxed))
        h.counts->top_excess_ticks.store(excess, std::memory_order_relaxed);
    } else {
      bump(h.counts->hold_ticks, ticks);
    }
    tab->held[i] = tab->held[--tab->nheld];
    return;
  }
}

void lock_tried(ThreadState* t, LockKind kind, const void* object, uintptr_t caller, bool failed, LockClock clock) {
  LockTable* tab = table_of(t);
  if (!tab) return;
  LockCounts* c = counts_for(tab, kind, reinterpret_cast<uintptr_t>(object), caller);
  bump(c->trylocks);
  if (failed) {
    bump(c->trylock_failures);
    return;
  }
  begin_hold(tab, c, reinterpret_cast<uintptr_t>(object), count_acquisition(c), false, clock);
}

void lock_initialized(const void* object, uintptr_t caller) {
  uintptr_t o = reinterpret_cast<uintptr_t>(object);
  if (!o) return;
  uintptr_t site = resolve_site(caller);
  for (size_t i = 0, h = mix(o, 0) % kInitSlots; i < 64; i++, h = (h + 1) % kInitSlots) {
    uintptr_t cur = g_init_object[h].load(std::memory_order_relaxed);
    if (cur == 0 && !g_init_object[h].compare_exchange_strong(cur, o)) continue;
    if (cur == 0 || cur == o) {
      g_init_site[h].store(site, std::memory_order_release);  // re-initialized: the latest site
      return;
    }
  }
}

uintptr_t lock_init_site(uintptr_t object) {
  for (size_t i = 0, h = mix(object, 0) % kInitSlots; i < 64; i++, h = (h + 1) % kInitSlots) {
    uintptr_t cur = g_init_object[h].load(std::memory_order_relaxed);
    if (cur == 0) return 0;
    if (cur == object) return g_init_site[h].load(std::memory_order_acquire);
  }
  return 0;
}

void LockSiteTotals::add(const LockCounts& c) {
  // Each sampled acquisition was counted with probability p = 1/k: scaled
  // by k, the count estimates the passed-over ones' without bias
  // (Horvitz-Thompson); its variance, (1 - p) / p^2 per counted one.
  constexpr double k = static_cast<double>(kAcquisitionSampleEvery);
  const uint64_t sampled_acq = c.sampled_acquisitions.load(std::memory_order_relaxed);
  acquisitions += c.acquisitions.load(std::memory_order_relaxed) + kAcquisitionSampleEvery * sampled_acq;
  acquisitions_var += (k - 1) * k * static_cast<double>(sampled_acq);
  contended += c.contended.load(std::memory_order_relaxed);
  wait_ns += c.wait_ns.load(std::memory_order_relaxed);
  // Each sampled hold was timed with probability 1/w (w: the hold sampler's
  // mean when it was timed, or kAcquisitionSampleEvery for the acquisition
  // sampler's): scaled by w,
  // the sum estimates the untimed ones' without bias; hold_var sums their
  // shares of its variance.
  hold_ticks += c.hold_ticks.load(std::memory_order_relaxed) + c.weighted_hold_ticks.load(std::memory_order_relaxed);
  sampled_holds += c.sampled_holds.load(std::memory_order_relaxed);
  hold_var += c.hold_var.load(std::memory_order_relaxed);
  top_excess_ticks += c.top_excess_ticks.load(std::memory_order_relaxed);
  trylocks += c.trylocks.load(std::memory_order_relaxed);
  trylock_failures += c.trylock_failures.load(std::memory_order_relaxed);
}

void LockSiteTotals::add(const LockSiteTotals& s) {
  acquisitions += s.acquisitions;
  acquisitions_var += s.acquisitions_var;  // (independent samplings: variances add)
  contended += s.contended;
  wait_ns += s.wait_ns;
  hold_ticks += s.hold_ticks;
  sampled_holds += s.sampled_holds;
  hold_var += s.hold_var;  // (independent samplings: variances add)
  top_excess_ticks += s.top_excess_ticks;
  trylocks += s.trylocks;
  trylock_failures += s.trylock_failures;
}

namespace {
void add_site(LockTotals* into, uintptr_t site, const LockSiteTotals& s) {
  into->sites[site].add(s);
  into->all.add(s);
}

void merge_into(std::unordered_map<uintptr_t, LockTotals>* out, uintptr_t key, const LockTotals& t) {
  auto it = out->find(key);
  if (it == out->end()) {
    out->emplace(key, t);
    return;
  }
  LockTotals& m = it->second;
  for (auto& s : t.sites) add_site(&m, s.first, s.second);
  for (pid_t tid : t.threads)
    if (std::find(m.threads.begin(), m.threads.end(), tid) == m.threads.end()) m.threads.push_back(tid);
  if (!m.first_site) m.first_site = t.first_site;
}
}  // namespace

LockMerger::Snapshot LockMerger::snapshot(const LockTable& table) const {
  Snapshot s;
  auto one = [&](const LockCounts& c, std::vector<std::pair<uintptr_t, LockTotals>>* into, bool folded) {
    uintptr_t o = c.object.load(std::memory_order_acquire);
    if (!o) return;
    LockTotals t;
    t.kind = c.kind;
    uintptr_t site = c.site.load(std::memory_order_relaxed);
    t.first_site = site;
    LockSiteTotals st;
    st.add(c);
    add_site(&t, site, st);
    into->emplace_back(folded ? site : o, std::move(t));
  };
  for (const LockCounts& c : table.slots) one(c, &s.objects, false);
  for (const LockCounts& c : table.folded) one(c, &s.folded, true);
  return s;
}

void LockMerger::take(pid_t tid, const LockTable& table, bool final) {
  Snapshot s = snapshot(table);
  for (auto& kv : s.objects) kv.second.threads.push_back(tid);
  for (auto& kv : s.folded) kv.second.threads.push_back(tid);
  if (!final) {
    live_[tid] = std::move(s);
    return;
  }
  live_.erase(tid);
  for (auto& kv : s.objects) merge_into(&ended_objects_, kv.first, kv.second);
  for (auto& kv : s.folded) merge_into(&ended_folded_, kv.first, kv.second);
}

std::unordered_map<uintptr_t, LockTotals> LockMerger::objects() const {
  std::unordered_map<uintptr_t, LockTotals> out = ended_objects_;
  for (auto& live : live_)
    for (auto& kv : live.second.objects) merge_into(&out, kv.first, kv.second);
  for (auto& kv : out) kv.second.init_site = lock_init_site(kv.first);
  return out;
}

std::unordered_map<uintptr_t, LockTotals> LockMerger::folded() const {
  std::unordered_map<uintptr_t, LockTotals> out = ended_folded_;
  for (auto& live : live_)
    for (auto& kv : live.second.folded) merge_into(&out, kv.first, kv.second);
  return out;
}

void LockMerger::calibrate() {
  if (uint64_t rate = calibration_.measure(300000)) ns_per_tick_ = static_cast<double>(rate) / 4294967296.0;
}

}  // namespace coz
