// Tests of the line map on fixture binaries (tests/unit/fixtures, built by
// fixtures.cmake) and on this test binary itself. Expected lines are found
// by their marker comments in the fixture sources, never hard-coded.
#include "line_map.h"

#include "experiment.h"
#include "locks.h"
#include "profile_writer.h"
#include "thread_state.h"
#include "waits.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <linux/perf_event.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <ctime>
#include <functional>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

const std::string kSrc = LM_FIXTURE_SRC;
const std::string kBin = LM_FIXTURE_BIN;
const std::string kFixtureC = kSrc + "/fixture.c";
const std::string kUtilH = kSrc + "/include/fixture_util.h";

// 1-based number of the first line of `path` containing `marker`; 0 if none.
uint32_t marker_line(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string text;
  for (uint32_t n = 1; std::getline(in, text); ++n) {
    if (text.find(marker) != std::string::npos) return n;
  }
  return 0;
}

struct Symbol {
  uintptr_t addr = 0;
  uintptr_t size = 0;
};

// Reads a function symbol from the ELF symbol table (.symtab, else .dynsym).
bool elf_symbol(const std::string& path, const std::string& name, Symbol* out) {
  elf_version(EV_CURRENT);
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  bool found = false;
  for (GElf_Word want : {GElf_Word{SHT_SYMTAB}, GElf_Word{SHT_DYNSYM}}) {
    Elf_Scn* scn = nullptr;
    while (!found && elf && (scn = elf_nextscn(elf, scn))) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || sh.sh_entsize == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
        const char* s = elf_strptr(elf, sh.sh_link, sym.st_name);
        if (s && name == s && GELF_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_value) {
          out->addr = sym.st_value;
          out->size = sym.st_size;
          found = true;
          break;
        }
      }
    }
    if (found) break;
  }
  if (elf) elf_end(elf);
  close(fd);
  return found;
}

Symbol must_symbol(const std::string& path, const std::string& name) {
  Symbol s;
  EXPECT_TRUE(elf_symbol(path, name, &s)) << name << " in " << path;
  return s;
}

bool has_section(const std::string& path, const std::string& name, bool* compressed = nullptr) {
  elf_version(EV_CURRENT);
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  size_t shstrndx = 0;
  bool found = false;
  if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf, scn))) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      const char* s = elf_strptr(elf, shstrndx, sh.sh_name);
      if (s && name == s) {
        found = true;
        if (compressed) *compressed = (sh.sh_flags & SHF_COMPRESSED) != 0;
      }
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return found;
}

// DWARF version of the first unit of a file (0 if none): checks that a
// fixture really is what its name says.
int dwarf_version_of(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return 0;
  Dwarf* dw = dwarf_begin(fd, DWARF_C_READ);
  int version = 0;
  if (dw) {
    Dwarf_CU* next = nullptr;
    Dwarf_Half v = 0;
    uint8_t type = 0;
    Dwarf_Die cudie, sub;
    if (dwarf_get_units(dw, nullptr, &next, &v, &type, &cudie, &sub) == 0) version = v;
    dwarf_end(dw);
  }
  close(fd);
  return version;
}

std::string basename_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }

bool covers(const std::vector<coz::AddrRange>& rs, uintptr_t a) {
  for (const auto& r : rs) {
    if (a >= r.start && a < r.end) return true;
  }
  return false;
}

void expect_line(const coz::Line* line, const std::string& file, uint32_t lineno) {
  ASSERT_NE(line, nullptr) << "expected " << file << ":" << lineno;
  EXPECT_EQ(line->file, file);
  EXPECT_EQ(line->line, lineno);
}

// ---------------------------------------------------------------- scope

TEST(ScopeMatch, LiteralAndWildcards) {
  EXPECT_TRUE(coz::scope_match("app.c", "app.c"));
  EXPECT_FALSE(coz::scope_match("app.c", "app.cc"));
  EXPECT_FALSE(coz::scope_match("app.c", "xapp.c"));
  EXPECT_TRUE(coz::scope_match("%", ""));
  EXPECT_TRUE(coz::scope_match("%", "/any/thing"));
  EXPECT_FALSE(coz::scope_match("", "x"));
  EXPECT_TRUE(coz::scope_match("", ""));
  EXPECT_TRUE(coz::scope_match("%libfoo%", "/usr/lib/libfoo.so.1"));
  EXPECT_FALSE(coz::scope_match("%libfoo%", "/usr/lib/libbar.so.1"));
  EXPECT_TRUE(coz::scope_match("/src/%", "/src/a/b.c"));
  EXPECT_FALSE(coz::scope_match("/src/%", "/other/src/a.c"));
  EXPECT_TRUE(coz::scope_match("%.c", "/x/y.c"));
  EXPECT_FALSE(coz::scope_match("%.c", "/x/y.cpp"));
  // Backtracking: the first 'a' is not the one that lets the rest match.
  EXPECT_TRUE(coz::scope_match("%a%b", "xaxxab"));
  EXPECT_TRUE(coz::scope_match("a%b%c", "aXbYbZc"));
  EXPECT_FALSE(coz::scope_match("a%b%c", "aXcYb"));
  EXPECT_TRUE(coz::scope_match("%%", "abc"));
  // Only '%' is special.
  EXPECT_FALSE(coz::scope_match("a*c", "abc"));
  EXPECT_TRUE(coz::scope_match("a*c", "a*c"));
}

TEST(LineMapScope, DefaultBinaryScopeIsMainOnly) {
  const std::string exe = kBin + "/lm_dwarf5";
  coz::LineMap m({}, {});
  EXPECT_FALSE(m.add_object(exe, 0, false));
  EXPECT_TRUE(m.in_scope_text().empty());
  EXPECT_TRUE(m.add_object(exe, 0, true));
  EXPECT_FALSE(m.in_scope_text().empty());
}

