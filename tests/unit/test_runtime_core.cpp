// Unit tests of the runtime's pure parts: option table, delay accounting,
// experiment scheduling helpers, progress deltas and the profile writer.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <gtest/gtest.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "config.h"
#include "clock.h"
#include "counters.h"
#include "delays.h"
#include "environment.h"
#include "experiment.h"
#include "locks.h"
#include "profile_writer.h"
#include "sampler.h"

#include <linux/perf_event.h>
#include "sync_hooks.h"
#include "progress.h"
#include "thread_state.h"
#include "waits.h"
#include "warnings.h"

using namespace coz;

// ---- config ----

namespace {
EnvLookup env_of(const std::map<std::string, std::string>& m) {
  return [m](const char* name) -> const char* {
    auto it = m.find(name);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST(Environment, PreloadWithoutTheRuntimeKeepsTheOthersAsWritten) {
  auto is_self = [](const std::string& e) { return e == "/x/libcoz.so"; };
  std::string self;
  EXPECT_EQ(coz::preload_without("/x/libcoz.so", is_self, &self), "");
  EXPECT_EQ(self, "/x/libcoz.so");
  EXPECT_EQ(coz::preload_without("/x/libcoz.so:/j/libjemalloc.so", is_self, &self), "/j/libjemalloc.so");
  EXPECT_EQ(coz::preload_without("/a.so /x/libcoz.so  /b.so", is_self, &self), "/a.so /b.so");
  EXPECT_EQ(coz::preload_without("/a.so:/x/libcoz.so", is_self, &self), "/a.so");
  EXPECT_EQ(coz::preload_without("/a.so:/b.so", is_self, &self), "/a.so:/b.so");
  EXPECT_EQ(self, "");
}

TEST(Environment, AnExecOfTheProfiledProcessGetsTheVariablesBack) {
  const std::vector<const char*> names = {"COZ_OUTPUT", "COZ_LAUNCHER_PID"};
  const std::vector<std::string> saved = {"COZ_OUTPUT=/p.coz", "COZ_LAUNCHER_PID=7"};
  const char* plain[] = {"PATH=/bin", "COZ_OUTPUT=stale", "KNOB=1", nullptr};
  EXPECT_EQ(coz::exec_environment(plain, saved, "/x/libcoz.so", names),
            (std::vector<std::string>{"PATH=/bin", "KNOB=1", "COZ_OUTPUT=/p.coz", "COZ_LAUNCHER_PID=7",
                                      "LD_PRELOAD=/x/libcoz.so"}));
  const char* preloading[] = {"LD_PRELOAD=/j.so", "COZ_KNOB=own", nullptr};
  EXPECT_EQ(coz::exec_environment(preloading, saved, "/x/libcoz.so", names),
            (std::vector<std::string>{"COZ_KNOB=own", "COZ_OUTPUT=/p.coz", "COZ_LAUNCHER_PID=7",
                                      "LD_PRELOAD=/x/libcoz.so:/j.so"}));
  const char* empty[] = {nullptr};
  EXPECT_EQ(coz::exec_environment(empty, {}, "", names), std::vector<std::string>{});
  EXPECT_EQ(coz::exec_environment(preloading, {}, "", names),
            (std::vector<std::string>{"COZ_KNOB=own", "LD_PRELOAD=/j.so"}));
}

TEST(ThreadName, KeepsFifteenBytesAndTellsWhenNeverSet) {
  coz::ThreadName n;
  char out[16];
  EXPECT_FALSE(n.get(out));
  n.set("worker");
  ASSERT_TRUE(n.get(out));
  EXPECT_STREQ(out, "worker");
  n.set("a-name-longer-than-the-kernels");  // cut as PR_SET_NAME cuts it
  ASSERT_TRUE(n.get(out));
  EXPECT_STREQ(out, "a-name-longer-t");
  n.set("");
  ASSERT_TRUE(n.get(out));
  EXPECT_STREQ(out, "");
}

TEST(ThreadName, AReaderNeverSeesHalfOfTwoNames) {
  // A writer renames as fast as it can, between two names that differ in
  // both of the words a name is stored in; a reader on another CPU sees one
  // whole name or the other. (Without the sequence check, every run of 5
  // saw thousands of mixes.)
  coz::ThreadName n;
  n.set("aaaaaaaaaaaaaaa");
  std::atomic<bool> stop{false};
  std::thread w([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      n.set("bbbbbbbbbbbbbbb");
      n.set("aaaaaaaaaaaaaaa");
    }
  });
  int whole = 0, mixed = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    char out[16];
    if (!n.get(out)) continue;
    if (strcmp(out, "aaaaaaaaaaaaaaa") == 0 || strcmp(out, "bbbbbbbbbbbbbbb") == 0) whole++;
    else mixed++;
  }
  stop.store(true);
  w.join();
  EXPECT_GT(whole, 0);
  EXPECT_EQ(mixed, 0);
}

TEST(Config, SamplingOnlySamplesAtPprofsRateUnlessTold) {
  Config c;
  std::string err;
  ASSERT_TRUE(parse_config(env_of({{"COZ_SAMPLING_ONLY", "1"}}), &c, &err)) << err;
  EXPECT_EQ(c.sample_period_ns, kSamplingOnlyPeriodNs);
  EXPECT_EQ(kSamplingOnlyPeriodNs, 10000000u);
  ASSERT_TRUE(parse_config(env_of({{"COZ_SAMPLING_ONLY", "1"}, {"COZ_SAMPLE_PERIOD", "1000000"}}), &c, &err)) << err;
  EXPECT_EQ(c.sample_period_ns, 1000000u) << "a period given is kept";
  ASSERT_TRUE(parse_config(env_of({{"COZ_LOCKS_ONLY", "1"}}), &c, &err)) << err;
  EXPECT_EQ(c.sample_period_ns, 1000000u) << "locks-only does not sample";
}

TEST(Config, DefaultsMatchUpstream) {
  Config c;
  std::string err;
  ASSERT_TRUE(parse_config(env_of({}), &c, &err));
  EXPECT_EQ(c.output, "profile.coz");
  EXPECT_EQ(c.binary_scope, std::vector<std::string>{"MAIN"});
  EXPECT_EQ(c.source_scope, std::vector<std::string>{"%"});
  EXPECT_EQ(c.sample_period_ns, 1000000u);
  EXPECT_EQ(c.experiment_length_ns, 500000000u);
  EXPECT_EQ(c.fixed_speedup, -1);
  EXPECT_FALSE(c.end_to_end);
  EXPECT_TRUE(c.lock_counters);
}

TEST(Config, ReadsEveryVariable) {
  Config c;
  std::string err;
  ASSERT_TRUE(parse_config(env_of({{"COZ_OUTPUT", "/tmp/x.coz"},
                                   {"COZ_FORMAT", "legacy"},
                                   {"COZ_BINARY_SCOPE", "MAIN\t%libfoo%"},
                                   {"COZ_SOURCE_SCOPE", "%/src/%"},
                                   {"COZ_PROGRESS_POINTS", "a.c:12\tb.c:7"},
                                   {"COZ_FIXED_LINE", "app.c:33"},
                                   {"COZ_FIXED_SPEEDUP", "35"},
                                   {"COZ_END_TO_END", "1"},
                                   {"COZ_SAMPLE_PERIOD", "2000000"},
                                   {"COZ_EXPERIMENT_LENGTH", "250000000"},
                                   {"COZ_VERBOSE", "1"},
                                   {"COZ_FOLLOW_CHILDREN", "1"},
                                   {"COZ_LOCK_COUNTERS", "0"},
                                   {"COZ_LAUNCHER_PID", "4321"}}),
                           &c, &err))
      << err;
  EXPECT_EQ(c.output, "/tmp/x.coz");
  EXPECT_EQ(c.format, "legacy");
  EXPECT_EQ(c.binary_scope, (std::vector<std::string>{"MAIN", "%libfoo%"}));
  EXPECT_EQ(c.source_scope, std::vector<std::string>{"%/src/%"});
  EXPECT_EQ(c.progress_points, (std::vector<std::string>{"a.c:12", "b.c:7"}));
  EXPECT_EQ(c.fixed_line, "app.c:33");
  EXPECT_EQ(c.fixed_speedup, 35);
  EXPECT_TRUE(c.end_to_end);
  EXPECT_EQ(c.sample_period_ns, 2000000u);
  EXPECT_EQ(c.experiment_length_ns, 250000000u);
  EXPECT_EQ(c.verbose, 1);
  EXPECT_TRUE(c.follow_children);
  EXPECT_EQ(c.launcher_pid, 4321);
  EXPECT_FALSE(c.lock_counters);
}

TEST(Config, UnitsAndFixedUnits) {
  Config c;
  std::string err;
  ASSERT_TRUE(parse_config(env_of({{"COZ_UNITS", "callsite,line"}}), &c, &err)) << err;
  EXPECT_EQ(c.units, (std::vector<std::string>{"callsite", "line"}));
  // A fixed unit is among the units (its samples are counted).
  ASSERT_TRUE(parse_config(env_of({{"COZ_FIXED_FUNCTION", "ns::parse"}}), &c, &err)) << err;
  EXPECT_EQ(c.fixed_function, "ns::parse");
  EXPECT_EQ(c.units, (std::vector<std::string>{"line", "function"}));
  // One fixed unit at most; the legacy format names lines only.
  EXPECT_FALSE(parse_config(env_of({{"COZ_FIXED_LINE", "a.c:1"}, {"COZ_FIXED_CALLSITE", "a.c:2"}}), &c, &err));
  EXPECT_NE(err.find("cannot go together"), std::string::npos) << err;
  EXPECT_FALSE(parse_config(env_of({{"COZ_FORMAT", "legacy"}, {"COZ_UNITS", "line,callsite"}}), &c, &err));
  EXPECT_NE(err.find("legacy"), std::string::npos) << err;
}

TEST(Config, RejectsBadValuesNamingTheVariable) {
  const std::map<std::string, std::string> bad[] = {
      {{"COZ_FIXED_SPEEDUP", "101"}}, {{"COZ_FIXED_SPEEDUP", "-5"}}, {{"COZ_FIXED_SPEEDUP", "ten"}},
      {{"COZ_SAMPLE_PERIOD", "5"}},   {{"COZ_FORMAT", "xml"}},        {{"COZ_FIXED_LINE", "app.c"}},
      {{"COZ_FIXED_LINE", "app.c:x"}}, {{"COZ_PROGRESS_POINTS", "a.c:1\tnoline"}}, {{"COZ_END_TO_END", "maybe"}},
      {{"COZ_BINARY_SCOPE", ""}},     {{"COZ_UNITS", "line,lines"}},  {{"COZ_UNITS", "line,line"}},
      {{"COZ_UNITS", ""}},            {{"COZ_FIXED_CALLSITE", "app.c"}}, {{"COZ_LOCK_COUNTERS", "maybe"}},
      {{"COZ_BLOCKED_SCOPE", "ilsq"}},
  };
  for (const auto& m : bad) {
    Config c;
    std::string err;
    EXPECT_FALSE(parse_config(env_of(m), &c, &err)) << m.begin()->first << "=" << m.begin()->second;
    EXPECT_NE(err.find(m.begin()->first), std::string::npos) << err;
  }
}

TEST(Config, BlockedScopeTakesBAndItsEarlierSpellingY) {
  for (const char* letters : {"ilsb", "ilsy", ""}) {
    Config c;
    std::string err;
    EXPECT_TRUE(parse_config(env_of({{"COZ_BLOCKED_SCOPE", letters}}), &c, &err)) << letters << ": " << err;
    EXPECT_EQ(c.blocked_scope, letters);
  }
}

TEST(Config, OutputNameExpandsPid) {
  EXPECT_EQ(expand_output_name("p-%p.coz", 77), "p-77.coz");
  EXPECT_EQ(expand_output_name("plain.coz", 77), "plain.coz");
  EXPECT_EQ(expand_output_name("%p/%p", 5), "5/5");
}

TEST(Config, SplitTabsDropsEmptyFields) {
  EXPECT_EQ(split_tabs("a\t\tb\t"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(split_tabs("").empty());
}

// ---- delays ----

namespace {
// Samples of 1 ms of CPU time each: at 50%, each earns 0.5 ms of delay.
constexpr uint64_t ms(uint64_t n) { return n * 1000000; }
uint64_t g_slept_total = 0;
uint64_t g_oversleep = 0;
uint64_t fake_pause(uint64_t ns) {
  g_slept_total += ns + g_oversleep;
  return ns + g_oversleep;
}
uint64_t g_cpu_paused_total = 0;  // CPU time held by real_cpu_pause's stand-in
uint64_t g_cpu_pause_factor = 3;  // its wall time over its CPU time: whatever the scheduler's turns made it
uint64_t fake_cpu_pause(uint64_t cpu_ns) {
  g_cpu_paused_total += cpu_ns;
  return g_cpu_pause_factor * cpu_ns + 12345;
}
// The clock of waits: a wait lasts what the test advances it by.
uint64_t g_fake_now = 0;
uint64_t fake_clock() { return g_fake_now; }

class Delays : public ::testing::Test {
 protected:
  void SetUp() override {
    set_pause_fn(fake_pause);
    set_cpu_pause_fn(fake_cpu_pause);
    g_slept_total = 0;
    g_cpu_paused_total = 0;
    g_cpu_pause_factor = 3;
    g_oversleep = 0;
    Shared& s = shared();
    s.global_delay.store(1000);  // any starting point: only differences matter
    s.epoch_start_global.store(1000);
    s.epoch.fetch_add(1);
    s.speedup_pct.store(50);
    s.paying.store(true);
    s.delays.store(true);
    s.crowded.store(false);
    s.unblocked_threads.store(2);  // two threads running on two CPUs
    s.cpus.store(2);
    set_clock_fn(fake_clock);
    g_fake_now = 5000000000ull;
  }
  void TearDown() override {
    set_clock_fn(nullptr);
    shared().paying.store(false);
    shared().crowded.store(false);
    set_pause_fn(nullptr);
    set_cpu_pause_fn(nullptr);
  }
};
}  // namespace

TEST_F(Delays, HitsRaiseLocalAndGlobalWithoutPausing) {
  ThreadState a;
  add_hits(&a, ms(3));
  EXPECT_EQ(shared().global_delay.load(), 1000u + 1500000u);
  catch_up(&a);
  EXPECT_EQ(g_slept_total, 0u) << "the thread that ran the line owes nothing";
}

// Line choice skips the samples taken while the others were paused, and
// only those: until the unit runs, a sped-up experiment pauses nobody (a
// run whose first experiments sped up a line that never ran again kept
// their samples out of line choice, and drew 4 of its 16 lines from its
// first few samples).
TEST_F(Delays, SamplesAreDisturbedOnceTheExperimentHasDelayed) {
  ThreadState a;
  EXPECT_FALSE(experiment_delaying()) << "no hit yet";
  add_hits(&a, ms(2));
  EXPECT_TRUE(experiment_delaying());
  shared().speedup_pct.store(0);
  EXPECT_FALSE(experiment_delaying()) << "a speedup of 0 delays nobody";
  shared().speedup_pct.store(50);
  shared().paying.store(false);
  EXPECT_FALSE(experiment_delaying()) << "between experiments";
}

TEST_F(Delays, OtherThreadsPayTheDifferenceOnce) {
  ThreadState a, b;
  sync_epoch(&b);
  add_hits(&a, ms(2));  // global +1 ms
  catch_up(&b);
  EXPECT_EQ(g_slept_total, 1000000u);
  catch_up(&b);
  EXPECT_EQ(g_slept_total, 1000000u) << "a debt is paid once";
}

TEST_F(Delays, GlobalIsTheLargestLocalNotTheSum) {
  ThreadState a, b, c;
  sync_epoch(&c);
  add_hits(&a, ms(2));
  add_hits(&b, ms(2));  // both ran the line at the same time
  EXPECT_EQ(shared().global_delay.load(), 1000u + 1000000u);
  catch_up(&c);
  EXPECT_EQ(g_slept_total, 1000000u);
}

TEST_F(Delays, OversleepIsBankedAgainstTheNextDebt) {
  ThreadState a, b;
  sync_epoch(&b);
  g_oversleep = 300000;
  add_hits(&a, ms(2));  // owes 1 ms, sleeps 1.3 ms
  catch_up(&b);
  EXPECT_EQ(g_slept_total, 1300000u);
  g_oversleep = 0;
  add_hits(&a, ms(1));  // owes 0.5 ms more, 0.3 ms already slept
  catch_up(&b);
  EXPECT_EQ(g_slept_total, 1300000u + 200000u);
}

// A thread that gets 40% of a CPU while runnable pays a 1 ms debt by holding
// its CPU for 0.4 ms of CPU time (about 1 ms of wall time when it gets its
// share meanwhile); the wall time it took beyond the debt is banked.
TEST_F(Delays, AThreadSharingItsCpuPaysWithItsShareOfCpuTime) {
  ThreadState a, b;
  sync_epoch(&b);
  for (int i = 0; i < 40; i++) note_cpu_share(&b, ms(2), ms(3));
  EXPECT_NEAR(static_cast<double>(cpu_share_permille(&b)), 400.0, 2.0);
  const uint64_t share = cpu_share_permille(&b);
  add_hits(&a, ms(2));  // global +1 ms
  catch_up(&b);
  EXPECT_EQ(g_slept_total, 0u);
  EXPECT_EQ(g_cpu_paused_total, ms(1) * share / 1000);
  const uint64_t took = 3 * g_cpu_paused_total + 12345;  // fake_cpu_pause's wall time
  EXPECT_EQ(b.paused_ns.load(), took) << "its wall time is what it paused";
  EXPECT_EQ(b.excess_ns, took - ms(1)) << "beyond the debt: banked";
  catch_up(&b);
  EXPECT_EQ(g_cpu_paused_total, ms(1) * share / 1000) << "a debt is paid once";
}

// The samples taken while a pause held the CPU are the runtime's: the pause
// under way and the last ones are known by their times.
TEST_F(Delays, APauseThatHeldTheCpuIsKnownByItsTimes) {
  ThreadState a, b;
  sync_epoch(&b);
  for (int i = 0; i < 40; i++) note_cpu_share(&b, ms(1), ms(1));
  const uint64_t before = now_mono();
  EXPECT_FALSE(in_cpu_pause(&b, before));
  add_hits(&a, ms(2));
  catch_up(&b);
  const uint64_t after = now_mono();
  EXPECT_GT(g_cpu_paused_total, 0u);
  EXPECT_FALSE(in_cpu_pause(&b, before - 1));
  EXPECT_FALSE(in_cpu_pause(&b, after + 1));
  EXPECT_TRUE(in_cpu_pause(&b, b.pause_from_ns[0]));
  EXPECT_TRUE(in_cpu_pause(&b, b.pause_to_ns[0]));
  EXPECT_LE(before, b.pause_from_ns[0]);
  EXPECT_LE(b.pause_to_ns[0], after);
  EXPECT_EQ(b.held_cpu_ns.load(), g_cpu_paused_total);
  EXPECT_EQ(b.held_ns.load(), b.paused_ns.load());
}

// When the scheduler gave the thread more than its share, holding its share
// of CPU time took less wall time than the debt: it sleeps the rest (a sleep,
// not a held pause), so that a pause never sets it back less than its debt.
TEST_F(Delays, APauseThatHeldTheCpuBrieflySleepsTheRestOfItsDebt) {
  ThreadState a, b;
  sync_epoch(&b);
  for (int i = 0; i < 40; i++) note_cpu_share(&b, ms(1), ms(1));
  g_cpu_pause_factor = 1;  // it ran its whole share without being preempted
  add_hits(&a, ms(2));     // global +1 ms
  catch_up(&b);
  const uint64_t held = g_cpu_paused_total + 12345;
  EXPECT_LT(held, ms(1));
  EXPECT_EQ(g_slept_total, ms(1) - held);
  EXPECT_EQ(b.held_ns.load(), held);
  EXPECT_EQ(b.paused_ns.load(), ms(1)) << "the debt is the pause's least wall time";
  EXPECT_EQ(b.excess_ns, 0u);
}

// The real pause holds the CPU for the CPU time asked.
TEST(CpuPause, HoldsTheCpuForTheCpuTimeAsked) {
  const uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  const uint64_t t0 = now_mono();
  const uint64_t took = real_cpu_pause(200000);  // 0.2 ms of CPU
  const uint64_t wall = now_mono() - t0;
  const uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  EXPECT_GE(cpu, 200000u);
  EXPECT_GE(took, 200000u) << "no less wall time than the CPU time it held";
  EXPECT_LE(took, wall);
}

// A thread that is rarely preempted (or has no sample yet) sleeps its debt.
TEST_F(Delays, AThreadWithItsOwnCpuSleeps) {
  ThreadState a, b, c;
  sync_epoch(&b);
  sync_epoch(&c);
  EXPECT_EQ(cpu_share_permille(&c), 1000u);
  for (int i = 0; i < 40; i++) note_cpu_share(&b, ms(19), ms(1));
  EXPECT_NEAR(static_cast<double>(cpu_share_permille(&b)), 950.0, 2.0);
  add_hits(&a, ms(2));
  catch_up(&b);
  catch_up(&c);
  EXPECT_EQ(g_slept_total, 2000000u);
  EXPECT_EQ(g_cpu_paused_total, 0u);
}

// In a program whose threads wait for a CPU, even a thread that is itself
// rarely preempted (a pipeline's last stage: blocked on its queue, run at
// once when woken) holds its CPU: a sleep would hand it to a thread waiting
// for one.
TEST_F(Delays, InACrowdedProgramEveryThreadHoldsItsCpu) {
  ThreadState a, b;
  sync_epoch(&b);
  EXPECT_EQ(cpu_share_permille(&b), 1000u);
  shared().crowded.store(true);
  add_hits(&a, ms(2));  // global +1 ms
  catch_up(&b);
  EXPECT_EQ(g_cpu_paused_total, ms(1)) << "its whole share of the debt, all of it";
  EXPECT_EQ(g_slept_total, 0u);
  EXPECT_EQ(b.held_cpu_ns.load(), ms(1));
}

// The program's share of the CPUs: its threads' CPU time against the time
// they waited for one, published once the window holds 20 ms, then halved.
TEST(CrowdWindow, PublishesWhetherTheProgramsThreadsWaitedForACpu) {
  shared().crowded.store(false);
  CrowdWindow w;
  w.add(ms(15), ms(2));
  w.publish();
  EXPECT_FALSE(shared().crowded.load());
  EXPECT_EQ(w.cpu_ns, ms(15)) << "too little to tell: kept whole";
  w.add(0, ms(5));  // preempted by a thread it had just woken
  w.publish();      // 15 of 22 ms: 68%
  EXPECT_TRUE(shared().crowded.load());
  EXPECT_EQ(w.cpu_ns, ms(15) / 2);
  EXPECT_EQ(w.preempted_ns, ms(7) / 2);
  w.add(ms(100), 0);  // 107.5 of 111 ms: 97%
  w.publish();
  EXPECT_FALSE(shared().crowded.load());
  shared().crowded.store(false);
}

// The share follows the thread's recent samples: older ones fade.
TEST_F(Delays, TheShareFollowsRecentSamples) {
  ThreadState t;
  for (int i = 0; i < 200; i++) note_cpu_share(&t, ms(1), 0);
  for (int i = 0; i < 200; i++) note_cpu_share(&t, ms(1), ms(1));
  EXPECT_NEAR(static_cast<double>(cpu_share_permille(&t)), 500.0, 5.0);
  for (int i = 0; i < 200; i++) note_cpu_share(&t, ms(1), 0);
  EXPECT_NEAR(static_cast<double>(cpu_share_permille(&t)), 1000.0, 5.0);
}

TEST_F(Delays, WokenThreadIsCreditedWithDelaysInsertedWhileBlocked) {
  ThreadState waker, sleeper;
  sync_epoch(&sleeper);
  sync_epoch(&waker);
  pre_block(&sleeper);
  add_hits(&waker, ms(4));  // 2 ms inserted while the sleeper waits
  g_fake_now += ms(4);
  catch_up(&waker);     // the waker pays before waking (nothing: it earned it)
  post_block(&sleeper, true);
  EXPECT_EQ(g_slept_total, 0u) << "the waker's delay already held the sleeper back";
}

// A sped-up wait earns its whole length at its end: a thread that began
// waiting for its waker only near that end (a join reached 1 ms before a
// sped-up 8 ms sleep ends) would have arrived later in the virtual program,
// after paying, and waited less. Its wait absorbs at most its length; it
// owes the rest.
TEST_F(Delays, AWokenThreadIsCreditedWithAtMostItsWaitsLength) {
  ThreadState waker, joiner;
  sync_epoch(&joiner);
  sync_epoch(&waker);
  pre_block(&joiner);
  g_fake_now += ms(1);
  add_hits(&waker, ms(8));  // the waker's 8 ms sleep, sped up by 50%, ends: 4 ms at once
  post_block(&joiner, true);
  EXPECT_EQ(g_slept_total, ms(3)) << "4 ms inserted, 1 ms of it absorbed by the wait";
  EXPECT_EQ(joiner.local_delay, shared().global_delay.load());
}

// A thread that sat preempted while the line ran elsewhere is credited as
// a blocked thread its waker released is: with the delay inserted meanwhile,
// at most the time it sat preempted. The switch records give the interval
// after the fact; the global count's history, what was inserted in it.
TEST_F(Delays, AThreadPreemptedWhileTheLineRanIsCreditedWithTheDelayInsertedMeanwhile) {
  ThreadState runner, waiting;
  sync_epoch(&waiting);
  sync_epoch(&runner);
  add_hits(&runner, ms(2));  // 1 ms before the preemption: owed
  g_fake_now += ms(1);
  const uint64_t from = g_fake_now;
  g_fake_now += ms(2);
  add_hits(&runner, ms(4));  // 2 ms while `waiting` sat preempted
  g_fake_now += ms(2);
  const uint64_t to = g_fake_now;
  g_fake_now += ms(1);
  add_hits(&runner, ms(6));  // 3 ms after it got its CPU back: owed
  EXPECT_EQ(delay_inserted_between(from, to), ms(2));
  note_preempted(&waiting, from, to);
  settle_preempted(&waiting, false);  // its next sample is not the line's
  catch_up(&waiting);
  EXPECT_EQ(g_slept_total, ms(4)) << "6 ms inserted, 2 ms of them while it waited for a CPU";
  EXPECT_EQ(waiting.preempt_credited_ns.load(), ms(2)) << "counted for its thread record";
}

// `waiting` sits preempted for `length` while `runner` earns `hits` (a
// sample at the end), then takes its next sample (one of the line's, or
// not) and pays.
static void preempted_while_the_line_ran(ThreadState* runner, ThreadState* waiting, uint64_t length,
                                         uint64_t hits, bool own_hit) {
  const uint64_t from = g_fake_now;
  g_fake_now += length;
  add_hits(runner, hits);
  note_preempted(waiting, from, g_fake_now);
  settle_preempted(waiting, own_hit);
  catch_up(waiting);
}

TEST_F(Delays, APreemptionIsCreditedAtMostItsLength) {
  ThreadState runner, waiting;
  sync_epoch(&waiting);
  // A sample standing for 8 ms of the line (and the time its thread sat preempted).
  preempted_while_the_line_ran(&runner, &waiting, ms(1), ms(8), false);
  EXPECT_EQ(g_slept_total, ms(3)) << "4 ms inserted, 1 ms of them absorbed by the preemption";
}

// The thread's own sample of the line counts the time it sat preempted
// before it (the hit's weight): credited as well, that time would count twice.
TEST_F(Delays, APreemptionInTheSelectedLineIsNotCreditedAgain) {
  ThreadState runner, waiting;
  sync_epoch(&waiting);
  preempted_while_the_line_ran(&runner, &waiting, ms(2), ms(2), true);
  EXPECT_EQ(g_slept_total, ms(1));
  EXPECT_EQ(waiting.preempt_credit_ns, 0u) << "nor held for a later sample";
}

// A thread woken by another's release often preempts its waker at once,
// and ends its sped-up wait (inserting its delay) while the waker sits
// preempted. When the program's threads fitted its CPUs at that wake, the
// waker's next look, before any sample of its own, credits that time before
// it pays; any other preemption's credit still waits for the sample.
TEST_F(Delays, AWakesLookSettlesOnlyTheEarlyPreemptionCredit) {
  ThreadState runner, early, late;
  sync_epoch(&early);
  sync_epoch(&late);
  add_hits(&early, ms(2));  // both ran the line earlier in this experiment: their next
  add_hits(&late, ms(2));   // sample could be a hit that counts the preemption itself
  add_hits(&runner, ms(2));
  const uint64_t from = g_fake_now;
  g_fake_now += ms(2);
  add_hits(&runner, ms(4));  // 2 ms inserted while both sat preempted
  note_preempted(&early, from, g_fake_now, /*early=*/true);
  note_preempted(&late, from, g_fake_now, /*early=*/false);
  process_samples(&early, nullptr);  // no ring: the look settles and pays
  EXPECT_EQ(g_slept_total, 0u);
  EXPECT_EQ(early.preempt_credited_ns.load(), ms(2));
  EXPECT_EQ(early.preempt_credit_ns, 0u) << "not granted again at its sample";
  process_samples(&late, nullptr);
  EXPECT_EQ(g_slept_total, ms(2)) << "paid: the credit waits for its next sample";
  EXPECT_EQ(late.preempt_credited_ns.load(), 0u);
  EXPECT_EQ(late.preempt_credit_ns, ms(2)) << "held for its next sample";
}

// A thread that has not run the line in this experiment (a pipeline stage
// beside the one that runs it) has its preemption's credit before it pays,
// at its next payment: its next sample is no hit that would count the time
// again, and a thread that pays at every queue operation had paid the delay
// by the time its sample granted the credit (over_pipeline's pace-setting
// stage: 0.02 s credited of about 0.5 s preempted). One that has run it
// still waits for its sample.
TEST_F(Delays, AThreadThatHasNotRunTheLineHasItsPreemptionCreditBeforeItPays) {
  ThreadState runner, beside, runs_too;
  sync_epoch(&beside);
  sync_epoch(&runs_too);
  add_hits(&runs_too, ms(2));
  add_hits(&runner, ms(2));  // level with runs_too
  const uint64_t from = g_fake_now;
  g_fake_now += ms(2);
  add_hits(&runner, ms(4));  // 2 ms inserted while both sat preempted
  note_preempted(&beside, from, g_fake_now);
  note_preempted(&runs_too, from, g_fake_now);
  catch_up(&beside);
  EXPECT_EQ(g_slept_total, ms(1)) << "3 ms inserted in all, 2 ms of them credited";
  EXPECT_EQ(beside.preempt_credited_ns.load(), ms(2));
  EXPECT_EQ(beside.preempt_credit_ns, 0u) << "not granted again at its sample";
  catch_up(&runs_too);
  EXPECT_EQ(g_slept_total, ms(1) + ms(2)) << "its credit waits for its next sample";
  EXPECT_EQ(runs_too.preempt_credit_ns, ms(2));
}

// Early only when the program's unblocked threads and the one a wake may
// release fit its CPUs: in a program whose threads outnumber the cores
// another of them would have taken the CPU the waker waited for.
TEST_F(Delays, AWakeFitsWhenTheProgramsUnblockedThreadsAndOneMoreFitItsCpus) {
  shared().unblocked_threads.store(1);
  EXPECT_TRUE(program_fits_one_more());
  shared().unblocked_threads.store(2);
  EXPECT_FALSE(program_fits_one_more());
  shared().cpus.store(4);
  EXPECT_TRUE(program_fits_one_more());
}

TEST_F(Delays, BlockingAndWakingCountTheProgramsUnblockedThreads) {
  ThreadState t;
  sync_epoch(&t);
  pre_block(&t);
  EXPECT_EQ(shared().unblocked_threads.load(), 1);
  pre_block(&t);  // a wait inside the wait: one block
  EXPECT_EQ(shared().unblocked_threads.load(), 1);
  post_block(&t, false);
  EXPECT_EQ(shared().unblocked_threads.load(), 1);
  post_block(&t, false);
  EXPECT_EQ(shared().unblocked_threads.load(), 2);
}

TEST_F(Delays, APreemptionCreditStaysInItsExperiment) {
  ThreadState runner, waiting;
  sync_epoch(&waiting);
  Shared& s = shared();
  add_hits(&runner, ms(2));  // the old experiment's: forgiven by the next
  const uint64_t from = g_fake_now;
  g_fake_now += ms(2);
  s.epoch_start_global.store(s.global_delay.load());
  s.epoch.fetch_add(1);  // a new experiment begins while it sits preempted
  add_hits(&runner, ms(2));  // 1 ms in the new one
  g_fake_now += ms(1);
  const uint64_t to = g_fake_now;
  EXPECT_EQ(delay_inserted_between(from, to), ms(1)) << "what the new experiment inserted";
  note_preempted(&waiting, from, to);
  s.epoch_start_global.store(s.global_delay.load());
  s.epoch.fetch_add(1);  // and another before its next sample
  add_hits(&runner, ms(2));
  settle_preempted(&waiting, false);
  catch_up(&waiting);
  EXPECT_EQ(g_slept_total, ms(1)) << "the credit of the experiment before is not this one's";
}

TEST_F(Delays, PayingIsDeferredWhileBlockedSoNothingIsPaidAndCreditedTwice) {
  ThreadState waker, sleeper;
  sync_epoch(&sleeper);
  sync_epoch(&waker);
  pre_block(&sleeper);
  add_hits(&waker, ms(2));
  catch_up(&sleeper);  // a sample signal interrupts the blocked call
  EXPECT_EQ(g_slept_total, 0u);
  add_hits(&waker, ms(2));
  g_fake_now += ms(4);
  post_block(&sleeper, true);  // released by the waker: credited with all 2 ms
  EXPECT_EQ(g_slept_total, 0u);
  EXPECT_EQ(sleeper.local_delay, shared().global_delay.load()) << "level with global, not ahead of it";
}

TEST_F(Delays, WokenWaitSpanningAnExperimentStartIsCreditedForTheNewExperiment) {
  // An idle pool worker or a pthread_join blocked before the experiment
  // began: its waker paid the new experiment's delays before releasing it.
  ThreadState waker, sleeper;
  sync_epoch(&sleeper);
  pre_block(&sleeper);
  Shared& s = shared();
  s.epoch_start_global.store(s.global_delay.load());
  s.epoch.fetch_add(1);  // a new experiment begins while the sleeper waits
  add_hits(&waker, ms(4));   // 2 ms inserted in it
  g_fake_now += ms(4);
  catch_up(&waker);
  post_block(&sleeper, true);
  EXPECT_EQ(g_slept_total, 0u) << "the waker's delay already held the sleeper back";
  EXPECT_EQ(sleeper.local_delay, s.global_delay.load());
}

TEST_F(Delays, SelfBlockedWaitSpanningAnExperimentStartPaysOnlyTheNewExperiment) {
  ThreadState other, sleeper;
  sync_epoch(&sleeper);
  add_hits(&other, ms(6));  // 3 ms owed in the old experiment, forgiven by the next
  pre_block(&sleeper);
  Shared& s = shared();
  s.epoch_start_global.store(s.global_delay.load());
  s.epoch.fetch_add(1);
  add_hits(&other, ms(2));  // 1 ms inserted in the new one
  post_block(&sleeper, false);
  EXPECT_EQ(g_slept_total, 1000000u);
}

TEST_F(Delays, SelfBlockedThreadPaysAfterWaking) {
  ThreadState other, sleeper;
  sync_epoch(&sleeper);
  pre_block(&sleeper);
  add_hits(&other, ms(4));
  post_block(&sleeper, false);
  EXPECT_EQ(g_slept_total, 2000000u);
}

TEST_F(Delays, ThreadThatJoinsLateStillOwesTheExperimentsDelays) {
  ThreadState a, late;
  add_hits(&a, ms(2));  // before `late` ever looks at the experiment
  catch_up(&late);
  EXPECT_EQ(g_slept_total, 1000000u);
}

TEST_F(Delays, NewExperimentForgivesOldDebts) {
  ThreadState a, b;
  sync_epoch(&b);
  add_hits(&a, ms(4));
  shared().epoch_start_global.store(shared().global_delay.load());
  shared().epoch.fetch_add(1);
  catch_up(&b);
  EXPECT_EQ(g_slept_total, 0u);
}

TEST_F(Delays, NothingIsEarnedOrPaidOutsideExperiments) {
  ThreadState a, b;
  sync_epoch(&b);
  shared().paying.store(false);
  uint64_t before = shared().global_delay.load();
  add_hits(&a, ms(10));
  catch_up(&b);
  EXPECT_EQ(shared().global_delay.load(), before);
  EXPECT_EQ(g_slept_total, 0u);
}

TEST_F(Delays, NewThreadStartsLevelWithItsCreator) {
  ThreadState parent, child, other;
  sync_epoch(&parent);
  add_hits(&other, ms(2));  // parent now owes 1 ms
  inherit_delay(&child, &parent);
  catch_up(&child);
  EXPECT_EQ(g_slept_total, 1000000u) << "the child inherits its creator's debt, not a clean slate";
}

namespace {
ThreadState* g_reentrant = nullptr;
uint64_t reentrant_pause(uint64_t ns) {
  // A sample signal arriving during the sleep pays from the same counts.
  if (ThreadState* t = g_reentrant) {
    g_reentrant = nullptr;
    catch_up(t);
  }
  g_slept_total += ns;
  return ns;
}
}  // namespace

TEST_F(Delays, DebtIsPaidOnceEvenWhenPayingReentersDuringTheSleep) {
  ThreadState a, b;
  sync_epoch(&b);
  add_hits(&a, ms(2));
  set_pause_fn(reentrant_pause);
  g_reentrant = &b;
  catch_up(&b);
  EXPECT_EQ(g_slept_total, 1000000u);
}

TEST_F(Delays, PostBlockLeavesCountsAloneWhileTheSampleHandlerRuns) {
  ThreadState a, b;
  sync_epoch(&b);
  add_hits(&a, ms(2));
  b.busy.store(1);  // the handler is mid-way through this thread's samples
  post_block(&b, false);
  EXPECT_EQ(g_slept_total, 0u);
  b.busy.store(0);
  post_block(&b, false);
  EXPECT_EQ(g_slept_total, 1000000u);
}

TEST(RealPause, SleepsAtLeastWhatIsAsked) {
  uint64_t slept = real_pause(2000000);
  EXPECT_GE(slept, 2000000u);
  EXPECT_LT(slept, 500000000u);
}

// ---- experiment helpers ----

TEST(Experiment, SpeedupIsZeroHalfTheTimeElseStepsOfFive) {
  std::map<int, int> seen;
  for (uint32_t d = 0; d < 4000; d++) seen[choose_speedup(d * 2654435761u)]++;
  EXPECT_NEAR(seen[0], 2000, 1);
  for (auto& kv : seen) {
    EXPECT_EQ(kv.first % 5, 0);
    EXPECT_GE(kv.first, 0);
    EXPECT_LE(kv.first, 100);
  }
  EXPECT_EQ(seen.size(), 21u) << "every step from 0 to 100 is reachable";
  for (int s = 5; s <= 100; s += 5) EXPECT_NEAR(seen[s], 100, 40) << s;
}

TEST(ShortThreads, SuggestedPeriodIsARoundOneOfAtMostAQuarterOfTheirTime) {
  EXPECT_EQ(short_thread_period(40000000), 5000000u) << "5 ms is the longest offered";
  EXPECT_EQ(short_thread_period(6500000), 1000000u) << "two_threads' 5-8 ms threads";
  EXPECT_EQ(short_thread_period(3000000), 500000u) << "short_tasks' 3 ms threads";
  EXPECT_EQ(short_thread_period(800000), 200000u) << "exactly a quarter is taken";
  EXPECT_EQ(short_thread_period(799999), 100000u);
  // Under 400 us, periods below 100 us, down to the 10 us the runtime takes,
  // so the suggestion is always shorter than the period that missed them.
  EXPECT_EQ(short_thread_period(300000), 50000u);
  EXPECT_EQ(short_thread_period(40000), 10000u);
  EXPECT_EQ(short_thread_period(39999), 0u) << "none: the warning names no period";
  EXPECT_EQ(short_thread_period(0), 0u);
}

TEST(Experiment, LengthFollowsTheVisitsOfTheRarestPoint) {
  const uint64_t init = 500000000;
  EXPECT_EQ(adapt_length(init, init, 2, true), 2 * init);
  EXPECT_EQ(adapt_length(init, init, 8, true), init) << "within the band: unchanged";
  EXPECT_EQ(adapt_length(init, init, kHalveVisits, true), init);
  // Frequent progress shortens experiments below the initial length, down to kShortestNs:
  // more experiments per minute (issue 15), each still with more than kHalveVisits / 2 visits.
  EXPECT_EQ(adapt_length(init, init, kHalveVisits + 1, true), init / 2);
  EXPECT_EQ(adapt_length(125000000, init, 10000, true), kShortestNs) << "not below kShortestNs";
  EXPECT_EQ(adapt_length(kShortestNs, init, 10000, true), kShortestNs);
  EXPECT_EQ(adapt_length(20000000, 20000000, 10000, true), 20000000u) << "nor below a shorter initial length";
  // After a dip doubled it, a length with twice the visits comes back: the band
  // is narrower than a doubling's x2 plus the noise of a few visits.
  EXPECT_EQ(adapt_length(2 * init, init, 2 * 8, true), init);
  EXPECT_EQ(adapt_length(64 * init, init, 0, true), 64 * init) << "bounded";
  EXPECT_EQ(adapt_length(init, init, 0, false), init) << "no progress point: nothing to adapt to";
}

TEST(Experiment, SamplingOnlyLooksAsRarelyAsTheRingsAllow) {
  const uint64_t ms = 1000000;
  // Rings that stay nearly empty: the wait doubles from look to look, up to kLongestDrainNs.
  EXPECT_EQ(next_drain_wait(kShortestDrainNs, 0), 2 * kShortestDrainNs);
  EXPECT_EQ(next_drain_wait(kShortestDrainNs, 5), 2 * kShortestDrainNs) << "at most doubled";
  EXPECT_EQ(next_drain_wait(40 * ms, 10), kLongestDrainNs);
  EXPECT_EQ(next_drain_wait(kLongestDrainNs, 1), kLongestDrainNs);
  // A ring an eighth full keeps the wait; fuller, the wait shrinks at once to
  // keep it an eighth full at the rate it filled.
  EXPECT_EQ(next_drain_wait(20 * ms, kDrainFillPermille), 20 * ms);
  EXPECT_EQ(next_drain_wait(40 * ms, 4 * kDrainFillPermille), 10 * ms);
  EXPECT_EQ(next_drain_wait(20 * ms, 1000), kShortestDrainNs) << "never below kShortestDrainNs";
  // A look that came late (the profiler thread waited for a CPU) measured its
  // fill over the longer wait.
  EXPECT_EQ(next_drain_wait(100 * ms, 250), kLongestDrainNs);
}

TEST(Experiment, LengthAdaptsOnLivePointsOnly) {
  std::map<std::string, uint64_t> seen;
  bool any = false;
  PointDelta often{"often", false, 300, 0, 0, 0}, never{"never", false, 0, 0, 0, 0};
  EXPECT_EQ(least_visits({often, never}, 1, &seen, &any), 300u) << "a point never reached is not waited for";
  EXPECT_TRUE(any);
  PointDelta rare{"rare", false, 2, 0, 0, 0};
  EXPECT_EQ(least_visits({often, rare}, 2, &seen, &any), 2u);
  rare.delta = 0;
  EXPECT_EQ(least_visits({often, rare}, 3, &seen, &any), 0u) << "a rare point that missed one experiment still counts";
  uint64_t e = 3 + kLiveExperiments;
  EXPECT_EQ(least_visits({often, rare}, e, &seen, &any), 300u) << "a point of a phase that is over stops counting";
  PointDelta lat{"req", true, 0, 0, 0, 0};
  std::map<std::string, uint64_t> none;
  EXPECT_EQ(least_visits({lat}, 1, &none, &any), 0u) << "nothing visited yet: experiments grow";
  EXPECT_EQ(least_visits({}, 1, &none, &any), 0u);
  EXPECT_FALSE(any) << "no point registered";
}

TEST(Experiment, WindowsAlignOnTheRarestVisitedThroughputPoint) {
  PointDelta often{"often", false, 3000, 0, 0, 0}, rare{"rare", false, 10, 0, 0, 0};
  AlignPoint a = align_point({often, rare}, 100000000);
  EXPECT_EQ(a.name, "rare");
  EXPECT_EQ(a.period_ns, 10000000u) << "wall time per visit";
  // Visits closer than kAlignPeriodNs: counting loses less than polling would.
  EXPECT_EQ(align_point({often, PointDelta{"busy", false, 101, 0, 0, 0}}, 100000000).period_ns, 0u);
  EXPECT_EQ(align_point({PointDelta{"busy", false, 100, 0, 0, 0}}, 100000000).period_ns, kAlignPeriodNs)
      << "one visit per kAlignPeriodNs is rare enough";
  // Latency pairs, and points the experiment did not see, are not waited for.
  EXPECT_EQ(align_point({PointDelta{"req", true, 0, 4, 4, 0}}, 100000000).period_ns, 0u);
  PointDelta missed{"rare", false, 0, 0, 0, 0};
  EXPECT_EQ(align_point({often, missed}, 100000000).period_ns, 0u) << "often: 33 us apart";
  EXPECT_EQ(align_point({}, 100000000).period_ns, 0u);
}

TEST(Experiment, RecentLinesPickInProportionToSamples) {
  Line a{"/a.c", 1}, b{"/b.c", 2};
  RecentLines r;
  EXPECT_EQ(r.pick(3), nullptr);
  const uint64_t t0 = 1000000000;
  for (int i = 0; i < 6; i++) r.add(&a, 1, t0);
  r.add(&b, 2, t0);  // one blocked sample of two periods
  int na = 0;
  for (uint32_t d = 0; d < 8; d++) na += r.pick(d * 536870912u) == &a;
  EXPECT_EQ(na, 6);
  EXPECT_DOUBLE_EQ(r.share(&a), 0.75);
  // The past fades: ten half-lives later, two periods of b outweigh a.
  r.add(&b, 2, t0 + 10 * RecentLines::kHalfLifeNs);
  EXPECT_GT(r.share(&b), 0.99);
  // Weights are rescaled after many half-lives without changing the shares,
  // and the forgotten targets are dropped.
  r.add(&a, 2, t0 + 40 * RecentLines::kHalfLifeNs);
  r.add(&b, 2, t0 + 40 * RecentLines::kHalfLifeNs);
  EXPECT_NEAR(r.share(&a), 0.5, 1e-9);
  r.add(&b, 1, t0 + 100 * RecentLines::kHalfLifeNs);
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(r.pick(12345), &b);
}

TEST(Experiment, ALongWaitIsChosenForItsTimeNotCappedLikeOneSample) {
  // Thread A computes without pause; thread B waits 1 s, computes 1 ms,
  // again and again: B's wait is half of the threads' time, and a blocked
  // sample of 1000 periods comes in at each wait's end. Averaged over a
  // round, the wait must be chosen about as often as A's line (the ring of
  // 512 samples with its cap of 64 per blocked sample gave it 0.06 in this
  // very sequence; the decayed weights give it 0.48).
  Line a{"/a.c", 1}, w{"/b.c", 2}, bc{"/b.c", 3};
  RecentLines r;
  const uint64_t ms = 1000000;
  double sum = 0;
  int looks = 0;
  for (uint64_t t = 1; t <= 20000; t++) {  // 20 s in 1 ms periods
    r.add(&a, 1, t * ms);
    if (t % 1001 == 0) {
      r.add(&w, 1000, t * ms);
      r.add(&bc, 1, t * ms);
    }
    if (t > 5000 && t % 7 == 0) {  // an experiment starts now and then
      sum += r.share(&w);
      looks++;
    }
  }
  EXPECT_GT(sum / looks, 0.35);
  EXPECT_LT(sum / looks, 0.6);
}

TEST(Experiment, RangeSetMergesAndSearches) {
  const RangeSet* s = make_range_set({{30, 40}, {10, 20}, {15, 25}, {50, 50}});
  ASSERT_EQ(s->count, 2u);
  EXPECT_TRUE(s->contains(10));
  EXPECT_TRUE(s->contains(24));
  EXPECT_FALSE(s->contains(25));
  EXPECT_TRUE(s->contains(39));
  EXPECT_FALSE(s->contains(40));
  EXPECT_FALSE(s->contains(50));
  EXPECT_FALSE(s->contains(0));
}

// ---- progress ----

TEST(Progress, CountersAreStablePerNameAndType) {
  ProgressRegistry reg;
  coz_counter_layout* a = reg.counter(kCounterThroughput, "unit.a");
  EXPECT_EQ(a, reg.counter(kCounterThroughput, "unit.a"));
  EXPECT_NE(a, reg.counter(kCounterBegin, "unit.a"));
  EXPECT_EQ(reg.counter(99, "x"), nullptr);
}

TEST(Progress, DeltasForThroughputAndLatency) {
  ProgressRegistry reg;
  coz_counter_layout* t = reg.counter(kCounterThroughput, "tp");
  coz_counter_layout* b = reg.counter(kCounterBegin, "req");
  coz_counter_layout* e = reg.counter(kCounterEnd, "req");
  t->count = 10;
  b->count = 5;
  e->count = 3;
  ProgressTotals before = reg.totals();
  t->count = 17;
  b->count = 12;
  e->count = 9;
  std::vector<PointDelta> d = ProgressRegistry::deltas(before, reg.totals());
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "tp");
  EXPECT_FALSE(d[0].latency);
  EXPECT_EQ(d[0].delta, 7u);
  EXPECT_EQ(d[1].name, "req");
  EXPECT_TRUE(d[1].latency);
  EXPECT_EQ(d[1].arrivals, 7u);
  EXPECT_EQ(d[1].departures, 6u);
  EXPECT_EQ(d[1].difference, 3);
}

TEST(Progress, PointFirstSeenDuringAnExperimentCountsFromZero) {
  ProgressRegistry reg;
  ProgressTotals before = reg.totals();
  reg.counter(kCounterThroughput, "late")->count = 4;
  std::vector<PointDelta> d = ProgressRegistry::deltas(before, reg.totals());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].delta, 4u);
}

