// SyncPerf's counters (issue 13): joins, counted as an acquisition of the
// joined thread's handle without a hold; and the hold times' sampling
// (point 5), on synthetic event streams with a synthetic clock.
#include <gtest/gtest.h>
#include <pthread.h>
#include <threads.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

#include "locks.h"
#include "sync_hooks.h"
#include "thread_state.h"

using namespace coz;

TEST(Locks, JoinsAreCountedPerThreadHandleWithoutHolds) {
  EXPECT_STREQ(lock_kind_name(LockKind::kJoin), "join");
  ThreadState t;
  int first, second;  // two joined threads' handles
  const uintptr_t site = 0x4001;
  lock_acquired(&t, LockKind::kJoin, &first, site, false, 0);       // the thread had ended
  lock_acquired(&t, LockKind::kJoin, &second, site, true, 7000000);  // it still ran: 7 ms waited
  LockMerger m;
  m.take(3, *t.locks, true);
  auto objects = m.objects();
  ASSERT_EQ(objects.size(), 2u);
  const LockTotals& a = objects[reinterpret_cast<uintptr_t>(&first)];
  const LockTotals& b = objects[reinterpret_cast<uintptr_t>(&second)];
  EXPECT_EQ(a.kind, LockKind::kJoin);
  EXPECT_EQ(a.all.acquisitions, 1u);
  EXPECT_EQ(a.all.contended, 0u);
  EXPECT_EQ(b.all.contended, 1u);
  EXPECT_EQ(b.all.wait_ns, 7000000u);
  EXPECT_EQ(t.locks->nheld, 0u) << "a join holds nothing: no hold time, no slot of the held table";
  EXPECT_EQ(b.sites.count(site - 1), 1u) << "the call site of the join";
  free_lock_table(t.locks);
}

namespace {
int quick_c11(void*) { return 43; }
}  // namespace

TEST(Locks, JoinTriesSayWhetherTheThreadStillRuns) {
  EXPECT_TRUE(join_taken(EBUSY));
  EXPECT_FALSE(join_taken(0));
  EXPECT_TRUE(join_got(0));
  EXPECT_EQ(timed_join_wait(ETIMEDOUT), WaitKind::kSleep);
  EXPECT_EQ(join_wait(0), WaitKind::kSync);
  // thrd_join's try gives C11's codes and the thread's int result.
  thrd_t thr;
  ASSERT_EQ(thrd_create(&thr, quick_c11, nullptr), thrd_success);
  int res = 0, rc;
  while ((rc = c11_tryjoin(thr, &res, pthread_tryjoin_np)) == thrd_busy) thrd_yield();
  EXPECT_EQ(rc, thrd_success);
  EXPECT_EQ(res, 43);
}

// ---- hold-time sampling ----

namespace {

uint64_t g_now = 1;  // the synthetic clock of the streams below (ticks)
uint64_t synthetic_clock() { return g_now; }

// One acquisition of `object` held `hold` ticks (contended: it waited 1 us).
void hold(ThreadState* t, const void* object, uint64_t hold, bool contended = false) {
  lock_acquired(t, LockKind::kMutex, object, 0x5001, contended, contended ? 1000 : 0, synthetic_clock);
  g_now += hold;
  lock_released(t, object, synthetic_clock);
  g_now += 3;
}

LockSiteTotals totals_of(const ThreadState& t, const void* object) {
  LockMerger m;
  m.take(1, *t.locks, true);
  return m.objects()[reinterpret_cast<uintptr_t>(object)].all;
}

}  // namespace

TEST(LockSampling, ContendedAndFirstHoldsAreTimedExactly) {
  ThreadState t;
  int lock;
  uint64_t truth = 0;
  for (uint64_t i = 0; i < kExactHolds; i++) hold(&t, &lock, 100 + i), truth += 100 + i;  // the slot's first
  for (uint64_t i = 0; i < 500; i++) hold(&t, &lock, 7000 + i, true), truth += 7000 + i;  // contended, however many
  LockSiteTotals a = totals_of(t, &lock);
  EXPECT_EQ(a.acquisitions, kExactHolds + 500);
  EXPECT_EQ(a.contended, 500u);
  EXPECT_EQ(a.sampled_holds, 0u);
  EXPECT_EQ(a.hold_ticks, truth) << "no acquisition here is left to the sampler";
  EXPECT_EQ(a.hold_var, 0.0) << "exact: no error to report";
  EXPECT_EQ(a.top_excess_ticks, 0u) << "no sampled hold to weigh";
  EXPECT_EQ(t.locks->nheld, 0u);
  free_lock_table(t.locks);
}