TEST(LineMapEntry, ABreakpointGoesWhereTheLinesStatementBegins) {
  // fixture_stmt.s: line 3 has code at stmt_fn+0 (not a statement start)
  // and at stmt_fn+3 (one). A progress breakpoint at +0 would count only
  // the runs that pass the fragment.
  const std::string exe = kBin + "/lm_stmt";
  coz::LineMap m({}, {"%"});
  ASSERT_TRUE(m.add_object(exe, 0, true));
  Symbol fn = must_symbol(exe, "stmt_fn");
  std::vector<const coz::Line*> three = m.find("fixture_stmt.c:3");
  ASSERT_EQ(three.size(), 1u);
  std::vector<coz::AddrRange> r = m.ranges_of(three[0]);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].start, fn.addr);
  EXPECT_EQ(m.entry_address(three[0]), fn.addr + 3);
  // A line whose rows all start statements: its lowest address.
  std::vector<const coz::Line*> four = m.find("fixture_stmt.c:4");
  ASSERT_EQ(four.size(), 1u);
  EXPECT_EQ(m.entry_address(four[0]), fn.addr + 2);
  EXPECT_EQ(m.entry_address(nullptr), 0u);
}

TEST(LineMapScope, PathPatternsMatchFullPath) {
  coz::LineMap m({"%/lm_dwarf4"}, {"%"});
  EXPECT_FALSE(m.add_object(kBin + "/lm_dwarf5", 0, true));  // MAIN not in scope
  EXPECT_TRUE(m.add_object(kBin + "/lm_dwarf4", 0, false));
  Symbol alpha5 = must_symbol(kBin + "/lm_dwarf5", "fixture_alpha");
  Symbol alpha4 = must_symbol(kBin + "/lm_dwarf4", "fixture_alpha");
  // Both fixtures are PIE at bias 0; only the in-scope one is known.
  EXPECT_EQ(alpha4.addr, alpha5.addr);
  const coz::Line* l = m.lookup(alpha4.addr);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->line, marker_line(kFixtureC, "MARK_ALPHA"));
}

TEST(LineMapScope, UnreadableObjectIsNotInScope) {
  coz::LineMap m({"%"}, {"%"});
  EXPECT_FALSE(m.add_object("linux-vdso.so.1", 0x7fff0000, false));
  EXPECT_FALSE(m.add_object(kBin + "/does-not-exist", 0, true));
  EXPECT_TRUE(m.in_scope_text().empty());
  EXPECT_TRUE(m.objects_without_debug_info().empty());
}

TEST(LineMapScope, SourceScopeFiltersLines) {
  const std::string exe = kBin + "/lm_dwarf5";
  coz::LineMap m({"MAIN"}, {"%/include/%"});
  ASSERT_TRUE(m.add_object(exe, 0, true));
  EXPECT_EQ(m.lookup(must_symbol(exe, "fixture_alpha").addr), nullptr);
  EXPECT_EQ(m.lookup(must_symbol(exe, "fixture_beta").addr), nullptr);
  expect_line(m.lookup(must_symbol(exe, "fixture_gamma").addr), kUtilH,
              marker_line(kUtilH, "MARK_GAMMA"));
  EXPECT_TRUE(m.find("fixture.c:" + std::to_string(marker_line(kFixtureC, "MARK_ALPHA"))).empty());
  EXPECT_EQ(m.find("fixture_util.h:" + std::to_string(marker_line(kUtilH, "MARK_GAMMA"))).size(), 1u);
  // Out of source scope is not "no debug information".
  EXPECT_TRUE(m.objects_without_debug_info().empty());
}

// ------------------------------------------------- fixtures, one per layout

struct Layout {
  const char* exe;        // file given to add_object
  const char* symbols;    // file whose symbol table gives the addresses
  int dwarf_version;      // of the file holding the DWARF
  const char* dwarf_file;
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.exe; }

class LineMapLayout : public ::testing::TestWithParam<Layout> {};