// ---- writer ----

TEST(Writer, JsonRecordsAreOneLineEachWithEscapedStrings) {
  ProfileWriter w;
  ExperimentRecord r;
  r.selected = "/src/we\"ird\\path.c:12";
  r.speedup_percent = 35;
  r.duration_ns = 900;
  r.wall_ns = 1000;
  r.delay_ns = 100;
  r.selected_samples = 7;
  r.selected_ns = 7200000;
  r.progress.push_back(PointDelta{"tp", false, 42, 0, 0, 0});
  r.progress.push_back(PointDelta{"req", true, 0, 5, 4, 1});
  std::string s = w.format_experiment(r);
  EXPECT_EQ(s,
            "{\"type\":\"experiment\",\"selected\":\"/src/we\\\"ird\\\\path.c:12\",\"speedup\":0.35,"
            "\"duration_ns\":900,\"wall_ns\":1000,\"delay_ns\":100,\"selected_samples\":7,\"selected_ns\":7200000,"
            "\"partial\":false,"
            "\"progress\":[{\"name\":\"tp\",\"kind\":\"throughput\",\"delta\":42},"
            "{\"name\":\"req\",\"kind\":\"latency\",\"arrivals\":5,\"departures\":4,\"difference\":1}]}\n");
  EXPECT_EQ(json_string(std::string("a\nb\x01")), "\"a\\nb\\u0001\"");
}

