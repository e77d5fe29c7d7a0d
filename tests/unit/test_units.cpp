// Units of virtual speedup (units.cpp, targets.cpp): the index of functions
// and inlined calls, and how recorded callchains count for each unit, with
// the hit rule the sample handler applies (chain_selected), and the origin
// it gives the samples of a library's own thread (add_origin). The fixture
// library is read from its file at a made-up load address: nothing is run.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>

#include "line_map.h"
#include "targets.h"
#include "thread_state.h"
#include "units.h"

namespace {

const std::string kBin = LM_FIXTURE_BIN;
const std::string kSrc = LM_FIXTURE_SRC;
const std::string kLib = kBin + "/liblm_units.so";
const std::string kFile = kSrc + "/fixture_units.c";
constexpr uintptr_t kBias = 0x10000000;

uint32_t marker_line(const std::string& file, const std::string& marker) {
  std::ifstream in(file);
  std::string line;
  for (uint32_t n = 1; std::getline(in, line); n++)
    if (line.find(marker) != std::string::npos) return n;
  return 0;
}

std::string at_marker(const std::string& marker) { return kFile + ":" + std::to_string(marker_line(kFile, marker)); }

bool covers(const std::vector<coz::AddrRange>& rs, uintptr_t pc) {
  for (const auto& r : rs)
    if (pc >= r.start && pc < r.end) return true;
  return false;
}

struct Fixture {
  coz::LineMap lines{{"%liblm_units.so"}, {"%"}};
  Fixture() { EXPECT_TRUE(lines.add_object(kLib, kBias, false)); }
  // An address of the line MARK (any: the rules look at lines, not at
  // instructions).
  uintptr_t pc_of(const std::string& marker) {
    std::vector<const coz::Line*> found = lines.find(at_marker(marker));
    EXPECT_EQ(found.size(), 1u) << marker;
    if (found.empty()) return 0;
    return lines.ranges_of(found[0]).at(0).start;
  }
};

std::vector<std::string> names(coz::UnitIndex& idx, const std::vector<uint32_t>& ids) {
  std::vector<std::string> out;
  for (uint32_t id : ids) out.push_back(idx.function_name(id));
  return out;
}

uint64_t count_of(const coz::Counts& c, const std::string& name) {
  for (const auto& kv : c)
    if (kv.first == name) return kv.second;
  return 0;
}

}  // namespace

TEST(Units, ParseAndName) {
  coz::Unit u;
  EXPECT_TRUE(coz::parse_unit("callsite", &u));
  EXPECT_EQ(u, coz::Unit::kCallsite);
  EXPECT_STREQ(coz::unit_name(coz::Unit::kFunction), "function");
  EXPECT_FALSE(coz::parse_unit("call-site", &u));
}

TEST(Units, InlinedCopiesBelongToTheFunctionAndToTheirCallSites) {
  Fixture f;
  coz::UnitIndex idx([](const std::string&) { return true; }, "");
  ASSERT_TRUE(idx.add_object(kLib, kBias));
  std::vector<uint32_t> inl = idx.find_functions("units_inl");
  ASSERT_EQ(inl.size(), 1u);
  const uint32_t call1 = marker_line(kFile, "MARK_U_INL_CALL1"), call2 = marker_line(kFile, "MARK_U_INL_CALL2");
  auto sites1 = idx.find_callsites("fixture_units.c", call1);
  auto sites2 = idx.find_callsites("fixture_units.c", call2);
  ASSERT_EQ(sites1.size(), 1u);
  ASSERT_EQ(sites2.size(), 1u);
  EXPECT_EQ(sites1[0]->file, kFile);
  // Each inlined copy is code of the function, and of its call's line only.
  for (const auto* site : {sites1[0], sites2[0]}) {
    ASSERT_FALSE(site->ranges.empty());
    uintptr_t pc = site->ranges[0].start;
    EXPECT_TRUE(covers(idx.function_ranges(inl[0]), pc));
    coz::UnitIndex::At at;
    idx.at(pc, &at);
    EXPECT_EQ(names(idx, at.functions), (std::vector<std::string>{"units_inl", "units_outer"}));
    ASSERT_EQ(at.callsites.size(), 1u);
    EXPECT_EQ(at.callsites[0], site);
    EXPECT_FALSE(covers((site == sites1[0] ? sites2 : sites1)[0]->ranges, pc));
  }
  // An out-of-line function's body: one function, no inlined call.
  coz::UnitIndex::At at;
  idx.at(f.pc_of("MARK_U_LEAF"), &at);
  EXPECT_EQ(names(idx, at.functions), (std::vector<std::string>{"units_leaf"}));
  EXPECT_TRUE(at.callsites.empty());
  idx.at(1, &at);  // nowhere
  EXPECT_TRUE(at.functions.empty());
}