TEST_P(LineMapLayout, FunctionEntriesMapToMarkedLines) {
  const Layout& p = GetParam();
  const std::string exe = kBin + "/" + p.exe;
  const std::string syms = kBin + "/" + p.symbols;
  ASSERT_EQ(dwarf_version_of(kBin + "/" + p.dwarf_file), p.dwarf_version) << "fixture is not what it claims";

  coz::LineMap m({"MAIN"}, {"%"});
  ASSERT_TRUE(m.add_object(exe, 0, true));
  EXPECT_TRUE(m.objects_without_debug_info().empty());

  Symbol alpha = must_symbol(syms, "fixture_alpha");
  Symbol beta = must_symbol(syms, "fixture_beta");
  Symbol gamma = must_symbol(syms, "fixture_gamma");
  Symbol use_mix = must_symbol(syms, "fixture_use_mix");
  expect_line(m.lookup(alpha.addr), kFixtureC, marker_line(kFixtureC, "MARK_ALPHA"));
  expect_line(m.lookup(beta.addr), kFixtureC, marker_line(kFixtureC, "MARK_BETA"));
  // Relative DWARF name under a relative -I folder: absolute, normalized.
  expect_line(m.lookup(gamma.addr), kUtilH, marker_line(kUtilH, "MARK_GAMMA"));
  expect_line(m.lookup(use_mix.addr), kFixtureC, marker_line(kFixtureC, "MARK_USE_MIX"));

  // Reverse index: the range of the looked-up line covers the address.
  const coz::Line* la = m.lookup(alpha.addr);
  ASSERT_NE(la, nullptr);
  std::vector<coz::AddrRange> r = m.ranges_of(la);
  EXPECT_TRUE(covers(r, alpha.addr));
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_LT(r[i].start, r[i].end);
    if (i) EXPECT_LT(r[i - 1].end, r[i].start) << "ranges must be sorted and merged";
  }

  // The always-inlined body is reported as its own (innermost) line, and
  // only inside its caller (there is no out-of-line copy).
  EXPECT_FALSE(elf_symbol(syms, "fixture_mix", &alpha));
  auto body = m.find("fixture.c:" + std::to_string(marker_line(kFixtureC, "MARK_INLINE_BODY")));
  ASSERT_EQ(body.size(), 1u);
  std::vector<coz::AddrRange> br = m.ranges_of(body[0]);
  ASSERT_FALSE(br.empty());
  for (const auto& x : br) {
    EXPECT_GE(x.start, use_mix.addr);
    EXPECT_LE(x.end, use_mix.addr + use_mix.size);
    EXPECT_EQ(m.lookup(x.start), body[0]);
    EXPECT_EQ(m.lookup(x.end - 1), body[0]);
  }

  // Outside the object's text: nothing.
  EXPECT_EQ(m.lookup(0), nullptr);
  EXPECT_EQ(m.lookup(UINTPTR_MAX - 16), nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, LineMapLayout,
    ::testing::Values(Layout{"lm_dwarf2", "lm_dwarf2", 2, "lm_dwarf2"},
                      Layout{"lm_dwarf4", "lm_dwarf4", 4, "lm_dwarf4"},
                      Layout{"lm_dwarf5", "lm_dwarf5", 5, "lm_dwarf5"},
                      Layout{"lm_gz", "lm_gz", 5, "lm_gz"},
                      Layout{"lm_nopie", "lm_nopie", 5, "lm_nopie"},
                      Layout{"lm_debuglink", "lm_debuglink.debug", 5, "lm_debuglink.debug"}),
    [](const ::testing::TestParamInfo<Layout>& i) { return std::string(i.param.exe).substr(3); });

TEST(LineMapFixtures, FixturesHaveTheClaimedLayout) {
  bool compressed = false;
  ASSERT_TRUE(has_section(kBin + "/lm_gz", ".debug_info", &compressed));
  EXPECT_TRUE(compressed);
  EXPECT_FALSE(has_section(kBin + "/lm_debuglink", ".debug_info"));
  EXPECT_TRUE(has_section(kBin + "/lm_debuglink", ".gnu_debuglink"));
  EXPECT_FALSE(has_section(kBin + "/lm_buildid", ".debug_info"));
  EXPECT_FALSE(has_section(kBin + "/lm_buildid", ".gnu_debuglink"));
  EXPECT_FALSE(has_section(kBin + "/lm_nodebug", ".debug_line"));
  // Non-PIE: linked at its own address, not at 0.
  EXPECT_GE(must_symbol(kBin + "/lm_nopie", "fixture_alpha").addr, 0x400000u);
}

TEST(LineMapFixtures, LoadBiasIsApplied) {
  const std::string exe = kBin + "/lm_dwarf5";
  const uintptr_t bias = 0x7f1234560000;
  coz::LineMap m({"MAIN"}, {"%"});
  ASSERT_TRUE(m.add_object(exe, bias, true));
  Symbol alpha = must_symbol(exe, "fixture_alpha");
  EXPECT_TRUE(covers(m.in_scope_text(), alpha.addr + bias));
  EXPECT_FALSE(covers(m.in_scope_text(), alpha.addr));
  EXPECT_EQ(m.lookup(alpha.addr), nullptr);
  const coz::Line* l = m.lookup(alpha.addr + bias);
  expect_line(l, kFixtureC, marker_line(kFixtureC, "MARK_ALPHA"));
  EXPECT_TRUE(covers(m.ranges_of(l), alpha.addr + bias));
}

TEST(LineMapFixtures, AnUnloadedObjectsAddressesMapNoLineAndTheNextObjectThereIsRead) {
  // A plugin unloaded (dlclose), then another loaded at the same address:
  // the second's code must not be read with the first's lines.
  const std::string a = kBin + "/lm_dwarf5", b = kBin + "/lm_o2";
  const uintptr_t bias = 0x7f1234560000;
  coz::LineMap m({"%lm_%"}, {"%"});
  ASSERT_TRUE(m.add_object(a, bias, false));
  Symbol alpha = must_symbol(a, "fixture_alpha");
  const coz::Line* l = m.lookup(alpha.addr + bias);
  expect_line(l, kFixtureC, marker_line(kFixtureC, "MARK_ALPHA"));
  ASSERT_TRUE(covers(m.ranges_of(l), alpha.addr + bias));
  m.remove_object(a, bias);
  EXPECT_EQ(m.lookup(alpha.addr + bias), nullptr);
  EXPECT_FALSE(covers(m.ranges_of(l), alpha.addr + bias));
  EXPECT_FALSE(covers(m.attributable_ranges(), alpha.addr + bias));
  EXPECT_EQ(m.find("fixture.c:" + std::to_string(marker_line(kFixtureC, "MARK_ALPHA"))).size(), 0u);
  // The next object there is registered anew and read with its own table.
  ASSERT_TRUE(m.add_object(b, bias, false));
  Symbol use_mix = must_symbol(b, "fixture_use_mix");
  expect_line(m.lookup(use_mix.addr + bias), kFixtureC, marker_line(kFixtureC, "MARK_INLINE_BODY"));
  EXPECT_TRUE(covers(m.attributable_ranges(), use_mix.addr + bias));
  // Removing what is not registered, or the main program, changes nothing.
  m.remove_object(a, bias);
  m.remove_object(b, bias + 4096);
  expect_line(m.lookup(use_mix.addr + bias), kFixtureC, marker_line(kFixtureC, "MARK_INLINE_BODY"));
}