TEST(Writer, StartupSaysTheCpusTheProgramCanUse) {
  ProfileWriter w;
  StartupRecord r;
  r.cpus = 2;
  r.cpu_quota = 2;
  EXPECT_NE(w.format_startup(r).find(",\"cpus\":2,\"cpu_quota\":2,"), std::string::npos);
  r.cpu_quota = 0;
  EXPECT_NE(w.format_startup(r).find(",\"cpus\":2,\"cpu_quota\":null,"), std::string::npos);
  r.cpus = 0;  // not known: neither field
  EXPECT_EQ(w.format_startup(r).find("cpu"), std::string::npos);
}

TEST(Writer, ThreadRecordsSayHowLongTheRuntimePausedTheThread) {
  ProfileWriter w;
  ThreadRecord r;
  r.tid = 42;
  r.thread = "worker";
  r.group = "work";
  r.wait_ns[0] = 7;
  r.paused_ns = 1234567;
  r.paused_cpu_ns = 89;
  r.preempt_credited_ns = 3456;
  EXPECT_EQ(w.format_thread(r),
            "{\"type\":\"thread\",\"tid\":42,\"thread\":\"worker\",\"group\":\"work\",\"start_ns\":0,"
            "\"end_ns\":0,\"cpu_ns\":0,\"cpu_clock_ns\":0,\"wait_ns\":{\"io\":7,\"lock\":0,\"sleep\":0,"
            "\"sync\":0,\"sched\":0,\"other\":0},\"paused_ns\":1234567,\"paused_cpu_ns\":89,"
            "\"preempt_credited_ns\":3456}\n");
  r.off_cpu_ns = 0;  // known (switch records), and none: written
  r.call_cpu_ns = 5000000;
  EXPECT_NE(w.format_thread(r).find(",\"preempt_credited_ns\":3456,\"off_cpu_ns\":0,\"call_cpu_ns\":5000000}\n"),
            std::string::npos);
}