// Each slot keeps what its weightiest sampled hold adds beyond itself,
// (w - 1) ticks: the report takes it off to see a short section through one
// hold timed across a preemption (docs/locks.md section 4). The merge sums
// the slots'. 2,000 holds of 5,000 ticks after 2,000 of 20: one at least is
// timed (all but 2e-14 of the draws), and at weight 64 (below 131,072).
TEST(LockSampling, EachSlotKeepsItsWeightiestSampledHold) {
  ThreadState t;
  int a, b;
  for (int i = 0; i < 2000; i++) hold(&t, &a, 20), hold(&t, &b, 20);
  for (int i = 0; i < 2000; i++) hold(&t, &a, 5000);
  LockMerger m;
  m.take(1, *t.locks, true);
  const auto& objects = m.objects();
  EXPECT_EQ(objects.at(reinterpret_cast<uintptr_t>(&a)).all.top_excess_ticks, (kHoldSampleEvery - 1) * 5000);
  EXPECT_EQ(objects.at(reinterpret_cast<uintptr_t>(&b)).all.top_excess_ticks, (kHoldSampleEvery - 1) * 20);
  free_lock_table(t.locks);
}

// A periodic program: every 64th hold (the sampler's mean interval) is
// 100 times longer. A sampler with a fixed interval of 64 would see either
// all the long holds or none; the geometric countdown times each hold with
// probability p = 1/64 independently, so the estimate (timed holds x 64)
// is unbiased with variance (1 - p) / p * sum(hold^2) (Bernoulli sampling,
// Horvitz-Thompson), and the number timed is binomial(m, p). Each seed's
// estimate must fall within 5 standard deviations (a normal tail of 6e-7
// per seed: ~1,500 holds timed per stream), and the mean over the seeds
// within 5 of the mean's.
TEST(LockSampling, SampledHoldsEstimateTheTotalWithinTheBinomialBound) {
  const uint64_t kStream = 100000, kSeeds = 30;
  const double p = 1.0 / static_cast<double>(kHoldSampleEvery);
  double sum_err = 0, var_sum = 0, var_reported = 0;
  for (uint64_t seed = 1; seed <= kSeeds; seed++) {
    ThreadState t;
    int lock;
    hold(&t, &lock, 1);  // creates the table
    seed_lock_sampler(t.locks, seed * 0x9e3779b97f4a7c15ull);
    uint64_t truth = 1;
    double sum_sq = 0;  // over the holds left to the sampler
    uint64_t sampled_pool = 0;
    for (uint64_t i = 1; i < kStream; i++) {
      uint64_t h = i % kHoldSampleEvery == 0 ? 2000 : 20;
      hold(&t, &lock, h);
      truth += h;
      if (i >= kExactHolds) sum_sq += static_cast<double>(h) * h, sampled_pool++;
    }
    LockSiteTotals a = totals_of(t, &lock);
    EXPECT_EQ(a.acquisitions, kStream) << "acquisitions stay exact";
    const double sd_n = std::sqrt(sampled_pool * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(a.sampled_holds), sampled_pool * p, 5 * sd_n) << "seed " << seed;
    const double var = (1 - p) / p * sum_sq;
    const double err = static_cast<double>(a.hold_ticks) - static_cast<double>(truth);
    EXPECT_LE(std::fabs(err), 5 * std::sqrt(var)) << "seed " << seed << ": estimate " << a.hold_ticks << ", truth "
                                                 << truth;
    sum_err += err;
    var_sum += var;
    var_reported += a.hold_var;
    EXPECT_EQ(t.locks->nheld, 0u);
    free_lock_table(t.locks);
  }
  // The mean error over independent seeds: unbiased, so within 5 sd of 0.
  EXPECT_LE(std::fabs(sum_err / kSeeds), 5 * std::sqrt(var_sum) / kSeeds);
  // The variance each run reports of its own estimate (hold_sd_ns in the
  // profile) estimates the true one without bias. Here it rests mostly on
  // the ~24 long holds a seed times, so about 20% apart per seed: over 30
  // seeds within 20% (about 5 standard deviations of the mean).
  EXPECT_NEAR(var_reported / var_sum, 1.0, 0.2);
}