TEST(LineMapFixtures, OptimizedEntryIsInnermostInlinedLine) {
  // At -O2 the first instruction of fixture_use_mix already belongs to the
  // inlined fixture_mix: the line table's (innermost) line is reported.
  const std::string exe = kBin + "/lm_o2";
  coz::LineMap m({"MAIN"}, {"%"});
  ASSERT_TRUE(m.add_object(exe, 0, true));
  Symbol use_mix = must_symbol(exe, "fixture_use_mix");
  const uint32_t body = marker_line(kFixtureC, "MARK_INLINE_BODY");
  expect_line(m.lookup(use_mix.addr), kFixtureC, body);
  auto lines = m.find("fixture.c:" + std::to_string(body));
  ASSERT_EQ(lines.size(), 1u);
  for (const auto& x : m.ranges_of(lines[0])) {
    EXPECT_GE(x.start, use_mix.addr);
    EXPECT_LE(x.end, use_mix.addr + use_mix.size);
  }
}

TEST(LineMapFixtures, FindMatchesPathSuffixAtSlash) {
  const std::string exe = kBin + "/lm_dwarf5";
  coz::LineMap m({"MAIN"}, {"%"});
  ASSERT_TRUE(m.add_object(exe, 0, true));
  const std::string n = std::to_string(marker_line(kFixtureC, "MARK_ALPHA"));
  auto a = m.find("fixture.c:" + n);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]->file, kFixtureC);
  EXPECT_EQ(a[0]->name(), kFixtureC + ":" + n);
  EXPECT_EQ(m.find(kFixtureC + ":" + n), a);           // absolute
  EXPECT_EQ(m.find("./fixture.c:" + n), a);            // leading ./
  EXPECT_EQ(m.find("fixtures/fixture.c:" + n), a);     // longer suffix
  EXPECT_TRUE(m.find("ixture.c:" + n).empty());        // not at a '/'
  EXPECT_TRUE(m.find("/fixture.c:" + n).empty());      // absolute, other file
  EXPECT_TRUE(m.find("other/fixture.c:" + n).empty());
  EXPECT_TRUE(m.find("fixture.c:999999").empty());
  EXPECT_TRUE(m.find("fixture.c").empty());
  EXPECT_TRUE(m.find("fixture.c:12x").empty());
  EXPECT_TRUE(m.find(":12").empty());
  // The found line is the same interned Line lookup returns.
  EXPECT_EQ(m.lookup(must_symbol(exe, "fixture_alpha").addr), a[0]);
  EXPECT_TRUE(covers(m.ranges_of(a[0]), must_symbol(exe, "fixture_alpha").addr));
}

TEST(LineMapFixtures, ReportsObjectsWithoutDebugInfo) {
  coz::LineMap m({"%/lm_nodebug", "%/lm_dwarf4"}, {"%"});
  ASSERT_TRUE(m.add_object(kBin + "/lm_nodebug", 0, false));
  ASSERT_TRUE(m.add_object(kBin + "/lm_dwarf4", 0x100000000, false));
  EXPECT_EQ(m.objects_without_debug_info(), std::vector<std::string>{kBin + "/lm_nodebug"});
  EXPECT_EQ(m.lookup(must_symbol(kBin + "/lm_nodebug", "fixture_alpha").addr), nullptr);
  EXPECT_NE(m.lookup(must_symbol(kBin + "/lm_dwarf4", "fixture_alpha").addr + 0x100000000), nullptr);
}

// With no descriptor left, the object's file cannot be opened: that is said
// as such, not as an object without debug information.
TEST(LineMapFixtures, AnObjectThatCouldNotBeOpenedIsNotCalledOneWithoutDebugInfo) {
  coz::LineMap m({"%/lm_dwarf4"}, {"%"});
  ASSERT_TRUE(m.add_object(kBin + "/lm_dwarf4", 0, false));
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = dup(0)) >= 0;) fillers.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  std::vector<std::pair<std::string, int>> not_opened = m.objects_not_opened();
  std::vector<std::string> without = m.objects_without_debug_info();
  for (int fd : fillers) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(not_opened, (std::vector<std::pair<std::string, int>>{{kBin + "/lm_dwarf4", EMFILE}}));
  EXPECT_TRUE(without.empty());
}

TEST(LineMapFixtures, SeparateDebugFileByBuildId) {
  const std::string exe = kBin + "/lm_buildid";
  Symbol alpha = must_symbol(exe, "fixture_alpha");  // --strip-debug keeps .symtab
  {
    // Not under the default debug roots: no line information.
    coz::LineMap m({"MAIN"}, {"%"});
    ASSERT_TRUE(m.add_object(exe, 0, true));
    EXPECT_EQ(m.objects_without_debug_info(), std::vector<std::string>{exe});
    EXPECT_EQ(m.lookup(alpha.addr), nullptr);
  }
  coz::LineMap m({"MAIN"}, {"%"});
  m.set_debuginfo_path(":.debug:" + kBin + "/buildid_root");
  ASSERT_TRUE(m.add_object(exe, 0, true));
  EXPECT_TRUE(m.objects_without_debug_info().empty());
  expect_line(m.lookup(alpha.addr), kFixtureC, marker_line(kFixtureC, "MARK_ALPHA"));
}

TEST(LineMapFixtures, DwzAlternateDebugFile) {
#ifndef LM_HAVE_DWZ
  GTEST_SKIP() << "dwz was not found when the build was configured";
#else
  const std::string exe = kBin + "/lm_dwz_a";
  ASSERT_TRUE(has_section(exe, ".gnu_debugaltlink"));
  coz::LineMap m({"MAIN"}, {"%"});
  ASSERT_TRUE(m.add_object(exe, 0, true));
  EXPECT_TRUE(m.objects_without_debug_info().empty());
  expect_line(m.lookup(must_symbol(exe, "fixture_alpha").addr), kFixtureC,
              marker_line(kFixtureC, "MARK_ALPHA"));
  expect_line(m.lookup(must_symbol(exe, "fixture_gamma").addr), kUtilH,
              marker_line(kUtilH, "MARK_GAMMA"));
#endif
}