TEST(Writer, SpeedupFractionsHaveTwoDecimals) {
  ProfileWriter w;
  ExperimentRecord r;
  r.selected = "a.c:1";
  for (int p : {0, 5, 100}) {
    r.speedup_percent = p;
    std::string s = w.format_experiment(r);
    const char* want = p == 0 ? "\"speedup\":0.00," : p == 5 ? "\"speedup\":0.05," : "\"speedup\":1.00,";
    EXPECT_NE(s.find(want), std::string::npos) << s;
  }
}

TEST(Writer, LegacyFormatIsUpstreams) {
  ProfileWriter w;
  w.set_legacy(true);
  ExperimentRecord r;
  r.selected = "app.c:12";
  r.speedup_percent = 50;
  r.duration_ns = 123;
  r.selected_samples = 4;
  r.progress.push_back(PointDelta{"tp", false, 9, 0, 0, 0});
  EXPECT_EQ(w.format_experiment(r),
            "experiment\tselected=app.c:12\tspeedup=0.50\tduration=123\tselected-samples=4\n"
            "throughput-point\tname=tp\tdelta=9\n");
  SamplesRecord one;
  one.counts = {{"app.c:12", 3}};
  EXPECT_EQ(w.format_samples(one), "samples\tlocation=app.c:12\tcount=3\n");
  EXPECT_EQ(w.format_runtime(55), "runtime\ttime=55\n");
}

TEST(Writer, LegacySamplesAreRunningCounts) {
  // Upstream's samples records hold a line's count since the start (a reader
  // keeps each line's last one); the runtime hands the writer increments.
  const std::string path = "/tmp/coz_writer_legacy_" + std::to_string(getpid());
  {
    ProfileWriter w;
    std::string err;
    ASSERT_TRUE(w.open(path, true, &err)) << err;
    SamplesRecord first, second;
    first.counts = {{"a.c:1", 2}, {"b.c:9", 1}};
    second.counts = {{"a.c:1", 5}};
    w.samples(first);
    w.samples(second);
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path.c_str());
  EXPECT_NE(text.find("samples\tlocation=a.c:1\tcount=2\nsamples\tlocation=b.c:9\tcount=1\n"
                      "samples\tlocation=a.c:1\tcount=7\n"),
            std::string::npos)
      << text;
}