// A lock taken millions of times (locks_oversync's: tens of millions a
// second): after 131,072 acquisitions its holds are timed less and less
// often (hold_sample_mean), each timed hold standing for the mean in force
// when it was drawn. The number timed falls from N/64 to about 1,024 per
// doubling of the count, and the estimate stays unbiased: over 12 seeds,
// each estimate within 5 of its own reported standard deviations, and the
// mean error within 5 of the mean's. Hold lengths vary (1 to 40 ticks, a
// pattern whose period is not a power of two) so that the variance is not 0.
TEST(LockSampling, AHotLockIsTimedLessOftenAndStaysUnbiased) {
  static_assert(hold_sample_mean(0) == kHoldSampleEvery && hold_sample_mean(131071) == 64 &&
                    hold_sample_mean(131072) == 128 && hold_sample_mean(uint64_t{1} << 40) == kHoldSampleEveryMax &&
                    (kHoldSampleEvery << (kHoldSampleMeans - 1)) == kHoldSampleEveryMax,
                "the means' schedule");
  const uint64_t kStream = 5000000, kSeeds = 12;
  // The expected number timed: each acquisition past the exact ones is
  // timed with probability 1/mean, the mean drawn at the latest timed one
  // (within one countdown of hold_sample_mean of the count).
  double expected_timed = 0;
  for (uint64_t n = kExactHolds + 1; n <= kStream; n++) expected_timed += 1.0 / hold_sample_mean(n);
  double sum_err = 0, sum_var = 0;
  for (uint64_t seed = 1; seed <= kSeeds; seed++) {
    ThreadState t;
    int lock;
    hold(&t, &lock, 1);
    seed_lock_sampler(t.locks, seed * 0x2545f4914f6cdd1dull);
    uint64_t truth = 1;
    for (uint64_t i = 1; i < kStream; i++) {
      uint64_t h = 1 + (i * 7) % 40;
      hold(&t, &lock, h);
      truth += h;
    }
    LockSiteTotals a = totals_of(t, &lock);
    EXPECT_EQ(a.acquisitions, kStream);
    EXPECT_NEAR(static_cast<double>(a.sampled_holds), expected_timed, 5 * std::sqrt(expected_timed) + 64)
        << "seed " << seed;
    EXPECT_LT(a.sampled_holds, kStream / 500) << "timed far less often than one in 64";
    const double err = static_cast<double>(a.hold_ticks) - static_cast<double>(truth);
    EXPECT_GT(a.hold_var, 0.0);
    EXPECT_LE(std::fabs(err), 5 * std::sqrt(a.hold_var)) << "seed " << seed;
    sum_err += err;
    sum_var += a.hold_var;
    free_lock_table(t.locks);
  }
  EXPECT_LE(std::fabs(sum_err / kSeeds), 5 * std::sqrt(sum_var) / kSeeds);
}

// Two locks taken alternately (the inline path's remembered slot changes
// at every call) and nested: the held table stays balanced and each lock's
// estimate stands on its own holds.
TEST(LockSampling, InterleavedAndNestedLocksKeepTheirOwnHolds) {
  ThreadState t;
  int outer, inner;
  hold(&t, &outer, 1);
  seed_lock_sampler(t.locks, 12345);
  uint64_t truth_outer = 1, truth_inner = 0;
  double sq_outer = 0, sq_inner = 0;
  const uint64_t kStream = 60000;
  for (uint64_t i = 1; i < kStream; i++) {
    lock_acquired(&t, LockKind::kMutex, &outer, 0x6001, false, 0, synthetic_clock);
    g_now += 50;
    hold(&t, &inner, 10);  // +13 ticks with the gap after it
    g_now += 50;
    lock_released(&t, &outer, synthetic_clock);
    truth_outer += 113, truth_inner += 10;
    if (i >= kExactHolds) sq_outer += 113.0 * 113, sq_inner += 100;
  }
  EXPECT_EQ(t.locks->nheld, 0u);
  LockMerger m;
  m.take(1, *t.locks, true);
  auto objects = m.objects();
  const double q = (1.0 - 1.0 / kHoldSampleEvery) * kHoldSampleEvery;  // (1 - p) / p
  const LockSiteTotals& o = objects[reinterpret_cast<uintptr_t>(&outer)].all;
  const LockSiteTotals& n = objects[reinterpret_cast<uintptr_t>(&inner)].all;
  EXPECT_EQ(o.acquisitions, kStream);
  EXPECT_EQ(n.acquisitions, kStream - 1);
  EXPECT_LE(std::fabs(static_cast<double>(o.hold_ticks) - truth_outer), 5 * std::sqrt(q * sq_outer));
  EXPECT_LE(std::fabs(static_cast<double>(n.hold_ticks) - truth_inner), 5 * std::sqrt(q * sq_inner));
  free_lock_table(t.locks);
}