TEST(Units, FunctionsOfTwoFilesWithOneNameAreTwoUnitsNamedByTheirFiles) {
  coz::UnitIndex idx([](const std::string&) { return true; }, "");
  ASSERT_TRUE(idx.add_object(kLib, kBias));
  std::vector<uint32_t> same = idx.find_functions("units_same");
  ASSERT_EQ(same.size(), 2u);
  std::vector<std::string> n = names(idx, same);
  std::sort(n.begin(), n.end());
  EXPECT_EQ(n[0], "units_same [" + kFile + "]");
  EXPECT_EQ(n[1], "units_same [" + kSrc + "/fixture_units2.c]");
  // The whole name picks one.
  EXPECT_EQ(idx.find_functions(n[1]).size(), 1u);
  // Outside the source scope: no unit at all.
  coz::UnitIndex narrow([](const std::string& f) { return f.find("units2") == std::string::npos; }, "");
  ASSERT_TRUE(narrow.add_object(kLib, kBias));
  EXPECT_EQ(narrow.find_functions("units_same").size(), 1u);
  EXPECT_EQ(narrow.find_functions("units_same_b").size(), 0u);
}

TEST(Units, FixedFunctionResolvesWholeNamesAndRefusesAmbiguousOnes) {
  Fixture f;
  coz::Targets t(&f.lines, {"function"});
  std::vector<coz::AddrRange> ranges;
  std::string error, hint;
  EXPECT_EQ(t.fixed(coz::Unit::kFunction, "units_same", &ranges, &error, &hint), nullptr);
  EXPECT_NE(error.find("ambiguous"), std::string::npos) << error;
  const coz::Target* one = t.fixed(coz::Unit::kFunction, "units_same [" + kFile + "]", &ranges, &error, &hint);
  ASSERT_NE(one, nullptr) << error;
  EXPECT_FALSE(ranges.empty());
  EXPECT_EQ(t.fixed(coz::Unit::kFunction, "no_such_function", &ranges, &error, &hint), nullptr);
  EXPECT_NE(error.find("matches no function"), std::string::npos) << error;
  const coz::Target* leaf = t.fixed(coz::Unit::kFunction, "units_leaf", &ranges, &error, &hint);
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(leaf->name, "units_leaf");
  EXPECT_TRUE(covers(ranges, f.pc_of("MARK_U_LEAF")));
  // A call site: its line and the code it inlined.
  const coz::Target* site = t.fixed(coz::Unit::kCallsite, "fixture_units.c:" + std::to_string(marker_line(kFile, "MARK_U_INL_CALL2")),
                                    &ranges, &error, &hint);
  ASSERT_NE(site, nullptr) << error;
  EXPECT_EQ(site->name, at_marker("MARK_U_INL_CALL2"));
  EXPECT_EQ(t.fixed(coz::Unit::kCallsite, "fixture_units.c:1", &ranges, &error, &hint), nullptr);
}

// Recorded callchains, innermost first; frame 0 is where the thread was.
TEST(Units, CallSitesCountOncePerSampleAndTheCallersLineIsTheCandidate) {
  Fixture f;
  coz::Targets t(&f.lines, {"line", "function", "callsite"});
  std::mt19937 rng(1);
  const uintptr_t leaf = f.pc_of("MARK_U_LEAF"), call1 = f.pc_of("MARK_U_CALL1"), rec = f.pc_of("MARK_U_REC");

  // Recursion: the recursive call's line is on the chain four times.
  coz::Sample smp;
  smp.n = 0;
  for (uintptr_t pc : {rec, rec, rec, rec, call1}) smp.pcs[smp.n++] = pc;
  std::vector<const coz::Target*> cands;
  t.sample(smp, true, true, &rng, &cands);
  // On the CPU in units_leaf, called from CALL1.
  smp.n = 0;
  for (uintptr_t pc : {leaf, call1}) smp.pcs[smp.n++] = pc;
  for (int i = 0; i < 30; i++) t.sample(smp, true, true, &rng, &cands);
  // In a frameless function of no object in scope (a libc memcpy) called
  // from CALL1: the first in-scope frame is the caller's line.
  smp.n = 0;
  for (uintptr_t pc : {uintptr_t{0x42}, call1}) smp.pcs[smp.n++] = pc;
  for (int i = 0; i < 20; i++) t.sample(smp, true, true, &rng, &cands);

  coz::SamplesRecord rec_counts;
  t.take_counts(&rec_counts);
  EXPECT_TRUE(rec_counts.with_functions && rec_counts.with_callsites);
  EXPECT_EQ(count_of(rec_counts.callsites, at_marker("MARK_U_REC")), 1u) << "once per sample, not per frame";
  EXPECT_EQ(count_of(rec_counts.callsites, at_marker("MARK_U_CALL1")), 51u);
  EXPECT_EQ(count_of(rec_counts.callsites, at_marker("MARK_U_LEAF")), 30u)
      << "a call site's code includes the line's own instructions";
  EXPECT_EQ(count_of(rec_counts.functions, "units_rec"), 1u);
  EXPECT_EQ(count_of(rec_counts.functions, "units_leaf"), 30u) << "the first in-scope frame's function";
  EXPECT_EQ(count_of(rec_counts.functions, "units_caller"), 20u);

  // Candidates: per sample one function and one call site; after the
  // recursion's two, the call-site candidates are the callers' lines,
  // never the line the thread was on.
  ASSERT_EQ(cands.size(), 2u + 100u);
  size_t calls = 0, fns = 0;
  for (size_t i = 2; i < cands.size(); i++) {
    fns += cands[i]->unit == coz::Unit::kFunction;
    if (cands[i]->unit != coz::Unit::kCallsite) continue;
    calls++;
    EXPECT_EQ(cands[i]->name, at_marker("MARK_U_CALL1"));
  }
  EXPECT_EQ(calls, 50u);
  EXPECT_EQ(fns, 50u);
  // The counts were taken: the next record starts from zero.
  coz::SamplesRecord again;
  t.take_counts(&again);
  EXPECT_TRUE(again.callsites.empty());
}