namespace {
// A new empty file under /tmp named after `stem`; "" when none could be made.
std::string temp_file(const std::string& stem) {
  std::string path = "/tmp/" + stem + "_XXXXXX";
  int fd = mkstemp(&path[0]);
  if (fd < 0) return "";
  close(fd);
  return path;
}
std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

TEST(Writer, AppendsWholeRecordsToTheFile) {
  const std::string path = temp_file("coz_writer");
  ASSERT_FALSE(path.empty());
  {
    ProfileWriter w;
    std::string err;
    ASSERT_TRUE(w.open(path, false, &err)) << err;
    w.runtime(5);
    SamplesRecord r;
    r.counts = {{"a.c:1", 2}, {"b.c:9", 1}};
    r.out_of_scope = 3;
    w.samples(r);
    w.samples(SamplesRecord());  // nothing to say: no record
    SamplesRecord waits;
    waits.blocked = {{"io", {{"a.c:7", 4}}}};
    w.samples(waits);
    w.warning("no-debug-info", "x has no debug information");
  }
  std::string content = file_text(path);
  EXPECT_EQ(content,
            "{\"type\":\"runtime\",\"time_ns\":5}\n"
            "{\"type\":\"samples\",\"counts\":{\"a.c:1\":2,\"b.c:9\":1},\"out_of_scope\":3}\n"
            "{\"type\":\"samples\",\"counts\":{},\"out_of_scope\":0,\"blocked\":{\"io\":{\"a.c:7\":4}}}\n"
            "{\"type\":\"warning\",\"code\":\"no-debug-info\",\"message\":\"x has no debug information\"}\n");
  unlink(path.c_str());
}

// Totals mode (sampling-only, locks-only): counts are summed, never
// appended, so the profile does not grow with the run's length; the
// checkpoint beside it holds the totals so far, replaced whole each time,
// and the shutdown puts the final totals in the profile and removes it.
TEST(Writer, TotalsModeSumsCountsAndCheckpointsBesideTheProfile) {
  const std::string path = temp_file("coz_totals");
  ASSERT_FALSE(path.empty());
  const std::string ckpt = path + ".checkpoint";
  const std::string pid = std::to_string(getpid());
  {
    ProfileWriter w;
    std::string err;
    ASSERT_TRUE(w.open(path, false, &err)) << err;
    w.hold_totals();
    w.checkpoint();  // nothing held yet: no file
    EXPECT_NE(access(ckpt.c_str(), F_OK), 0);
    for (int flush = 0; flush < 50; flush++) {  // a long run's flushes
      SamplesRecord r;
      r.counts = {{"a.c:1", 2}, {"b.c:9", 1}};
      r.blocked = {{"io", {{"a.c:7", 1}}}};
      r.out_of_scope = 1;
      w.samples(r);
      w.stack_counts({{1, 3, 30}, {2, 1, 10}});
      LocksRecord l;
      l.elapsed_ns = 100 + flush;
      l.locks.push_back(LockRecord());
      w.locks(l);
      w.runtime(1000 + flush);
      w.checkpoint();
    }
    EXPECT_EQ(file_text(path), "") << "no count record appended while the run goes";
    std::string c = file_text(ckpt);
    EXPECT_EQ(c.find("{\"type\":\"totals\",\"seq\":50,\"pid\":" + pid + ",\"final\":false,\"records\":["), 0u) << c;
    EXPECT_NE(c.find("\"counts\":{\"a.c:1\":100,\"b.c:9\":50},\"out_of_scope\":50,\"blocked\":{\"io\":{\"a.c:7\":50}}"),
              std::string::npos) << c;
    EXPECT_NE(c.find("{\"type\":\"stack_counts\",\"counts\":[[1,150,1500],[2,50,500]]}"), std::string::npos) << c;
    EXPECT_NE(c.find("\"elapsed_ns\":149,"), std::string::npos) << "the latest locks record: " << c;
    EXPECT_NE(c.find("{\"type\":\"runtime\",\"time_ns\":1049}]}\n"), std::string::npos) << c;
    EXPECT_EQ(std::count(c.begin(), c.end(), '\n'), 1) << "one record";
    w.thread(ThreadRecord());  // not a count: appended as before
    w.shutdown(ShutdownRecord());
  }
  std::string p = file_text(path);
  EXPECT_EQ(p.find("{\"type\":\"thread\""), 0u) << p;
  size_t totals = p.find("{\"type\":\"totals\",\"seq\":51,\"pid\":" + pid + ",\"final\":true,");
  size_t shutdown = p.find("{\"type\":\"shutdown\"");
  ASSERT_NE(totals, std::string::npos) << p;
  EXPECT_LT(totals, shutdown) << "the final totals come before the shutdown record";
  EXPECT_NE(p.find("[[1,150,1500],[2,50,500]]"), std::string::npos);
  EXPECT_NE(access(ckpt.c_str(), F_OK), 0) << "the checkpoint is removed at the shutdown";
  unlink(path.c_str());
}

// A run killed after a checkpoint leaves it beside the profile: the next
// run writing that profile appends it first (it belongs to the run before),
// a process that only inherited the writer (a forked child) never writes
// or removes one, and a cut or foreign file is left alone.
TEST(Writer, ALeftCheckpointGoesInBeforeTheNextRun) {
  const std::string path = temp_file("coz_left");
  ASSERT_FALSE(path.empty());
  const std::string ckpt = path + ".checkpoint";
  const std::string left = "{\"type\":\"totals\",\"seq\":3,\"pid\":1,\"final\":false,\"records\":[]}\n";
  { std::ofstream(ckpt) << left; }
  {
    ProfileWriter w;
    std::string err;
    ASSERT_TRUE(w.open(path, false, &err)) << err;
    EXPECT_NE(access(ckpt.c_str(), F_OK), 0);
    w.startup(StartupRecord());
    w.hold_totals();
    w.runtime(5);
    w.abandon();  // as in a forked child
    w.checkpoint();
    EXPECT_NE(access(ckpt.c_str(), F_OK), 0) << "an abandoned writer writes no checkpoint";
  }
  std::string p = file_text(path);
  EXPECT_EQ(p.find(left), 0u) << p;
  EXPECT_NE(p.find("{\"type\":\"startup\""), std::string::npos);
  // Cut short (no final newline): left where it is, not appended.
  { std::ofstream(ckpt) << "{\"type\":\"totals\",\"seq\":4"; }
  {
    ProfileWriter w;
    std::string err;
    ASSERT_TRUE(w.open(path, false, &err)) << err;
  }
  EXPECT_EQ(file_text(path), p);
  EXPECT_EQ(access(ckpt.c_str(), F_OK), 0);
  unlink(ckpt.c_str());
  unlink(path.c_str());
}

TEST(Writer, OpenFailureSaysWhy) {
  ProfileWriter w;
  std::string err;
  EXPECT_FALSE(w.open("/nonexistent-dir/p.coz", false, &err));
  EXPECT_NE(err.find("/nonexistent-dir/p.coz"), std::string::npos);
  EXPECT_NE(err.find("No such file"), std::string::npos);
}

TEST(Warnings, EachIsSaidOnceAndWaitsForTheProfile) {
  const std::string path = temp_file("coz_warn");
  ASSERT_FALSE(path.empty());
  ProfileWriter w;
  std::string err;
  warnings_configure(false, nullptr);
  warn("no-debug-info", "before the profile is open");
  warn("no-debug-info", "before the profile is open");  // the same again: said once
  ASSERT_TRUE(w.open(path, false, &err)) << err;
  warnings_configure(false, &w);
  warn("perf-event-refused", "after it");
  warn("perf-event-refused", "after it");
  warnings_configure(false, nullptr);
  std::string content = file_text(path);
  EXPECT_EQ(content,
            "{\"type\":\"warning\",\"code\":\"no-debug-info\",\"message\":\"before the profile is open\"}\n"
            "{\"type\":\"warning\",\"code\":\"perf-event-refused\",\"message\":\"after it\"}\n");
  unlink(path.c_str());
}

TEST(Writer, StartupNamesTheBuild) {
  ProfileWriter w;
  StartupRecord r;
  r.argv0 = "/bin/app";
  r.build_id = "0a1b";
  std::string s = w.format_startup(r);
  EXPECT_NE(s.find("\"argv0\":\"/bin/app\",\"build_id\":\"0a1b\","), std::string::npos) << s;
  r.build_id.clear();
  EXPECT_NE(w.format_startup(r).find("\"build_id\":null,"), std::string::npos);
}

TEST(Sampler, PeriodsAreRandomAroundTheMean) {
  uint64_t state = 12345;
  const uint64_t mean = 1000000;
  double sum = 0, sum2 = 0;
  const int n = 20000;
  std::set<uint64_t> distinct;
  for (int i = 0; i < n; i++) {
    uint64_t p = draw_period(&state, mean);
    ASSERT_GE(p, mean / 2);
    ASSERT_LT(p, mean + mean / 2);
    sum += p;
    sum2 += static_cast<double>(p) * p;
    distinct.insert(p);
  }
  double avg = sum / n, sd = std::sqrt(sum2 / n - avg * avg);
  EXPECT_NEAR(avg, mean, mean * 0.01);
  EXPECT_NEAR(sd, mean / std::sqrt(12.0), mean * 0.01);  // uniform over a width of `mean`
  EXPECT_GT(distinct.size(), static_cast<size_t>(n * 0.99));
}

// ---- sampling-only's CPU rings: records of every thread, split by thread ----

namespace {
// Synthetic records in the CPU rings' layout (sampler_open_cpu_rings).
void put(std::vector<char>* b, const void* p, size_t n) {
  b->insert(b->end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
}
void cpu_sample(std::vector<char>* b, uint32_t tid, uint64_t time, uint64_t period, uint64_t ip) {
  perf_event_header h{PERF_RECORD_SAMPLE, 0, sizeof h + 6 * 8};
  uint32_t ids[2] = {1, tid};
  uint64_t nr = 0, abi = 0;  // no frames after ip, no registers (as a kernel thread's)
  put(b, &h, sizeof h);
  put(b, &ip, 8);
  put(b, ids, 8);
  put(b, &time, 8);
  put(b, &period, 8);
  put(b, &nr, 8);
  put(b, &abi, 8);
}
void cpu_switch(std::vector<char>* b, uint32_t tid, uint64_t time, uint16_t misc) {
  perf_event_header h{PERF_RECORD_SWITCH, misc, sizeof h + 16};
  uint32_t ids[2] = {1, tid};
  put(b, &h, sizeof h);
  put(b, ids, 8);
  put(b, &time, 8);
}
void cpu_lost(std::vector<char>* b, uint64_t lost) {
  perf_event_header h{PERF_RECORD_LOST, 0, sizeof h + 32};
  uint64_t id = 7, t = 0;
  uint32_t ids[2] = {1, 1};
  put(b, &h, sizeof h);
  put(b, &id, 8);
  put(b, &lost, 8);
  put(b, ids, 8);
  put(b, &t, 8);
}
}  // namespace

TEST(CpuRings, RecordsAreSplitByThreadInTimeOrderAcrossCpus) {
  // Thread 10 runs on CPU 1, is preempted at 150, and resumes on CPU 0 at
  // 200: CPU 0's ring, read first, holds its later records. Thread 20 runs on CPU 1; thread 99 is
  // the profiler's own, ignored.
  std::vector<char> raw;
  cpu_switch(&raw, 10, 200, 0);
  cpu_sample(&raw, 99, 250, 1000, 0x9000);
  cpu_sample(&raw, 10, 300, 800, 0x3000);
  size_t cpu1 = raw.size();
  cpu_sample(&raw, 10, 100, 700, 0x1000);
  cpu_sample(&raw, 20, 120, 1234, 0x2000);
  cpu_switch(&raw, 10, 150, (1u << 13) | (1u << 14));  // PERF_RECORD_MISC_SWITCH_OUT | _PREEMPT
  cpu_lost(&raw, 5);
  std::vector<RingSpan> spans = {{0, cpu1}, {cpu1, raw.size()}};
  std::vector<char> out;
  std::vector<ThreadRecords> chunks;
  uint64_t lost = 0;
  CpuMigrations moved;
  split_cpu_records(raw, spans, 99, &out, &chunks, &lost, &moved);
  EXPECT_EQ(lost, 5u);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].tid, 10);
  EXPECT_EQ(chunks[1].tid, 20);
  // Thread 10 moved from CPU 1 to CPU 0 once; thread 20 stayed; the
  // ignored thread counts for nothing.
  EXPECT_EQ(moved.count, 1u);
  // At the next look, thread 20's first record on CPU 0 is a move; thread
  // 10's on CPU 0 is not (it was there last); a new thread's first is not.
  std::vector<char> raw2;
  cpu_sample(&raw2, 20, 400, 1234, 0x2000);
  cpu_sample(&raw2, 10, 410, 800, 0x3000);
  cpu_sample(&raw2, 30, 420, 800, 0x4000);
  std::vector<RingSpan> spans2 = {{0, raw2.size()}, {raw2.size(), raw2.size()}};
  std::vector<char> out2;
  std::vector<ThreadRecords> chunks2;
  split_cpu_records(raw2, spans2, 99, &out2, &chunks2, &lost, &moved);
  EXPECT_EQ(moved.count, 2u);

  // Thread 10's records, parsed as the profiler does: its switch out on
  // CPU 1 and in on CPU 0 pair up (50 ns preempted, on the sample after),
  // and each sample weighs the period of the event that took it (one per
  // CPU).
  std::vector<std::pair<uint64_t, uint64_t>> seen;  // weight, wait
  std::vector<uintptr_t> ips;
  SwitchState sw;
  uint64_t plost = 0, skipped = 0;
  parse_records(out.data() + chunks[0].offset, chunks[0].size, &sw, 1000000, &plost, &skipped,
                [&](Sample& smp) {
                  seen.push_back({smp.weight_ns, smp.wait_ns});
                  ips.push_back(smp.pcs[0]);
                },
                true);
  EXPECT_EQ(skipped, 0u);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(ips[0], 0x1000u);
  EXPECT_EQ(ips[1], 0x3000u);
  EXPECT_EQ(seen[0], std::make_pair(uint64_t{700}, uint64_t{0}));  // CPU 1's event
  EXPECT_EQ(seen[1], std::make_pair(uint64_t{800}, uint64_t{50}));  // CPU 0's

  seen.clear();
  parse_records(out.data() + chunks[1].offset, chunks[1].size, &sw, 1000000, &plost, &skipped,
                [&](Sample& smp) { seen.push_back({smp.weight_ns, smp.wait_ns}); }, true);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, 1234u);
}