TEST(LineMapFixtures, ObjectsAddedFromAnotherThread) {
  // A library registered later (dlopen hook, another thread) while the
  // profiler thread is looking up.
  coz::LineMap m({"MAIN", "%/lm_dwarf4"}, {"%"});
  ASSERT_TRUE(m.add_object(kBin + "/lm_dwarf5", 0, true));
  const uintptr_t bias4 = 0x200000000;
  Symbol alpha = must_symbol(kBin + "/lm_dwarf5", "fixture_alpha");
  std::thread t([&] { EXPECT_TRUE(m.add_object(kBin + "/lm_dwarf4", bias4, false)); });
  for (int i = 0; i < 100; ++i) ASSERT_NE(m.lookup(alpha.addr), nullptr);
  t.join();
  const coz::Line* a = m.lookup(alpha.addr);
  const coz::Line* b = m.lookup(alpha.addr + bias4);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a, b);  // same file:line in both objects: one interned Line
  auto r = m.ranges_of(a);
  EXPECT_TRUE(covers(r, alpha.addr));
  EXPECT_TRUE(covers(r, alpha.addr + bias4));
}

// ---------------------------------------------------- this very process

__attribute__((noinline)) int line_map_in_process_marker(int x) { return x * 31337 + 11; }  // MARK_IN_PROCESS

int main_object_bias(struct dl_phdr_info* info, size_t, void* out) {
  *static_cast<uintptr_t*>(out) = info->dlpi_addr;
  return 1;  // the first object is the main program
}

TEST(LineMapInProcess, LooksUpAFunctionOfThisFile) {
  uintptr_t bias = 0;
  dl_iterate_phdr(main_object_bias, &bias);
  coz::LineMap m({"MAIN"}, {"%"});
  ASSERT_TRUE(m.add_object("", bias, true));  // "" : /proc/self/exe
  EXPECT_TRUE(m.objects_without_debug_info().empty());
  const uintptr_t pc = reinterpret_cast<uintptr_t>(&line_map_in_process_marker);
  EXPECT_TRUE(covers(m.in_scope_text(), pc));
  const coz::Line* l = m.lookup(pc);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(basename_of(l->file), "test_line_map.cpp");
  EXPECT_EQ(l->file[0], '/');
  EXPECT_EQ(l->line, marker_line(__FILE__, "MARK_IN_" "PROCESS"));
  EXPECT_TRUE(covers(m.ranges_of(l), pc));
  EXPECT_EQ(line_map_in_process_marker(1), 31348);  // keep it alive
}

struct FindLib {
  const char* suffix;
  std::string path;
  uintptr_t bias = 0;
  bool found = false;
};

int find_lib(struct dl_phdr_info* info, size_t, void* data) {
  FindLib* f = static_cast<FindLib*>(data);
  std::string name = info->dlpi_name ? info->dlpi_name : "";
  if (name.size() >= strlen(f->suffix) &&
      name.compare(name.size() - strlen(f->suffix), std::string::npos, f->suffix) == 0) {
    f->path = name;
    f->bias = info->dlpi_addr;
    f->found = true;
    return 1;
  }
  return 0;
}

TEST(LineMapInProcess, LibraryLoadedWithDlopen) {
  const std::string lib = kBin + "/liblm_fixture.so";
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  FindLib f{"/liblm_fixture.so"};
  dl_iterate_phdr(find_lib, &f);
  ASSERT_TRUE(f.found);
  ASSERT_NE(f.bias, 0u);  // a shared library is never loaded at its link address 0
  coz::LineMap m({"MAIN", "%/liblm_fixture.so"}, {"%"});
  EXPECT_TRUE(m.add_object(f.path, f.bias, false));
  const uintptr_t pc = reinterpret_cast<uintptr_t>(dlsym(h, "fixture_lib_fn"));
  ASSERT_NE(pc, 0u);
  const std::string src = kSrc + "/fixture_lib.c";
  const coz::Line* l = m.lookup(pc);
  expect_line(l, src, marker_line(src, "MARK_LIB_FN"));
  EXPECT_TRUE(covers(m.ranges_of(l), pc));
  // Its symbol-table address (link-time) is not a run-time address.
  EXPECT_EQ(pc - f.bias, must_symbol(lib, "fixture_lib_fn").addr);
  dlclose(h);
}

}  // namespace

// The profiler thread must not hold the thread registry's lock (which
// pthread_create and fork take) while it reads DWARF: only the copy of the
// threads' samples happens under it.
TEST(LineMapInProcess, SamplesAreSymbolizedOutsideTheRegistryLock) {
  uintptr_t bias = 0;
  dl_iterate_phdr(main_object_bias, &bias);
  coz::LineMap m({"MAIN"}, {"%"});
  ASSERT_TRUE(m.add_object("", bias, true));
  coz::ThreadState t;
  coz::Sample smp;
  smp.pcs[0] = reinterpret_cast<uintptr_t>(&line_map_in_process_marker);
  smp.n = 1;
  ASSERT_TRUE(t.ring.push(smp));
  // Thread CPU time, so that being preempted on a busy machine counts for nothing.
  auto cpu_ns = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  };
  uint64_t held_ns = 0;
  coz::ProfilerHooks hooks;
  hooks.for_each_thread = [&](const std::function<void(coz::ThreadState*)>& fn) {
    uint64_t start = cpu_ns();
    fn(&t);  // the registry lock would be held around this
    held_ns += cpu_ns() - start;
  };
  coz::ProfileWriter w;
  coz::Profiler p(coz::Config{}, &m, &w, hooks);
  uint64_t start = cpu_ns();
  p.drain();  // the first lookup reads this 8 MB test binary's line tables
  uint64_t drain_ns = cpu_ns() - start;
  EXPECT_TRUE(t.ring.empty());
  EXPECT_LT(held_ns * 20, drain_ns) << "held " << held_ns << " ns of a " << drain_ns << " ns drain";
}