TEST(Units, HitRuleMatchesTheAttribution) {
  Fixture f;
  coz::Targets t(&f.lines, {"function", "callsite"});
  const uintptr_t leaf = f.pc_of("MARK_U_LEAF"), call1 = f.pc_of("MARK_U_CALL1"), call2 = f.pc_of("MARK_U_CALL2");
  const coz::RangeSet* scope = coz::make_range_set(f.lines.attributable_ranges());
  std::vector<coz::AddrRange> r;
  std::string error, hint;
  const coz::RangeSet* site1 = coz::make_range_set(
      t.ranges(t.fixed(coz::Unit::kCallsite, at_marker("MARK_U_CALL1"), &r, &error, &hint)));
  const coz::RangeSet* leaf_fn =
      coz::make_range_set(t.ranges(t.fixed(coz::Unit::kFunction, "units_leaf", &r, &error, &hint)));
  const coz::RangeSet* caller_fn =
      coz::make_range_set(t.ranges(t.fixed(coz::Unit::kFunction, "units_caller", &r, &error, &hint)));
  const uintptr_t via1[] = {leaf, call1}, via2[] = {leaf, call2};
  // Call site: any frame.
  EXPECT_TRUE(coz::chain_selected(site1, scope, true, via1, 2));
  EXPECT_FALSE(coz::chain_selected(site1, scope, true, via2, 2));
  // Function: the first in-scope frame.
  EXPECT_TRUE(coz::chain_selected(leaf_fn, scope, false, via1, 2));
  EXPECT_FALSE(coz::chain_selected(caller_fn, scope, false, via1, 2)) << "an outer frame's function does not count";
  const uintptr_t frameless[] = {0x42, call2};  // 0x42: in no object
  EXPECT_TRUE(coz::chain_selected(caller_fn, scope, false, frameless, 2));
  EXPECT_FALSE(coz::chain_selected(nullptr, scope, true, via1, 2));
}

// A thread a library started itself: its origin (the program's call that
// started it) becomes the outermost frame of a chain with no in-scope frame,
// and then decides the hit; a chain with an in-scope frame, or cut at
// kMaxFrames, is left as it is.
TEST(ThreadOrigin, ChargesChainsWithoutInScopeFrameToTheCall) {
  const coz::RangeSet* scope = coz::make_range_set({{0x1000, 0x2000}});
  const coz::RangeSet* call_line = coz::make_range_set({{0x1100, 0x1108}});
  const uintptr_t origin = 0x1104;
  coz::Sample lib;
  lib.n = 2;
  lib.pcs[0] = 0x9000;  // the library's leaf and its thread's start: out of scope
  lib.pcs[1] = 0x9100;
  EXPECT_FALSE(coz::chain_selected(call_line, scope, false, lib.pcs, lib.n));
  coz::add_origin(origin, scope, &lib);
  ASSERT_EQ(lib.n, 3u);
  EXPECT_EQ(lib.pcs[2], origin);
  EXPECT_TRUE(coz::chain_selected(call_line, scope, false, lib.pcs, lib.n));

  coz::Sample own;  // a callback of the program's, run on that thread
  own.n = 2;
  own.pcs[0] = 0x9000;
  own.pcs[1] = 0x1800;
  coz::add_origin(origin, scope, &own);
  EXPECT_EQ(own.n, 2u);

  coz::Sample none = lib;  // a thread without origin
  none.n = 2;
  coz::add_origin(0, scope, &none);
  EXPECT_EQ(none.n, 2u);

  coz::Sample cut;  // deeper frames unknown: they may be in scope
  cut.n = coz::kMaxFrames;
  for (uint32_t i = 0; i < cut.n; i++) cut.pcs[i] = 0x9000 + i;
  cut.flags = coz::kSampleTruncated;
  coz::add_origin(origin, scope, &cut);
  EXPECT_EQ(cut.n, coz::kMaxFrames);
  EXPECT_NE(cut.pcs[cut.n - 1], origin);
}