TEST(CpuRings, RecordsAfterTheCutWaitForTheNextTake) {
  // The rings are read one after the other. Thread 10 blocks on CPU 0 at
  // 160, after CPU 0's ring was read, and is woken on CPU 1 at 200, before
  // CPU 1's was: this take sees its switch in, the next its switch out.
  // Records from the cut (150, stamped before the first ring was read) on
  // wait, and the two pair up at the next take: 40 ns off the CPU of its
  // own accord. Thread 20 has ended: all of its records are taken now.
  const uint16_t kOut = 1u << 13;  // PERF_RECORD_MISC_SWITCH_OUT (blocked: no _PREEMPT)
  std::vector<char> raw;
  cpu_sample(&raw, 10, 100, 700, 0x1000);
  size_t cpu1 = raw.size();
  cpu_switch(&raw, 10, 200, 0);
  cpu_sample(&raw, 20, 180, 700, 0x2000);
  std::vector<RingSpan> spans = {{0, cpu1}, {cpu1, raw.size()}};
  std::vector<std::vector<char>> held(2);
  const std::vector<pid_t> ended = {20};
  CpuRecordCut cut;
  cut.time = 150;
  cut.whole = &ended;
  cut.held = &held;
  std::vector<char> out;
  std::vector<ThreadRecords> chunks;
  uint64_t lost = 0;
  CpuMigrations moved;
  split_cpu_records(raw, spans, 99, &out, &chunks, &lost, &moved, cut);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].tid, 10);
  EXPECT_EQ(chunks[0].size, sizeof(perf_event_header) + 6 * 8);  // its sample at 100 only
  EXPECT_EQ(chunks[1].tid, 20);
  EXPECT_TRUE(held[0].empty());
  EXPECT_EQ(held[1].size(), sizeof(perf_event_header) + 16);  // the switch in

  // The next take: each ring's held records before its new ones (as
  // take_cpu_records lays them out), at the last look (nothing held).
  std::vector<char> raw2;
  cpu_switch(&raw2, 10, 160, kOut);
  size_t cpu1b = raw2.size();
  raw2.insert(raw2.end(), held[1].begin(), held[1].end());
  cpu_sample(&raw2, 10, 300, 800, 0x3000);
  std::vector<RingSpan> spans2 = {{0, cpu1b}, {cpu1b, raw2.size()}};
  held[1].clear();
  cut.time = UINT64_MAX;
  cut.whole = nullptr;
  std::vector<char> out2;
  std::vector<ThreadRecords> chunks2;
  split_cpu_records(raw2, spans2, 99, &out2, &chunks2, &lost, &moved, cut);
  ASSERT_EQ(chunks2.size(), 1u);
  EXPECT_TRUE(held[0].empty() && held[1].empty());

  // Parsed in order, as the profiler does (take 1's chunk, then take 2's).
  SwitchState sw;
  SwitchState::OffLog log;
  sw.log = &log;
  uint64_t plost = 0, skipped = 0;
  std::vector<uintptr_t> ips;
  log.start_look(1);
  parse_records(out.data() + chunks[0].offset, chunks[0].size, &sw, 1000000, &plost, &skipped,
                [&](Sample& smp) { ips.push_back(smp.pcs[0]); }, true);
  log.start_look(2);
  parse_records(out2.data() + chunks2[0].offset, chunks2[0].size, &sw, 1000000, &plost, &skipped,
                [&](Sample& smp) { ips.push_back(smp.pcs[0]); }, true);
  EXPECT_EQ(ips, (std::vector<uintptr_t>{0x1000, 0x3000}));
  // A blocked call from 120 to 250: 40 ns of it off the CPU.
  uint64_t off = 0, preempted = 0;
  ASSERT_TRUE(sw.call_within(250, 130, &off, &preempted));
  EXPECT_EQ(off, 40u);
  EXPECT_EQ(preempted, 0u);
  EXPECT_EQ(moved.count, 1u);  // from CPU 0 to CPU 1, once
}

// ---- what a descriptor links to ----

TEST(Waits, PipesCreatedHereLinkSiblingsInheritedOnesDoNot) {
  int own[2], foreign[2];
  ASSERT_EQ(pipe(own), 0);
  fds_pipe_created(own);  // as the interposed pipe() does
  ASSERT_EQ(pipe(foreign), 0);  // as a shell's pipe the program inherits: never seen
  EXPECT_TRUE(fd_links_siblings(own[0]));
  EXPECT_TRUE(fd_links_siblings(own[1]));
  EXPECT_FALSE(fd_links_siblings(foreign[0]));
  for (int fd : {own[0], own[1], foreign[0], foreign[1]}) {
    fds_closed(fd);  // as the interposed close() does
    close(fd);
  }
}

TEST(Waits, UnixSocketsLinkSiblingsOnlyWhenThePeerIsThisProcess) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_TRUE(fd_links_siblings(pair[0]));
  // A local server in another process, as a database would be.
  int child_side[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, child_side), 0);
  char path[] = "/tmp/coz_sock_XXXXXX";
  ASSERT_NE(mkdtemp(path), nullptr);
  std::string sock = std::string(path) + "/s";
  pid_t pid = fork();
  if (pid == 0) {
    int srv = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, sock.c_str(), sizeof a.sun_path - 1);
    bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(srv, 1);
    char c = 1;
    if (write(child_side[1], &c, 1) != 1) _exit(1);
    int conn = accept(srv, nullptr, nullptr);
    if (read(conn, &c, 1) < 0) _exit(1);
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(child_side[0], &c, 1), 1);  // the server listens
  int cli = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  strncpy(a.sun_path, sock.c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(connect(cli, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_FALSE(fd_links_siblings(cli)) << "the peer is another process";
  ASSERT_EQ(write(cli, "x", 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  for (int fd : {pair[0], pair[1], child_side[0], child_side[1], cli}) {
    fds_closed(fd);  // as the interposed close() does
    close(fd);
  }
  unlink(sock.c_str());
  rmdir(path);
}

TEST(Waits, EventfdsCreatedHereLinkSiblingsUntilClosed) {
  int fd = eventfd(0, 0);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(fd_links_siblings(fd)) << "not seen created";
  fds_eventfd_created(fd);
  EXPECT_TRUE(fd_links_siblings(fd));
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 100);
  fds_copied(fd, copy);
  EXPECT_TRUE(fd_links_siblings(copy));
  fds_closed(fd);
  close(fd);
  EXPECT_FALSE(fd_links_siblings(fd));
  int file = open("/dev/null", O_RDONLY);  // may reuse the number
  EXPECT_FALSE(fd_links_siblings(file));
  fds_closed(file);
  close(file);
  fds_closed(copy);
  close(copy);
}

TEST(Waits, WhatADescriptorLinksIsLearnedOnceUntilItIsClosed) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_TRUE(fd_links_siblings(pair[0]));
  int file = open("/dev/null", O_RDONLY);
  EXPECT_FALSE(fd_links_siblings(file));
  // Replaced behind its back (dup2 onto it, as the interposed dup2 reports):
  int high = fcntl(pair[0], F_DUPFD_CLOEXEC, 200);
  ASSERT_EQ(dup2(file, high), high);
  fds_copied(file, high);
  EXPECT_FALSE(fd_links_siblings(high)) << "the copy took the file's answer";
  for (int fd : {pair[0], pair[1], file, high}) {
    fds_closed(fd);
    close(fd);
  }
}

TEST(Waits, DescriptorsOpenAtAForkLinkProcessesNotSiblings) {
  // Made before the fork: a pipe and an eventfd seen created, a socketpair
  // never asked about (its SO_PEERCRED names this process in the parent).
  int own[2], pair[2];
  ASSERT_EQ(pipe(own), 0);
  fds_pipe_created(own);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  int ev = eventfd(0, 0);
  ASSERT_GE(ev, 0);
  fds_eventfd_created(ev);
  int ep = epoll_create1(0);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = 104729;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e), 0);
  fds_epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e);
  ASSERT_TRUE(fd_links_siblings(own[0]));
  ASSERT_TRUE(fd_links_siblings(ev));
  const int before[] = {own[0], own[1], pair[0], pair[1], ev};
  // What each side sees after the fork: bit i set when before[i] still links
  // siblings; bit 5 when a pipe made after the fork does not; bit 6 when an
  // eventfd added to the inherited epoll set after the fork takes the epoll
  // table's lock for ever (the child would hang, not return).
  auto after_fork = [&]() {
    int bad = 0;
    for (int i = 0; i < 5; i++)
      if (fd_links_siblings(before[i])) bad |= 1 << i;
    int fresh[2];
    if (pipe(fresh) != 0) return 128;
    fds_pipe_created(fresh);
    if (!fd_links_siblings(fresh[0])) bad |= 1 << 5;
    int ev2 = eventfd(0, 0);
    fds_eventfd_created(ev2);
    epoll_event e2{};
    e2.events = EPOLLIN;
    e2.data.u64 = 7919;
    epoll_ctl(ep, EPOLL_CTL_ADD, ev2, &e2);
    fds_epoll_ctl(ep, EPOLL_CTL_ADD, ev2, &e2);
    for (int fd : {fresh[0], fresh[1], ev2}) {
      fds_closed(fd);
      close(fd);
    }
    return bad;
  };
  fds_fork_prepare();  // as the runtime's fork handlers do
  pid_t pid = fork();
  if (pid == 0) {
    fds_fork_child();
    _exit(after_fork());
  }
  fds_fork_parent();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(after_fork(), 0) << "in the parent";
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "in the child";
  for (int fd : {own[0], own[1], pair[0], pair[1], ev, ep}) {
    fds_closed(fd);
    close(fd);
  }
}

TEST(SignalStack, AFailedMappingIsNotTriedAgainAtEverySample) {
  // In a child whose address space is full (RLIMIT_AS at its size), the
  // work runs on the current stack, and the failure is kept: with room
  // again, the next sample still does not map.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long pages = 0;
    FILE* f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) _exit(10);
    fclose(f);
    rlimit old{}, full{};
    getrlimit(RLIMIT_AS, &old);
    full = old;
    full.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
    if (setrlimit(RLIMIT_AS, &full) != 0) _exit(11);
    ThreadState t;
    int ran = 0;
    auto fn = [](void* p) { ++*static_cast<int*>(p); };
    run_on_signal_stack(&t, fn, &ran);
    if (ran != 1 || t.signal_stack || !t.signal_stack_refused) _exit(12);
    setrlimit(RLIMIT_AS, &old);
    run_on_signal_stack(&t, fn, &ran);
    if (ran != 2 || t.signal_stack) _exit(13);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Writer, StringsAreValidUtf8WhateverTheBytes) {
  EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"");                   // valid UTF-8 kept
  EXPECT_EQ(json_string("bad\xe9.c"), "\"bad\xef\xbf\xbd.c\"");               // Latin-1 byte replaced
  EXPECT_EQ(json_string("cut\xe2\x82"), "\"cut\xef\xbf\xbd\xef\xbf\xbd\"");  // truncated sequence
}

TEST(Writer, ARecordAfterACutOneStartsItsOwnLine) {
  // A full disk stops a write part-way through a record: the next record
  // must not land on the same line.
  const std::string path = temp_file("coz_cut");
  ASSERT_FALSE(path.empty());
  ProfileWriter w;
  std::string err;
  ASSERT_TRUE(w.open(path, false, &err)) << err;
  w.runtime(5);
  // Simulate the cut: append half a record by hand, as a short write leaves it.
  {
    int raw = open(path.c_str(), O_WRONLY | O_APPEND);
    ASSERT_EQ(write(raw, "{\"type\":\"runt", 13), 13);
    close(raw);
  }
  w.mark_cut_for_test();
  w.runtime(6);
  std::string content = file_text(path);
  EXPECT_EQ(content, "{\"type\":\"runtime\",\"time_ns\":5}\n{\"type\":\"runt\n{\"type\":\"runtime\",\"time_ns\":6}\n");
  unlink(path.c_str());
}

// ---- waits: blocked samples and their virtual speedup ----

namespace {
class WaitAccounting : public Delays {
 protected:
  void SetUp() override {
    Delays::SetUp();
    SamplerSettings st;
    st.period_ns = 1000000;  // blocked samples of 1 ms
    sampler_configure(st);
    shared().selected.store(nullptr);
    shared().blocked_scope.store(1u << static_cast<int>(WaitKind::kSleep));
  }
  void TearDown() override {
    shared().selected.store(nullptr);
    Delays::TearDown();
  }
  // A wait of `ns` of category `k`, ended by the thread itself.
  void wait(ThreadState* t, uint64_t ns, WaitKind k = WaitKind::kSleep) {
    pre_block(t);
    g_fake_now += ns;
    end_wait(t, k, false, 0);
  }
  std::vector<Sample> taken(ThreadState* t) {
    std::vector<Sample> out;
    Sample s;
    while (t->ring.pop(&s)) out.push_back(s);
    return out;
  }
};
}  // namespace

namespace {
// Runs `body` as the hooked thread `t` (what the interposed calls see), in a
// causal run (`delays`) or in one without experiments (sampling-only, locks-only).
template <typename Body>
void as_hooked_thread(ThreadState* t, Body body, bool delays = true) {
  ThreadState* saved = tls_state;
  tls_state = t;
  shared().sampling.store(true);
  shared().delays.store(delays);
  body();
  shared().delays.store(false);
  shared().sampling.store(false);
  tls_state = saved;
}
int g_lock_word = 0;  // a lock's identity for the counters

// A pthread mutex taken by the hooked thread after a wait: its try finds it
// taken, and `while_waiting` runs before the wait returns with it.
template <typename WhileWaiting>
int acquire_after_wait(WhileWaiting while_waiting) {
  return acquire(
      LockKind::kMutex, &g_lock_word, nullptr, lock_wait, [] { return EBUSY; },
      [&] {
        while_waiting();
        return 0;
      },
      pthread_taken, pthread_got);
}
}  // namespace

TEST_F(WaitAccounting, ADebtIsPaidBeforeTakingALockNotInsideTheCriticalSection) {
  ThreadState earner, t;
  sync_epoch(&t);
  add_hits(&earner, ms(2));  // t owes 1 ms
  uint64_t slept_when_tried = UINT64_MAX;
  as_hooked_thread(&t, [&] {
    int rc = acquire(
        LockKind::kMutex, &g_lock_word, nullptr, lock_wait,
        [&] {
          slept_when_tried = g_slept_total;
          return 0;  // free: taken at once
        },
        [] { return 0; }, pthread_taken, pthread_got);
    EXPECT_EQ(rc, 0);
  });
  EXPECT_EQ(slept_when_tried, 1000000u) << "paid before the lock was tried, so no holder pauses inside it";
  EXPECT_EQ(g_slept_total, 1000000u) << "and once";
  free_lock_table(t.locks);
}

