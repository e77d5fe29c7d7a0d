// The symbolizer: any address of the process to object, function, file and
// line, inlined functions included; the symbol table where there is no
// debug information.
#include "symbolizer.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace {

const std::string kBin = LM_FIXTURE_BIN;
const std::string kSrc = LM_FIXTURE_SRC;

uint32_t marker_line(const std::string& file, const std::string& marker) {
  std::ifstream in(file);
  std::string line;
  for (uint32_t n = 1; std::getline(in, line); n++)
    if (line.find(marker) != std::string::npos) return n;
  return 0;
}

// fixture_inline_outer of the library `lib` (with inlined code), loaded; 0
// when it cannot be.
uintptr_t inline_outer(const std::string& lib) {
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) ADD_FAILURE() << dlerror();
  return h ? reinterpret_cast<uintptr_t>(dlsym(h, "fixture_inline_outer")) : 0;
}

__attribute__((noinline)) int symbolizer_marker_fn(int x) { return x * 3 + 11; }  // MARK_SYM_FN

}  // namespace

TEST(Symbolizer, FunctionOfThisFile) {
  coz::Symbolizer s;
  coz::Symbolized r = s.symbolize(reinterpret_cast<uintptr_t>(&symbolizer_marker_fn));
  ASSERT_FALSE(r.frames.empty());
  EXPECT_NE(r.frames[0].function.find("symbolizer_marker_fn"), std::string::npos) << r.frames[0].function;
  EXPECT_EQ(r.frames[0].file, std::string(__FILE__));
  EXPECT_EQ(r.frames[0].line, marker_line(__FILE__, "MARK_SYM_" "FN"));
  EXPECT_EQ(r.build_id.size(), 40u) << "a GNU build-id is 20 bytes";
  EXPECT_EQ(symbolizer_marker_fn(1), 14);
}

TEST(Symbolizer, InlinedFunctionThenItsCaller) {
  const std::string lib = kBin + "/liblm_inline.so";
  uintptr_t fn = inline_outer(lib);
  ASSERT_NE(fn, 0u);
  const std::string src = kSrc + "/fixture_inline.c";
  coz::Symbolizer s;
  bool found = false;
  for (uintptr_t pc = fn; pc < fn + 64 && !found; pc++) {
    coz::Symbolized r = s.symbolize(pc);
    if (r.frames.size() != 2) continue;
    found = true;
    EXPECT_EQ(r.object, lib);
    EXPECT_EQ(r.frames[0].function, "fixture_inl_helper");
    EXPECT_EQ(r.frames[0].file, src);
    EXPECT_EQ(r.frames[0].line, marker_line(src, "MARK_INL_BODY"));
    EXPECT_EQ(r.frames[1].function, "fixture_inline_outer");
    EXPECT_EQ(r.frames[1].file, src);
    EXPECT_EQ(r.frames[1].line, marker_line(src, "MARK_INL_CALL"));
    Dl_info info;
    ASSERT_NE(dladdr(reinterpret_cast<void*>(pc), &info), 0);
    EXPECT_EQ(r.object_address, pc - reinterpret_cast<uintptr_t>(info.dli_fbase)) << "the library's own address";
  }
  EXPECT_TRUE(found) << "no address of fixture_inline_outer is in the inlined helper";
  EXPECT_EQ(s.function_name(fn), "fixture_inline_outer");
}

TEST(Symbolizer, LibraryWithoutDebugInformationGivesTheSymbol) {
  // liblm_fixture's twin without any debug information: only its symbol table.
  const std::string lib = kBin + "/liblm_nodebug.so";
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  void* fn = dlsym(h, "fixture_lib_fn");
  ASSERT_NE(fn, nullptr);
  coz::Symbolizer s;
  coz::Symbolized r = s.symbolize(reinterpret_cast<uintptr_t>(fn) + 1);
  EXPECT_EQ(r.object, lib);
  ASSERT_EQ(r.frames.size(), 1u);
  EXPECT_EQ(r.frames[0].function, "fixture_lib_fn");
  EXPECT_EQ(r.frames[0].file, "");
  EXPECT_EQ(r.frames[0].line, 0u);
}

TEST(Symbolizer, OutsideTheBinaryScopeGivesTheSymbolOnly) {
  // The library with inlined code, read from its DWARF when in scope; out
  // of it, the same addresses give the function of the symbol table alone.
  const std::string lib = kBin + "/liblm_inline.so";
  uintptr_t fn = inline_outer(lib);
  ASSERT_NE(fn, 0u);
  coz::Symbolizer in;
  coz::Symbolizer out([&](const std::string& path, bool) { return path != lib; });
  bool found = false;
  for (uintptr_t pc = fn; pc < fn + 64 && !found; pc++) {
    coz::Symbolized full = in.symbolize(pc);
    if (full.frames.size() != 2) continue;  // an address in the inlined helper
    found = true;
    coz::Symbolized r = out.symbolize(pc);
    EXPECT_EQ(r.object, lib);
    EXPECT_EQ(r.object_address, full.object_address);
    EXPECT_EQ(r.build_id, full.build_id);
    ASSERT_EQ(r.frames.size(), 1u);
    EXPECT_EQ(r.frames[0].function, "fixture_inline_outer");
    EXPECT_EQ(r.frames[0].file, "");
    EXPECT_EQ(r.frames[0].line, 0u);
  }
  EXPECT_TRUE(found) << "no address of fixture_inline_outer is in the inlined helper";
  // The main executable (this test) stays in scope: its file and line.
  coz::Symbolized self = out.symbolize(reinterpret_cast<uintptr_t>(&symbolizer_marker_fn));
  ASSERT_FALSE(self.frames.empty());
  EXPECT_EQ(self.frames[0].file, std::string(__FILE__));
}

TEST(Symbolizer, SymbolNamesHaveNoVersion) {
  // libc's pthread_cond_wait has two versions; its separate debug file's
  // .symtab, when installed, names the default one
  // "pthread_cond_wait@@GLIBC_2.3.2".
  void* fn = dlsym(RTLD_DEFAULT, "pthread_cond_wait");
  ASSERT_NE(fn, nullptr);
  Dl_info info;
  ASSERT_NE(dladdr(fn, &info), 0);
  const std::string libc = info.dli_fname;
  coz::Symbolizer s([&](const std::string& path, bool) { return path != libc; });
  coz::Symbolized r = s.symbolize(reinterpret_cast<uintptr_t>(fn));
  ASSERT_EQ(r.frames.size(), 1u);
  EXPECT_NE(r.frames[0].function.find("cond_wait"), std::string::npos) << r.frames[0].function;
  EXPECT_EQ(r.frames[0].function.find('@'), std::string::npos) << r.frames[0].function;
}

TEST(Symbolizer, DemanglesCppNames) {
  EXPECT_EQ(coz::demangle("_ZN3foo3barEi"), "foo::bar(int)");
  EXPECT_EQ(coz::demangle("main"), "main");
}