__attribute__((noinline)) int line_choice_fn_a(int x) { return x * 3 + 1; }  // MARK_CHOICE_A
__attribute__((noinline)) int line_choice_fn_b(int x) { return x * 5 + 2; }  // MARK_CHOICE_B

// A profiler over this test binary's lines and one thread's ring, for the
// line choice tests: push samples of a function, drain, then choose.
struct LineChoiceRig {
  coz::LineMap map{{"MAIN"}, {"%"}};
  coz::ThreadState thread;
  coz::ProfileWriter writer;
  std::unique_ptr<coz::Profiler> profiler;
  LineChoiceRig() {
    uintptr_t bias = 0;
    dl_iterate_phdr(main_object_bias, &bias);
    EXPECT_TRUE(map.add_object("", bias, true));
    coz::ProfilerHooks hooks;
    hooks.for_each_thread = [this](const std::function<void(coz::ThreadState*)>& fn) { fn(&thread); };
    profiler = std::make_unique<coz::Profiler>(coz::Config{}, &map, &writer, hooks);
  }
  void push(int (*fn)(int), int count, uint32_t flags = 0) {
    coz::Sample smp;
    smp.n = 1;
    smp.pcs[0] = reinterpret_cast<uintptr_t>(fn);
    smp.flags = flags;
    for (int i = 0; i < count; i++) ASSERT_TRUE(thread.ring.push(smp));
  }
};

// Samples taken while an experiment paused the other threads over-represent
// the sped-up line: line choice draws from the others whenever there are any.
TEST(LineMapInProcess, LineChoiceIgnoresSamplesTakenWhileOthersWerePaused) {
  LineChoiceRig rig;
  rig.push(&line_choice_fn_a, 3);
  rig.push(&line_choice_fn_b, 30, coz::kSampleDelaying);
  rig.profiler->drain();
  const coz::Line* a = rig.map.lookup(reinterpret_cast<uintptr_t>(&line_choice_fn_a));
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 50; i++) EXPECT_EQ(rig.profiler->pick()->line, a);
  EXPECT_EQ(line_choice_fn_a(1) + line_choice_fn_b(1), 11);
}

// The first experiment waits for 16 periods of undisturbed samples, or
// 100 ms after the first sample with a line: a line drawn from the first
// sample or two is drawn by chance.
TEST(LineMapInProcess, TheFirstLineIsChosenFromSixteenPeriodsOfSamples) {
  LineChoiceRig rig;
  coz::Profiler& p = *rig.profiler;
  EXPECT_FALSE(p.can_choose()) << "no sample yet";
  rig.push(&line_choice_fn_a, 3);
  rig.push(&line_choice_fn_a, 30, coz::kSampleDelaying);  // disturbed samples do not count
  p.drain();
  EXPECT_FALSE(p.can_choose()) << "3 undisturbed periods";
  rig.push(&line_choice_fn_a, 13);
  p.drain();
  EXPECT_TRUE(p.can_choose()) << "16 undisturbed periods";

  LineChoiceRig late;
  late.push(&line_choice_fn_a, 1);
  late.profiler->drain();
  EXPECT_FALSE(late.profiler->can_choose()) << "1 period, just taken";
  std::this_thread::sleep_for(std::chrono::milliseconds(110));
  late.profiler->drain();
  EXPECT_TRUE(late.profiler->can_choose()) << "1 period, 110 ms ago";
}

// A thread that ends while a drain looks at it (after the drain read its
// state) is the next drain's: its state is not recycled before a drain has
// taken its final lock counts (CI once lost a worker's million acquisitions
// that way: its state was recycled with its table unread).
TEST(ProfilerDrain, AThreadEndingDuringALookIsRetiredByTheNextOne) {
  coz::LineMap m({"MAIN"}, {"%"});
  coz::ThreadState t;
  t.tid = 12345;
  static int object;
  coz::lock_acquired(&t, coz::LockKind::kMutex, &object, 0x1000, false, 0);
  coz::lock_released(&t, &object);
  ASSERT_NE(t.locks, nullptr);
  bool end_during_look = true;
  coz::ProfilerHooks hooks;
  hooks.for_each_thread = [&](const std::function<void(coz::ThreadState*)>& fn) {
    fn(&t);
    if (end_during_look) t.state.store(coz::kThreadEnded);  // its last act, just after the look
  };
  coz::ProfileWriter w;
  coz::Profiler p(coz::Config{}, &m, &w, hooks);
  p.drain();
  EXPECT_FALSE(coz::recyclable(t)) << "ended after the look: its counts are not taken yet";
  EXPECT_NE(t.locks, nullptr);
  end_during_look = false;
  p.drain();
  EXPECT_EQ(t.state.load(), coz::kThreadRetired);
  EXPECT_EQ(t.locks, nullptr) << "its final counts taken, its table freed";
  EXPECT_TRUE(coz::recyclable(t));
}