TEST_F(WaitAccounting, AContendedLockIsTakenWithNothingLeftToPayInsideIt) {
  ThreadState holder, t;
  sync_epoch(&t);
  sync_epoch(&holder);
  add_hits(&holder, ms(2));  // t owes 1 ms before it reaches the lock
  as_hooked_thread(&t, [&] {
    acquire_after_wait([&] {
      // While t waits, the holder earns 1 ms more and pays nothing
      // before its unlock releases t.
      add_hits(&holder, ms(2));
      g_fake_now += ms(3);
      EXPECT_EQ(g_slept_total, 1000000u);
    });
  });
  EXPECT_EQ(g_slept_total, 1000000u) << "its wait was credited: nothing paid while holding the lock";
  EXPECT_EQ(t.local_delay, shared().global_delay.load());
  free_lock_table(t.locks);
}

namespace {
int g_cond_word = 0;  // a condition variable's identity for the wake stamps
// Runs `body` as `t` inside another hooked thread's body (a waker seen
// from the waiter's wait), and goes back to the caller's state.
template <typename Body>
void as_other_thread(ThreadState* t, Body body) {
  ThreadState* saved = tls_state;
  tls_state = t;
  body();
  tls_state = saved;
}
}  // namespace

TEST_F(WaitAccounting, ADebtFoundInsideACriticalSectionIsPaidAfterTheRelease) {
  ThreadState earner, t;
  sync_epoch(&t);
  as_hooked_thread(&t, [&] {
    acquire(LockKind::kMutex, &g_lock_word, nullptr, lock_wait, [] { return 0; }, [] { return 0; }, pthread_taken,
            pthread_got);
    EXPECT_EQ(t.mutexes_held, 1u);
    add_hits(&earner, ms(2));  // t owes 1 ms, found at a sample inside the critical section
    catch_up(&t);
    EXPECT_EQ(g_slept_total, 0u) << "not paid while the mutex is held: every thread queued on it would wait too";
    release_mutex(&g_lock_word);
    EXPECT_EQ(g_slept_total, 0u) << "nor before the release";
    EXPECT_EQ(t.mutexes_held, 0u);
    released();
    EXPECT_EQ(g_slept_total, 1000000u) << "paid once the mutex is free";
  });
  free_lock_table(t.locks);
}

// Without experiments no delay is inserted, so a release has nothing to pay
// (its wake returns at once): even a debt left in the counts stays unpaid.
TEST_F(WaitAccounting, WithoutExperimentsAReleasePaysNothing) {
  ThreadState earner, t;
  sync_epoch(&t);
  as_hooked_thread(
      &t,
      [&] {
        acquire(LockKind::kMutex, &g_lock_word, nullptr, lock_wait, [] { return 0; }, [] { return 0; },
                pthread_taken, pthread_got);
        add_hits(&earner, ms(2));  // (a debt no run without experiments can have)
        release_mutex(&g_lock_word);
        released();
        EXPECT_EQ(g_slept_total, 0u);
        uint64_t counted = 0;
        for (const LockCounts& c : t.locks->slots) counted += c.acquisitions.load();
        EXPECT_EQ(counted, 1u) << "the counters still count";
      },
      false);
  free_lock_table(t.locks);
}

TEST_F(WaitAccounting, ADebtOfTenMillisecondsIsPaidEvenInsideACriticalSection) {
  ThreadState earner, t;
  sync_epoch(&t);
  as_hooked_thread(&t, [&] {
    try_acquire(LockKind::kC11Mutex, &g_lock_word, nullptr, [] { return 0; }, [](int rc) { return rc == 0; });
    EXPECT_EQ(t.mutexes_held, 1u) << "a try that took the mutex holds it too";
    add_hits(&earner, ms(2) * 9);  // 9 ms owed: still left for the release
    catch_up(&t);
    EXPECT_EQ(g_slept_total, 0u);
    add_hits(&earner, ms(2));  // 10 ms: a thread that holds a mutex for long still pays
    catch_up(&t);
    EXPECT_EQ(g_slept_total, kDeferInMutexNs);
    release_mutex(&g_lock_word);
    released();
    EXPECT_EQ(g_slept_total, kDeferInMutexNs) << "and once";
  });
  free_lock_table(t.locks);
}

TEST_F(WaitAccounting, AMutexWaiterTakesOverTheDebtItsReleaserLeftUnpaid) {
  ThreadState holder, earner, t;
  sync_epoch(&holder);
  sync_epoch(&t);
  holder.mutexes_held = 1;
  as_hooked_thread(&t, [&] {
    acquire_after_wait([&] {
      // While t waits, another thread earns 1 ms, which the holder owes
      // and leaves for after its release.
      add_hits(&earner, ms(2));
      g_fake_now += ms(3);
      as_other_thread(&holder, [&] { release_mutex(&g_lock_word); });
    });
    EXPECT_EQ(g_slept_total, 0u) << "t holds the mutex now: its debt waits for the release";
    EXPECT_EQ(shared().global_delay.load() - t.local_delay, 1000000u)
        << "its releaser owed 1 ms: it was let go 1 ms sooner than the virtual program would have";
    release_mutex(&g_lock_word);
    released();
  });
  EXPECT_EQ(g_slept_total, 1000000u);
  free_lock_table(t.locks);
  free_lock_table(holder.locks);
}

TEST_F(WaitAccounting, AReleaserThatPaidLeavesItsWaiterNothingToPay) {
  ThreadState holder, earner, t;
  sync_epoch(&holder);
  sync_epoch(&t);
  as_hooked_thread(&t, [&] {
    acquire_after_wait([&] {
      add_hits(&earner, ms(2));
      g_fake_now += ms(2);
      catch_up(&holder);  // the holder pays at a sample, outside any mutex of its own
      as_other_thread(&holder, [&] { release_mutex(&g_lock_word); });
    });
    EXPECT_EQ(t.local_delay, shared().global_delay.load()) << "its wait is credited whole";
    release_mutex(&g_lock_word);
  });
  EXPECT_EQ(g_slept_total, 1000000u) << "the holder's pause only";
  free_lock_table(t.locks);
  free_lock_table(holder.locks);
}

TEST_F(WaitAccounting, AConditionWaiterTakesOverItsSignallersDebt) {
  ThreadState signaller, earner, t;
  sync_epoch(&signaller);
  sync_epoch(&t);
  as_hooked_thread(&t, [&] {
    WaitObject cw(&t, &g_cond_word);
    pre_block(&t);
    add_hits(&earner, ms(4));  // 2 ms inserted while t waits
    as_other_thread(&signaller, [&] {
      add_hits(&signaller, ms(2));  // the signaller ran the line for 1 ms of it, and owes 1 ms
      signalling(&g_cond_word);
    });
    g_fake_now += ms(5);
    end_wait(&t, WaitKind::kSync, true, 0);
  });
  EXPECT_EQ(g_slept_total, 1000000u) << "what the signaller owed, paid at once: t holds no mutex";
  EXPECT_EQ(t.local_delay, shared().global_delay.load());
}

TEST_F(WaitAccounting, ADebtTakenOverFromAWakerIsSleptEvenInACrowdedProgram) {
  ThreadState signaller, earner, t;
  sync_epoch(&signaller);
  sync_epoch(&t);
  shared().crowded.store(true);
  as_hooked_thread(&t, [&] {
    WaitObject cw(&t, &g_cond_word);
    pre_block(&t);
    add_hits(&earner, ms(4));  // 2 ms inserted while t waits; the signaller paid none of it
    as_other_thread(&signaller, [&] { signalling(&g_cond_word); });
    add_hits(&earner, ms(2));  // 1 ms more after the signal, credited as usual
    g_fake_now += ms(5);
    end_wait(&t, WaitKind::kSync, true, 0);
  });
  EXPECT_EQ(g_slept_total, ms(2)) << "its wait would have lasted 2 ms more: off the CPU, as a wait is";
  EXPECT_EQ(g_cpu_paused_total, 0u) << "nothing held";
  EXPECT_EQ(t.wait_debt_ns, 0u);
  add_hits(&earner, ms(2));  // a debt earned while it runs
  as_hooked_thread(&t, [&] { catch_up(&t); });
  EXPECT_EQ(g_cpu_paused_total, ms(1)) << "is held, as every pause in a crowded program";
  shared().crowded.store(false);
}

TEST_F(WaitAccounting, AWakeStampOfAnotherExperimentSaysNothing) {
  ThreadState t;
  sync_epoch(&t);
  ThreadState earner;
  add_hits(&earner, ms(2));
  record_wake_stamp(&t, &g_lock_word);
  uint64_t debt = 0;
  EXPECT_TRUE(find_wake_stamp(&g_lock_word, t.epoch, &debt));
  EXPECT_EQ(debt, ms(1)) << "what t owed when it released the object";
  EXPECT_FALSE(find_wake_stamp(&g_cond_word, t.epoch, &debt)) << "another object";
  EXPECT_FALSE(find_wake_stamp(&g_lock_word, t.epoch + 1, &debt)) << "another experiment";
}

TEST_F(WaitAccounting, RemaindersCarryUntilAWholePeriodIsWaited) {
  ThreadState t;
  wait(&t, 400000);
  wait(&t, 400000);
  EXPECT_TRUE(taken(&t).empty()) << "0.8 ms: no blocked sample yet";
  wait(&t, 400000);
  std::vector<Sample> s = taken(&t);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(sample_kind(s[0].flags), 1u + static_cast<uint32_t>(WaitKind::kSleep));
  EXPECT_EQ(s[0].weight_ns, 1000000u);
  EXPECT_EQ(t.wait_rest_ns[static_cast<int>(WaitKind::kSleep)], 200000u) << "the rest waits for the next wait";
  EXPECT_EQ(t.wait_total_ns[static_cast<int>(WaitKind::kSleep)].load(), 1200000u);
  wait(&t, 3500000, WaitKind::kIo);
  s = taken(&t);
  ASSERT_EQ(s.size(), 1u) << "one sample standing for three periods";
  EXPECT_EQ(s[0].weight_ns, 3000000u);
  EXPECT_EQ(sample_kind(s[0].flags), 1u + static_cast<uint32_t>(WaitKind::kIo));
  EXPECT_EQ(t.wait_rest_ns[static_cast<int>(WaitKind::kSleep)], 200000u) << "remainders are kept per category";
}

TEST_F(WaitAccounting, AWaitInsideAWaitIsPartOfTheOuterOne) {
  ThreadState t;
  pre_block(&t);  // a read
  g_fake_now += 600000;
  wait(&t, 300000);  // a signal handler sleeps during it
  EXPECT_EQ(t.wait_total_ns[static_cast<int>(WaitKind::kSleep)].load(), 0u);
  g_fake_now += 500000;
  end_wait(&t, WaitKind::kIo, false, 0);
  EXPECT_EQ(t.wait_total_ns[static_cast<int>(WaitKind::kIo)].load(), 1400000u) << "counted once, whole";
  EXPECT_EQ(t.wait_depth, 0u);
}

// Waits are timed with the time-stamp counter once its rate is measured
// (where the kernel keeps it as its clock source): a wait so timed lies
// within the CLOCK_MONOTONIC readings bracketing its start and its end,
// give or take the rate's 0.1% bound. A test clock turns the counter off.
TEST(WaitClock, TicksAgreeWithTheClockAndATestClockTurnsThemOff) {
  if (!tsc_is_clock_source()) GTEST_SKIP() << "the time-stamp counter is not the kernel's clock source here";
  set_clock_fn(nullptr);
  calibrate_wait_ticks();
  timespec gap{0, 12000000};
  nanosleep(&gap, nullptr);
  calibrate_wait_ticks();  // 12 ms after the first measurement: the rate is set
  ThreadState t;
  uint64_t before_start = now_mono();
  pre_block(&t);
  uint64_t after_start = now_mono();
  ASSERT_NE(t.wait_tick_rate, 0u) << "timed by ticks";
  timespec wait{0, 5000000};
  nanosleep(&wait, nullptr);
  uint64_t before_end = now_mono();
  uint64_t waited = wait_elapsed(&t);
  uint64_t after_end = now_mono();
  uint64_t shortest = before_end - after_start, longest = after_end - before_start;
  EXPECT_GE(waited + shortest / 1000 + 1000, shortest);
  EXPECT_LE(waited, longest + longest / 1000 + 1000);
  set_clock_fn(fake_clock);
  ThreadState u;
  pre_block(&u);
  EXPECT_EQ(u.wait_tick_rate, 0u) << "a test clock times every wait";
  EXPECT_EQ(u.wait_start, g_fake_now);
  set_clock_fn(nullptr);
}

TEST_F(WaitAccounting, ASpedUpWaitEarnsOnlyItsPartInsideTheExperiment) {
  // The selected line is the wait's call site: the whole text is in scope,
  // and the selected ranges cover this test's own code (the call stack).
  Shared& s = shared();
  const RangeSet* all = make_range_set({{1, UINTPTR_MAX}});
  s.scope.store(all);
  s.selected.store(all);
  ThreadState t, other;
  sync_epoch(&other);
  pre_block(&t);
  g_fake_now += 4000000;  // 4 ms before the experiment...
  s.experiment_start_ns.store(g_fake_now);  // the experiment starts as the profiler starts one
  s.epoch_start_global.store(s.global_delay.load());
  s.epoch.fetch_add(1);
  g_fake_now += 2000000;  // ... and 2 ms in it
  end_wait(&t, WaitKind::kSleep, false, 0);
  EXPECT_EQ(s.selected_blocked_ns.load(), 2000000u);
  EXPECT_EQ(t.local_delay - 1000, 1000000u) << "50% of the 2 ms inside the experiment";
  catch_up(&other);
  EXPECT_EQ(g_slept_total, 1000000u) << "the others pay for it";
  // A wait begun inside the experiment counts whole.
  pre_block(&t);
  g_fake_now += 3000000;
  end_wait(&t, WaitKind::kSleep, false, 0);
  EXPECT_EQ(s.selected_blocked_ns.load(), 5000000u);
  EXPECT_EQ(t.local_delay - 1000, 2500000u);
  // A wait of a category outside the blocked scope earns nothing.
  pre_block(&t);
  g_fake_now += 2000000;
  end_wait(&t, WaitKind::kLock, false, 0);
  EXPECT_EQ(s.selected_blocked_ns.load(), 5000000u);
  s.scope.store(nullptr);
}

