// SymbolIndex gives every address the name dwfl_module_addrsym gives it,
// read from a sorted table instead of the whole symbol table at each call:
// compared address by address on a fixture made of the symbols libdwfl's
// choice turns on, on the fixtures, and on the libc and libstdc++ this test
// runs with.
#include "symbol_index.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace {

char* g_debuginfo_path = nullptr;
const Dwfl_Callbacks kCallbacks = {dwfl_build_id_find_elf, dwfl_standard_find_debuginfo,
                                   dwfl_offline_section_address, &g_debuginfo_path};

// An ELF file opened with libdwfl, as the symbolizer opens an object.
struct Module {
  Dwfl* dwfl;
  Dwfl_Module* m;
  explicit Module(const std::string& path) {
    elf_version(EV_CURRENT);
    dwfl = dwfl_begin(&kCallbacks);
    m = dwfl_report_offline(dwfl, path.c_str(), path.c_str(), -1);
    dwfl_report_end(dwfl, nullptr, nullptr);
  }
  ~Module() { dwfl_end(dwfl); }
};

// Compares the two on `count` addresses spread over the module (every
// address when `count` is 0); returns how many were compared and puts the
// first differences in *diff.
size_t compare(const std::string& path, size_t count, std::string* diff, size_t* named) {
  Module mod(path);
  Dwfl_Module* m = mod.m;
  if (!m) return 0;
  coz::SymbolIndex index(m);
  Dwarf_Addr lo = 0, hi = 0;
  dwfl_module_info(m, nullptr, &lo, &hi, nullptr, nullptr, nullptr, nullptr);
  const Dwarf_Addr step = count ? (hi - lo) / count + 1 : 1;
  size_t n = 0;
  for (Dwarf_Addr a = lo; a < hi; a += step, n++) {
    GElf_Sym sym;
    GElf_Word shndx = 0;
    const char* want = dwfl_module_addrsym(m, a, &sym, &shndx);
    uintptr_t start = 0;
    const char* got = index.find(static_cast<uintptr_t>(a), &start);
    if (want) ++*named;
    const bool same = want ? got && strcmp(want, got) == 0 && start == sym.st_value : !got;
    if (!same && diff->size() < 400) {
      char line[200];
      snprintf(line, sizeof line, "%#jx: libdwfl %s, index %s\n", static_cast<uintmax_t>(a), want ? want : "(none)",
               got ? got : "(none)");
      *diff += line;
    }
  }
  return n;
}

std::string object_of(const void* p) {
  Dl_info info;
  return dladdr(p, &info) && info.dli_fname ? info.dli_fname : "";
}

TEST(SymbolIndex, NamesEveryAddressAsLibdwflDoes) {
  const std::string bin = LM_FIXTURE_BIN;
  struct Case {
    std::string path;
    size_t count;  // 0: every address
  };
  const Case cases[] = {
      {bin + "/liblm_symbols.so", 0},  // aliases, nesting, labels, an absolute symbol
      {bin + "/liblm_units.so", 0},
      {bin + "/liblm_stripped.so", 0},  // .dynsym only
      {object_of(reinterpret_cast<const void*>(&printf)), 3000},  // libc: libdwfl takes ~0.15 ms an address
      {object_of(reinterpret_cast<const void*>(&std::terminate)), 3000},
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.path.empty());
    std::string diff;
    size_t named = 0;
    const size_t n = compare(c.path, c.count, &diff, &named);
    EXPECT_GT(n, 1000u) << c.path;
    EXPECT_GT(named, 10u) << c.path;  // (the comparison names something)
    EXPECT_EQ(diff, "") << c.path;
  }
}

TEST(SymbolIndex, TheFixturesHardCasesGetTheirNames) {
  // The choices themselves, on liblm_symbols.so (fixture_symbols.s), by the
  // symbols' own addresses.
  Module mod(std::string(LM_FIXTURE_BIN) + "/liblm_symbols.so");
  Dwfl_Module* m = mod.m;
  ASSERT_NE(m, nullptr);
  coz::SymbolIndex index(m);
  auto addr_of = [&](const char* name) {
    for (int i = 1; i < dwfl_module_getsymtab(m); i++) {
      GElf_Sym sym;
      GElf_Addr value = 0;
      const char* n = dwfl_module_getsym_info(m, i, &sym, &value, nullptr, nullptr, nullptr);
      if (n && strcmp(n, name) == 0) return static_cast<uintptr_t>(value);
    }
    ADD_FAILURE() << name;
    return uintptr_t{0};
  };
  auto name_at = [&](uintptr_t a) {
    uintptr_t start = 0;
    const char* n = index.find(a, &start);
    return std::string(n ? n : "(none)");
  };
  const uintptr_t outer = addr_of("outer");
  EXPECT_EQ(name_at(outer), "outer_head");      // global, and smaller than outer
  EXPECT_EQ(name_at(outer + 20), "outer");      // inner (local) is nested: the global one covering it
  EXPECT_EQ(name_at(addr_of("after_label") + 3), "after_label");  // a label past outer's end
  EXPECT_EQ(name_at(addr_of("local_label") + 2), "local_label");  // a local label above a global one
  EXPECT_EQ(name_at(addr_of("last_fn") + 4), "last_fn");
}

}  // namespace