// A thread's CPU-ring records, given to the profiler at its next take of
// the rings (ProfilerHooks::take_cpu_records).
struct CpuRingFeed {
  uint32_t tid;
  std::vector<char> records;
  void hook(coz::ProfilerHooks* hooks) {
    hooks->take_cpu_records = [this](std::vector<char>* out, std::vector<coz::ThreadRecords>* chunks, uint64_t*) {
      if (records.empty()) return;
      chunks->push_back({static_cast<pid_t>(tid), out->size(), records.size()});
      out->insert(out->end(), records.begin(), records.end());
      records.clear();
    };
  }
  // A switch record: header, then sample_id's pid, tid and time.
  void add_switch(uint16_t misc, uint64_t time) {
    struct {
      perf_event_header hdr;
      uint32_t pid, tid;
      uint64_t time;
    } rec = {{PERF_RECORD_SWITCH, misc, 24}, tid, tid, time};
    static_assert(sizeof rec == 24, "packed as the kernel writes it");
    const char* bytes = reinterpret_cast<const char*>(&rec);
    records.insert(records.end(), bytes, bytes + sizeof rec);
  }
};

// The profile a profiler writes while `looks` drains it.
std::string profile_written(const coz::Config& config, coz::LineMap* m, const coz::ProfilerHooks& hooks,
                            const std::function<void(coz::Profiler&)>& looks) {
  char path[] = "/tmp/coz-test-drain-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  close(fd);
  {
    coz::ProfileWriter w;
    std::string error;
    if (!w.open(path, false, &error)) return error;
    coz::Profiler p(config, m, &w, hooks);
    looks(p);
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  return text;
}

// Sampling-only: a CPU ring's records that come after their thread ended
// and was written (its exit path runs on after the runtime's end hook)
// make no thread entry. They made one per thread ended, kept for the rest
// of the run, and the run's end wrote each as a thread of tid 0 from time 0.
TEST(ProfilerDrain, LateRingRecordsOfAnEndedThreadMakeNoEntry) {
  coz::LineMap m({"MAIN"}, {"%"});
  coz::ThreadState t;
  t.tid = 4242;
  t.start_ns = 1;
  bool listed = true;
  CpuRingFeed late{4242, {}};  // the CPU rings' next records
  coz::ProfilerHooks hooks;
  hooks.for_each_thread = [&](const std::function<void(coz::ThreadState*)>& fn) {
    if (listed) fn(&t);
  };
  late.hook(&hooks);
  coz::Config config;
  config.sampling_only = true;
  coz::ProfileWriter w;
  coz::Profiler p(config, &m, &w, hooks);
  p.drain();
  EXPECT_EQ(p.threads_known(), 1u);
  t.state.store(coz::kThreadEnded);
  p.drain();
  EXPECT_EQ(p.threads_known(), 0u) << "ended and written";
  listed = false;  // recycled
  late.add_switch(PERF_RECORD_MISC_SWITCH_OUT, 5);  // its switch out at exit
  p.drain();
  EXPECT_TRUE(late.records.empty()) << "the records were taken";
  p.drain();  // (a tid not known waits for one more look)
  EXPECT_EQ(p.threads_known(), 0u) << "no entry for a thread no longer known";
}

// Sampling-only: a blocked sample stands in the stacks for its call's time
// off the CPU, which the profiler thread reads from the thread's switch
// records, and the call's time on the CPU (the kernel's work) goes to the
// CPU stacks under coz_kernel_in_io; its time preempted is neither (the
// next CPU sample's `sched`). A 1 MiB pwrite to a file in memory never
// leaves the CPU: its io samples were the kernel's CPU time.
TEST(ProfilerDrain, ABlockedSampleKeepsItsCallsTimeOffTheCpu) {
  coz::LineMap m({"MAIN"}, {"%"});
  coz::ThreadState t;
  t.tid = 4343;
  t.start_ns = 1;
  CpuRingFeed feed{4343, {}};
  coz::ProfilerHooks hooks;
  hooks.for_each_thread = [&](const std::function<void(coz::ThreadState*)>& fn) { fn(&t); };
  feed.hook(&hooks);
  auto switch_record = [&](uint16_t misc, uint64_t time) { feed.add_switch(misc, time); };
  constexpr uint64_t ms = 1000000;
  // The call: 6 to 10 ms. Off of its own accord 7 to 9 ms, preempted 9.5
  // to 9.9 ms: 2 ms off, 0.4 ms preempted, 1.6 ms on the CPU.
  switch_record(PERF_RECORD_MISC_SWITCH_OUT, 7 * ms);
  switch_record(0, 9 * ms);
  switch_record(PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT, 9 * ms + ms / 2);
  switch_record(0, 9 * ms + 9 * ms / 10);
  // Then, before the look, 40 short blocks of the thread (a busy server's
  // worker switches a thousand times a look): more than the thread state's
  // own 16 intervals, which read the call as not known, and counted it whole.
  for (uint64_t at = 30 * ms; at < 70 * ms; at += ms) {
    switch_record(PERF_RECORD_MISC_SWITCH_OUT, at);
    switch_record(0, at + ms / 2);
  }
  coz::Sample smp;
  smp.n = 1;
  smp.pcs[0] = reinterpret_cast<uintptr_t>(&line_choice_fn_a);
  smp.flags = (static_cast<uint32_t>(coz::WaitKind::kIo) + 1) << coz::kSampleKindShift;
  smp.weight_ns = 10 * ms;  // ten periods of io, carried over its calls
  smp.call_end_ns = 10 * ms;
  smp.call_ns = 4 * ms;
  ASSERT_TRUE(t.ring.push(smp));
  // A call that never left the CPU (no switch record in it): io no more.
  smp.weight_ns = 3 * ms;
  smp.call_end_ns = 20 * ms;
  smp.call_ns = ms;
  ASSERT_TRUE(t.ring.push(smp));
  coz::Config config;
  config.sampling_only = true;
  std::string text = profile_written(config, &m, hooks, [&](coz::Profiler& p) {
    p.drain();
    t.state.store(coz::kThreadEnded);
    p.drain();
  });
  // io: 5 ms of the first sample's 10 (2 ms off of its call's 4), none of
  // the second's. CPU: 4 ms of the first (1.6 of 4), 3 ms of the second.
  EXPECT_NE(text.find("\"kind\":\"io\""), std::string::npos) << text;
  EXPECT_NE(text.find("[1,5,5000000]"), std::string::npos) << text;
  EXPECT_NE(text.find("[2,7,7000000]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"call_cpu_ns\":7000000"), std::string::npos) << text;
  EXPECT_NE(text.find("\"io\":0,"), std::string::npos) << "the thread's waits are its own counters' " << text;
}

// Sampling-only: the CPU rings hold a thread's records from its start, and
// a thread that started after the profiler's look at the threads is not
// known when its first records are parsed. Those (here the switch out of
// its first wait) were parsed into a throwaway state: the wait's switch in
// came alone, the call read as never off the CPU, and a short_tasks thread
// that slept 120 ms on a semaphore showed 120 ms of kernel CPU time in the
// call (about one run in three under a competing busy loop). They wait for
// the next look now.
TEST(ProfilerDrain, RecordsOfAThreadNotYetKnownWaitForItsLook) {
  coz::LineMap m({"MAIN"}, {"%"});
  coz::ThreadState t;
  t.tid = 4545;
  t.start_ns = 1;
  bool listed = false;
  CpuRingFeed feed{4545, {}};
  coz::ProfilerHooks hooks;
  hooks.for_each_thread = [&](const std::function<void(coz::ThreadState*)>& fn) {
    if (listed) fn(&t);
  };
  feed.hook(&hooks);
  auto switch_record = [&](uint16_t misc, uint64_t time) { feed.add_switch(misc, time); };
  constexpr uint64_t ms = 1000000;
  coz::Config config;
  config.sampling_only = true;
  std::string text = profile_written(config, &m, hooks, [&](coz::Profiler& p) {
    // The call: 6 to 10 ms, off the CPU of its own accord 7 to 9 ms. The
    // switch out is taken at a look that does not list the thread yet.
    switch_record(PERF_RECORD_MISC_SWITCH_OUT, 7 * ms);
    p.drain();
    EXPECT_TRUE(feed.records.empty());
    listed = true;
    switch_record(0, 9 * ms);
    coz::Sample smp;
    smp.n = 1;
    smp.pcs[0] = reinterpret_cast<uintptr_t>(&line_choice_fn_a);
    smp.flags = (static_cast<uint32_t>(coz::WaitKind::kIo) + 1) << coz::kSampleKindShift;
    smp.weight_ns = 4 * ms;
    smp.call_end_ns = 10 * ms;
    smp.call_ns = 4 * ms;
    EXPECT_TRUE(t.ring.push(smp));
    p.drain();
    t.state.store(coz::kThreadEnded);
    p.drain();
  });
  // io: 2 ms (off 7 to 9); CPU in the call: the other 2 ms, not all 4.
  EXPECT_NE(text.find("[1,2,2000000]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"call_cpu_ns\":2000000"), std::string::npos) << text;
}

TEST(SampleRing, VariableLengthRecordsWrapAroundAndFill) {
  coz::SampleRing r;
  coz::Sample in, out;
  in.weight_ns = 1000000;
  in.wait_ns = 7;
  in.flags = coz::kSampleTruncated;
  uint64_t pushed = 0, popped = 0;
  for (int round = 0; round < 500; round++) {  // many times around the 2048 words
    in.n = 1 + round % static_cast<int>(coz::kMaxFrames);
    for (uint32_t i = 0; i < in.n; i++) in.pcs[i] = 1000u * round + i;
    ASSERT_TRUE(r.push(in));
    pushed++;
    ASSERT_TRUE(r.pop(&out));
    popped++;
    ASSERT_EQ(out.n, in.n);
    EXPECT_EQ(out.weight_ns, in.weight_ns);
    EXPECT_EQ(out.wait_ns, 7u);
    EXPECT_EQ(out.flags, static_cast<uint32_t>(coz::kSampleTruncated));
    EXPECT_EQ(out.pcs[out.n - 1], in.pcs[in.n - 1]);
  }
  EXPECT_TRUE(r.empty());
  in.n = coz::kMaxFrames;
  int fit = 0;
  while (r.push(in)) fit++;
  EXPECT_EQ(fit, static_cast<int>(coz::SampleRing::kWords / (3 + coz::kMaxFrames))) << "full: refused, not overwritten";
  EXPECT_EQ(pushed, popped);
}

// A blocked sample carries its call's end, length and time off the CPU
// (four more words); a CPU sample does not.
TEST(SampleRing, ABlockedSampleCarriesItsCall) {
  coz::SampleRing r;
  coz::Sample in, out;
  in.n = 2;
  in.pcs[0] = 11;
  in.pcs[1] = 22;
  in.weight_ns = 3000000;
  in.flags = 3u << coz::kSampleKindShift;
  in.call_end_ns = 123456789;
  in.call_ns = 4567;
  in.call_off_ns = 4000;
  in.call_preempted_ns = 300;
  ASSERT_TRUE(r.push(in));
  in.flags = 0;
  in.call_end_ns = in.call_ns = 99;
  ASSERT_TRUE(r.push(in));
  ASSERT_TRUE(r.pop(&out));
  EXPECT_EQ(out.call_end_ns, 123456789u);
  EXPECT_EQ(out.call_ns, 4567u);
  EXPECT_EQ(out.call_off_ns, 4000u);
  EXPECT_EQ(out.call_preempted_ns, 300u);
  EXPECT_EQ(out.pcs[1], 22u);
  ASSERT_TRUE(r.pop(&out));
  EXPECT_EQ(out.call_end_ns, 0u) << "a CPU sample has no call";
  EXPECT_EQ(out.call_off_ns, coz::Sample::kCallOffUnknown);
  EXPECT_EQ(out.pcs[1], 22u);
  EXPECT_TRUE(r.empty());
}