// The timer fallback: one signal of a CPU timer can stand for several
// periods (si_overrun, with ticks coarser than the period), and earns delay
// for all of them. Driven with a context of this thread instead of a signal.
TEST_F(WaitAccounting, ATimerSampleEarnsForEveryPeriodItsSignalCovers) {
  Shared& s = shared();
  const RangeSet* all = make_range_set({{1, UINTPTR_MAX}});
  s.scope.store(all);
  s.selected.store(all);  // every sample is a hit
  ucontext_t uc;
  ASSERT_EQ(getcontext(&uc), 0);
  for (int overrun : {-1, 0, 3}) {  // rising: none of the threads owes what an earlier one earned
    ThreadState t;  // a fresh thread: no time waiting for a CPU is known yet
    process_timer_sample(&t, &uc, overrun);
    const uint64_t periods = overrun > 0 ? 1 + static_cast<uint64_t>(overrun) : 1;
    EXPECT_EQ(t.local_delay - 1000, periods * 500000u) << "50% of each period, overrun " << overrun;
    std::vector<Sample> got = taken(&t);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].weight_ns, periods * 1000000u) << "the sample stands for the periods it covers";
    EXPECT_EQ(got[0].wait_ns, 0u);
  }
  s.selected.store(nullptr);
  s.scope.store(nullptr);
}

// ---- synchronization counters ----

TEST(Locks, CountsPerObjectAndCallSiteWithHoldsAndTries) {
  ThreadState t;
  int a, b;
  const uintptr_t site1 = 0x1001, site2 = 0x2001;
  lock_acquired(&t, LockKind::kMutex, &a, site1, false, 0);
  lock_released(&t, &a);
  lock_acquired(&t, LockKind::kMutex, &a, site2, true, 5000);
  lock_released(&t, &a);
  lock_tried(&t, LockKind::kMutex, &b, site1, true);
  lock_tried(&t, LockKind::kMutex, &b, site1, false);
  lock_released(&t, &b);
  LockMerger m;
  m.take(7, *t.locks, true);
  auto objects = m.objects();
  ASSERT_EQ(objects.size(), 2u);
  const LockTotals& la = objects[reinterpret_cast<uintptr_t>(&a)];
  EXPECT_EQ(la.all.acquisitions, 2u);
  EXPECT_EQ(la.all.contended, 1u);
  EXPECT_EQ(la.all.wait_ns, 5000u);
  EXPECT_EQ(la.sites.size(), 2u) << "one entry per call site";
  EXPECT_EQ(la.sites.at(site2 - 1).contended, 1u);
  EXPECT_GT(la.all.hold_ticks, 0u);
  const LockTotals& lb = objects[reinterpret_cast<uintptr_t>(&b)];
  EXPECT_EQ(lb.all.trylocks, 2u);
  EXPECT_EQ(lb.all.trylock_failures, 1u);
  EXPECT_EQ(lb.all.acquisitions, 1u) << "a try that succeeds is an acquisition";
  EXPECT_EQ(la.threads, std::vector<pid_t>{7});
  free_lock_table(t.locks);
}

TEST(Locks, BeyondTheTableObjectsAreFoldedPerCallSite) {
  ThreadState t;
  std::vector<int> objs(20000);
  for (int& o : objs) {
    lock_acquired(&t, LockKind::kMutex, &o, 0x3001, false, 0);
    lock_released(&t, &o);
    if (&o == &objs[0]) seed_lock_sampler(t.locks, 12345);  // the same draws in every run
  }
  LockMerger m;
  m.take(1, *t.locks, true);
  auto objects = m.objects();
  auto folded = m.folded();
  EXPECT_LE(objects.size(), static_cast<size_t>(LockTable::kSlots)) << "memory stays bounded";
  // Nothing is lost, only folded; once the table overflowed, the
  // acquisitions are counted one in kAcquisitionSampleEvery, each for as
  // many (locks.h): the total is then an estimate within its error.
  double total = 0, var = 0;
  for (auto& kv : objects) total += static_cast<double>(kv.second.all.acquisitions), var += kv.second.all.acquisitions_var;
  for (auto& kv : folded) total += static_cast<double>(kv.second.all.acquisitions), var += kv.second.all.acquisitions_var;
  EXPECT_GT(var, 0.0);
  EXPECT_LE(std::fabs(total - 20000), 5 * std::sqrt(var)) << total;
  ASSERT_EQ(folded.size(), 1u);
  EXPECT_EQ(folded.begin()->first, 0x3000u) << "folded by their call site";
  free_lock_table(t.locks);
}

TEST(Locks, ALiveThreadsCountsAreReplacedAnEndedOnesAddedOnce) {
  ThreadState t1, t2;
  int a;
  lock_acquired(&t1, LockKind::kMutex, &a, 0x1001, false, 0);
  lock_acquired(&t2, LockKind::kMutex, &a, 0x1001, false, 0);
  LockMerger m;
  m.take(1, *t1.locks, false);
  m.take(1, *t1.locks, false);  // the same live table read twice: counted once
  m.take(2, *t2.locks, true);
  auto objects = m.objects();
  EXPECT_EQ(objects[reinterpret_cast<uintptr_t>(&a)].all.acquisitions, 2u);
  EXPECT_EQ(objects[reinterpret_cast<uintptr_t>(&a)].threads.size(), 2u);
  free_lock_table(t1.locks);
  free_lock_table(t2.locks);
}

// Switch records: what a thread waited for a CPU is charged to the line of
// its next sample, except where it sat preempted on the way to a wait.
namespace {
constexpr uint16_t kOut = 1u << 13, kPreempt = 1u << 14;
}

TEST(SwitchState, PreemptionMidLineIsChargedToTheNextSample) {
  coz::SwitchState s;
  s.on_switch(kOut | kPreempt, 1000);
  s.on_switch(0, 4000);
  EXPECT_EQ(s.take_preempted(), 3000u);
  EXPECT_EQ(s.uncharged_ns, 0u);
  EXPECT_EQ(s.take_preempted(), 0u);
}

// The sampler credits a preemption when on_switch says the record ended
// one, and only then: the interval stays set until the next switch in, and
// crediting it at every record while set credited it again at the switch
// out after it (in over_barrier, every preemption of the thread that did
// not run the line twice).
TEST(SwitchState, TheLastSwitchInTellsThePreemptionItEnded) {
  coz::SwitchState s;
  EXPECT_FALSE(s.on_switch(kOut | kPreempt, 1000));
  EXPECT_TRUE(s.on_switch(0, 4000));
  EXPECT_EQ(s.preempted_from, 1000u);
  EXPECT_EQ(s.preempted_to, 4000u);
  EXPECT_FALSE(s.on_switch(kOut, 5000)) << "the switch out after it ends nothing";  // blocks
  EXPECT_EQ(s.preempted_to, 4000u);
  EXPECT_FALSE(s.on_switch(0, 9000));
  EXPECT_EQ(s.preempted_to, 0u) << "a wait is no preemption";
  EXPECT_FALSE(s.on_switch(kOut | kPreempt, 9500, /*by_wake=*/true));  // a wakeup preemption is one too
  EXPECT_TRUE(s.on_switch(0, 9800));
  EXPECT_EQ(s.preempted_from, 9500u);
  EXPECT_EQ(s.preempted_to, 9800u);
}

TEST(SwitchState, WakeupPreemptionIsChargedToNoLine) {
  // The first record after a wake is a preempting switch out: the woken
  // thread took the waker's CPU in the hand-off code.
  coz::SwitchState s;
  s.on_switch(kOut | kPreempt, 1000, /*by_wake=*/true);
  s.on_switch(0, 5000);
  EXPECT_EQ(s.take_preempted(), 0u);
  EXPECT_EQ(s.uncharged_ns, 4000u);
  // Its next preemption, with no wake before it, is charged again.
  s.on_switch(kOut | kPreempt, 6000);
  s.on_switch(0, 7000);
  EXPECT_EQ(s.take_preempted(), 1000u);
  EXPECT_EQ(s.uncharged_ns, 4000u);
}

// A blocked sample's call, measured against the intervals the records
// gave: off of its own accord, preempted, and unknown once more intervals
// ended within it than the history keeps, or while a switch out in it has
// no switch in yet.
TEST(SwitchState, OffWithinACallSplitsVoluntaryFromPreemptedTime) {
  coz::SwitchState s;
  uint64_t off = 1, preempted = 1;
  EXPECT_TRUE(s.off_within(0, 1000, &off, &preempted)) << "no switch: never left the CPU";
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(preempted, 0u);
  s.on_switch(kOut, 100);  // blocks
  EXPECT_FALSE(s.off_within(0, 1000, &off, &preempted)) << "still out, as far as the records go";
  s.on_switch(0, 400);
  s.on_switch(kOut | kPreempt, 500);
  s.on_switch(0, 600);
  s.on_switch(kOut, 900);
  s.on_switch(0, 1200);
  ASSERT_TRUE(s.off_within(200, 1000, &off, &preempted));
  EXPECT_EQ(off, 200u + 100u) << "200-400 and 900-1000";
  EXPECT_EQ(preempted, 100u);
  s.take_preempted();
  for (uint64_t at = 2000; at < 2000 + 16 * 100; at += 100) {
    s.on_switch(kOut, at);
    s.on_switch(0, at + 50);
  }
  ASSERT_TRUE(s.off_within(2000, 3600, &off, &preempted)) << "16 intervals: all kept";
  EXPECT_EQ(off, 16u * 50u);
  EXPECT_FALSE(s.off_within(1100, 3600, &off, &preempted)) << "the 17th, 900-1200, is gone";
  EXPECT_TRUE(s.off_within(2150, 3600, &off, &preempted)) << "from after the oldest kept";
  EXPECT_EQ(off, 14u * 50u);
}

TEST(SwitchState, PreemptionFollowedByABlockIsStillChargedToTheNextSample) {
  // Preempted at the end of a line, after its last sample, then blocked: the
  // next sample is usually the same line's, a round later (uncharged, the
  // hand-off test's line came out 10% short of its wall time beside two
  // busy loops).
  coz::SwitchState s;
  s.on_switch(kOut | kPreempt, 1000);
  s.on_switch(0, 3000);
  s.on_switch(kOut, 3500);  // blocks: the wait is voluntary time
  s.on_switch(0, 9500);
  EXPECT_EQ(s.take_preempted(), 2000u);
  EXPECT_EQ(s.uncharged_ns, 0u);
  EXPECT_EQ(s.voluntary_ns, 6000u);
}

// ---- the CPUs a program can use ----

TEST(Cpus, AQuotaIsRoundedUpToWholeCpus) {
  EXPECT_EQ(cpus_of_quota(200000, 100000), 2);
  EXPECT_EQ(cpus_of_quota(150000, 100000), 2);  // 1.5 CPUs: two threads can run at once
  EXPECT_EQ(cpus_of_quota(50000, 100000), 1);
  EXPECT_EQ(cpus_of_quota(-1, 100000), 0);  // cgroup v1's "no quota"
  EXPECT_EQ(cpus_of_quota(100000, 0), 0);
}

namespace {

struct FakeCgroupFs {
  std::string root;
  FakeCgroupFs() {
    char path[] = "/tmp/coz_cgroup_XXXXXX";
    root = mkdtemp(path) ? path : "";
  }
  ~FakeCgroupFs() {
    if (!root.empty()) EXPECT_EQ(system(("rm -rf " + root).c_str()), 0);
  }
  void put(const std::string& dir, const std::string& file, const std::string& text) {
    ASSERT_EQ(system(("mkdir -p " + root + dir).c_str()), 0);
    std::ofstream(root + dir + "/" + file) << text;
  }
};

}  // namespace

TEST(Cpus, CgroupV2TakesTheSmallestCpuMaxOnTheWayUp) {
  FakeCgroupFs fs;
  ASSERT_FALSE(fs.root.empty());
  fs.put("/kubepods/pod1/c1", "cpu.max", "max 100000\n");
  fs.put("/kubepods/pod1", "cpu.max", "300000 100000\n");
  fs.put("/kubepods", "cpu.max", "800000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit("0::/kubepods/pod1/c1\n", fs.root), 3);
  EXPECT_EQ(cgroup_cpu_limit("0::/kubepods\n", fs.root), 8);
  // A container's own view: the path is the host's, its cgroup is the mount's root.
  fs.put("", "cpu.max", "150000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit("0::/docker/0123abcd\n", fs.root), 2);
  EXPECT_EQ(cgroup_cpu_limit("", fs.root), 0);
}

TEST(Cpus, CgroupV1ReadsTheCpuControllersCfsQuota) {
  FakeCgroupFs fs;
  ASSERT_FALSE(fs.root.empty());
  fs.put("/cpu,cpuacct/docker/abc", "cpu.cfs_quota_us", "100000\n");
  fs.put("/cpu,cpuacct/docker/abc", "cpu.cfs_period_us", "100000\n");
  fs.put("/cpu,cpuacct", "cpu.cfs_quota_us", "-1\n");
  fs.put("/cpu,cpuacct", "cpu.cfs_period_us", "100000\n");
  const std::string hybrid = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n";
  EXPECT_EQ(cgroup_cpu_limit(hybrid, fs.root), 1);
  // cpuacct alone is not the controller of the quota; no limit anywhere: none.
  EXPECT_EQ(cgroup_cpu_limit("3:cpuacct:/docker/abc\n", fs.root), 0);
  EXPECT_EQ(cgroup_cpu_limit("4:cpu,cpuacct:/\n", fs.root), 0);
}

TEST(Cpus, TheProgramsCpusAreItsAffinityCappedByItsQuota) {
  UsableCpus u = usable_cpus();
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(u.affinity, CPU_COUNT(&set));
  EXPECT_GE(u.cpus, 1);
  EXPECT_LE(u.cpus, u.affinity);
  if (u.quota > 0) EXPECT_EQ(u.cpus, std::min(u.quota, u.affinity));
  else EXPECT_EQ(u.cpus, u.affinity);
}