// A million distinct locks of one call site: the table keeps its fixed
// size, the objects beyond it are folded per site, and the acquisitions,
// counted one in kAcquisitionSampleEvery once the table overflowed, add up
// to the truth within their standard error; so do the holds.
TEST(LockSampling, AMillionLocksStayBoundedAndCounted) {
  ThreadState t;
  const uintptr_t kLocks = 1000000;
  std::vector<char> locks(kLocks);
  for (uintptr_t i = 0; i < kLocks; i++) {
    hold(&t, &locks[i], 5);
    if (i == 0) seed_lock_sampler(t.locks, 777);  // the same draws in every run
  }
  EXPECT_LE(t.locks->used.load(), LockTable::kSlots);
  EXPECT_TRUE(t.locks->overflowed);
  LockMerger m;
  m.take(1, *t.locks, true);
  double counted = 0, var = 0, held = 0, held_var = 0;
  auto objects = m.objects(), folded = m.folded();
  for (const auto* part : {&objects, &folded})
    for (auto& kv : *part) {
      counted += static_cast<double>(kv.second.all.acquisitions);
      var += kv.second.all.acquisitions_var;
      held += static_cast<double>(kv.second.all.hold_ticks);
      held_var += kv.second.all.hold_var;
    }
  // Sampled: the variance is (k - 1) k per counted one, about (k - 1) per acquisition.
  EXPECT_GT(var, 0.5 * (kAcquisitionSampleEvery - 1) * kLocks);
  EXPECT_LE(std::fabs(counted - kLocks), 5 * std::sqrt(var)) << counted;
  EXPECT_LE(std::fabs(held - 5.0 * kLocks), 5 * std::sqrt(held_var)) << held;
  EXPECT_LE(m.objects().size(), LockTable::kSlots);
  free_lock_table(t.locks);
}

// Until a thread's table overflows, every acquisition is counted: a few
// hundred locks taken in turn (never the same one twice in a row).
TEST(LockSampling, AcquisitionsAreExactUntilTheTableOverflows) {
  ThreadState t;
  std::vector<char> locks(100);
  for (int round = 0; round < 1000; round++)
    for (char& l : locks) hold(&t, &l, 5);
  EXPECT_FALSE(t.locks->overflowed);
  LockMerger m;
  m.take(1, *t.locks, true);
  for (char& l : locks) {
    LockSiteTotals a = m.objects()[reinterpret_cast<uintptr_t>(&l)].all;
    EXPECT_EQ(a.acquisitions, 1000u);
    EXPECT_EQ(a.acquisitions_var, 0.0);
  }
  free_lock_table(t.locks);
}

// Once it overflowed, the estimates are unbiased and within their error:
// eight locks already in the table, taken in turn (never twice in a row)
// 2,000 times each, over 20 seeds of the sampler; their contended
// acquisitions stay exact.
TEST(LockSampling, SampledAcquisitionsEstimateEachLockWithinItsError) {
  const uint64_t kRounds = 2000;
  const int kSeeds = 20;
  int within_2sd = 0;
  double sum_est = 0, sum_var = 0;
  for (int seed = 1; seed <= kSeeds; seed++) {
    ThreadState t;
    std::vector<char> turns(8), filler(4 * LockTable::kSlots);
    for (char& l : turns) hold(&t, &l, 5);  // in the table, counted exactly
    seed_lock_sampler(t.locks, static_cast<uint64_t>(seed) * 0x9e3779b97f4a7c15ull);
    for (char& f : filler) hold(&t, &f, 5);  // overflows it
    ASSERT_TRUE(t.locks->overflowed);
    for (uint64_t r = 0; r < kRounds; r++)
      for (size_t i = 0; i < turns.size(); i++) hold(&t, &turns[i], 5, r % 100 == 0 && i == 0);
    LockMerger m;
    m.take(1, *t.locks, true);
    auto objects = m.objects();
    double est = 0, var = 0;
    for (char& l : turns) {
      auto it = objects.find(reinterpret_cast<uintptr_t>(&l));
      ASSERT_NE(it, objects.end());
      est += static_cast<double>(it->second.all.acquisitions);
      var += it->second.all.acquisitions_var;
    }
    EXPECT_EQ(objects[reinterpret_cast<uintptr_t>(&turns[0])].all.contended, kRounds / 100);
    const double truth = static_cast<double>((kRounds + 1) * turns.size());
    ASSERT_GT(var, 0.0);
    EXPECT_LE(std::fabs(est - truth), 5 * std::sqrt(var)) << "seed " << seed;
    if (std::fabs(est - truth) <= 2 * std::sqrt(var)) within_2sd++;
    sum_est += est;
    sum_var += var;
    free_lock_table(t.locks);
  }
  // About 95% within two standard errors (P(fewer than 15 of 20) < 0.001),
  // and the mean over the seeds within 4 of its standard errors: unbiased.
  EXPECT_GE(within_2sd, 15);
  const double truth = static_cast<double>((kRounds + 1) * 8);
  EXPECT_LE(std::fabs(sum_est / kSeeds - truth), 4 * std::sqrt(sum_var) / kSeeds);
}
