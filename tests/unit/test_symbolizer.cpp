// The symbolizer: any address of the process to object, function, file and
// line, inlined functions included; the symbol table where there is no
// debug information.
#include "symbolizer.h"
#include "loaded_objects.h"
#include "stacks.h"
#include "unwind.h"

#include <dlfcn.h>
#include <link.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
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

TEST(Symbolizer, TheVdsoIsNamedFromItsImageInMemory) {
  // The vDSO has no file; its clock_gettime is where programs that time
  // themselves spend their time (perf names it too).
  void* h = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr) << dlerror();
  void* fn = dlsym(h, "__vdso_clock_gettime");
  ASSERT_NE(fn, nullptr) << dlerror();
  Dl_info info;
  void* entry = nullptr;
  ASSERT_NE(dladdr1(fn, &info, &entry, RTLD_DL_SYMENT), 0);
  const auto* sym = static_cast<const ElfW(Sym)*>(entry);
  ASSERT_NE(sym, nullptr);
  ASSERT_GT(sym->st_size, 16u);
  coz::Symbolizer s([](const std::string&, bool) { return true; });
  // Its first bytes and its last (after its fallback's syscall, where a
  // CPU-time clock's call is sampled on its way back from the kernel).
  const auto start = reinterpret_cast<uintptr_t>(fn), end = start + sym->st_size;
  for (uintptr_t pc : {start, start + 5, end - 16, end - 1}) {
    coz::Symbolized r = s.symbolize(pc);
    EXPECT_NE(r.object.find("linux-vdso"), std::string::npos) << r.object;
    ASSERT_EQ(r.frames.size(), 1u) << "at +0x" << std::hex << pc - start;
    EXPECT_EQ(r.frames[0].function, "__vdso_clock_gettime");
    EXPECT_EQ(r.frames[0].file, "");
    EXPECT_EQ(r.symbol_start, reinterpret_cast<uintptr_t>(fn));  // one location for the function
  }
  // After the loader's list changed (a library loaded and unloaded), read again.
  void* lib = dlopen((kBin + "/liblm_fixture.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  dlclose(lib);
  for (uintptr_t pc = start; pc < end; pc++) {
    coz::Symbolized r = s.symbolize(pc);
    ASSERT_EQ(r.frames.size(), 1u) << "at +0x" << std::hex << pc - start << " after the loader's list changed";
    EXPECT_EQ(r.frames[0].function, "__vdso_clock_gettime");
  }
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

// A copy of liblm_fixture.so under a name of its own in a new folder (no
// other test has it loaded, so dlclose unloads it); removed with the object.
struct LibraryCopy {
  std::string dir, path;
  explicit LibraryCopy(const std::string& name) {
    char tmpl[] = "/tmp/coz_symbolizer_XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir = tmpl;
    path = dir + "/" + name;
    std::ifstream in(kBin + "/liblm_fixture.so", std::ios::binary);
    std::ofstream out(path, std::ios::binary);
    out << in.rdbuf();
  }
  ~LibraryCopy() {
    unlink(path.c_str());
    rmdir(dir.c_str());
  }
};

// dlclose(h) as the runtime's wrapper makes it (interpose.cpp).
int runtime_dlclose(void* h) {
  uint64_t closing = coz::dlclose_begin(h);
  int rc = dlclose(h);
  coz::dlclose_done(closing);
  return rc;
}

TEST(Symbolizer, AFunctionWithoutAnySymbolIsNamedByItsUnwindEntry) {
  // A stripped library's static function (a stripped executable's own
  // functions alike): no symbol anywhere, but an unwind entry. Every
  // address in it is one frame, named by the object and where it starts,
  // not one frame per instruction.
  const std::string lib = kBin + "/liblm_stripped.so";
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto pointer = reinterpret_cast<int (**)(int)>(dlsym(h, "fixture_stripped_static"));
  void* entry = dlsym(h, "fixture_stripped_entry");
  ASSERT_NE(pointer, nullptr);
  ASSERT_NE(entry, nullptr);
  const auto fn = reinterpret_cast<uintptr_t>(*pointer);
  Dl_info info;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(fn), &info), 0);
  ASSERT_EQ(info.dli_sname, nullptr) << "the fixture's static function has a symbol: " << info.dli_sname;
  char name[64];
  snprintf(name, sizeof name, "liblm_stripped.so+0x%jx",
           static_cast<uintmax_t>(fn - reinterpret_cast<uintptr_t>(info.dli_fbase)));
  coz::Symbolizer s;
  for (uintptr_t pc : {fn, fn + 1, fn + 4}) {
    coz::Symbolized r = s.symbolize(pc);
    EXPECT_EQ(r.object, lib);
    ASSERT_EQ(r.frames.size(), 1u);
    EXPECT_EQ(r.frames[0].function, name);
    EXPECT_EQ(r.frames[0].file, "");
    EXPECT_EQ(r.symbol_start, fn) << "one location for the function";
  }
  // An exported function keeps its .dynsym name.
  coz::Symbolized r = s.symbolize(reinterpret_cast<uintptr_t>(entry) + 1);
  ASSERT_EQ(r.frames.size(), 1u);
  EXPECT_EQ(r.frames[0].function, "fixture_stripped_entry");
}

bool listed_unloaded(const std::string& path) {
  for (const coz::LoadedObject& o : coz::unloaded_objects())
    if (o.name == path) return true;
  return false;
}

TEST(Symbolizer, ALibraryUnloadedBeforeTheLookIsReadFromItsFile) {
  // Stacks are symbolized at a flush, after the program may have
  // dlclose()d the library their addresses are in.
  LibraryCopy lib("libcoz_unloaded_6151.so");
  void* h = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  const auto fn = reinterpret_cast<uintptr_t>(dlsym(h, "fixture_lib_fn"));
  ASSERT_NE(fn, 0u);
  Dl_info info;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(fn), &info), 0);
  const uintptr_t offset = fn - reinterpret_cast<uintptr_t>(info.dli_fbase);
  ASSERT_EQ(runtime_dlclose(h), 0) << dlerror();
  ASSERT_EQ(dlopen(lib.path.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr) << "the library is still loaded";

  const std::string src = kSrc + "/fixture_lib.c";
  coz::Symbolizer in_scope;
  coz::Symbolized r = in_scope.symbolize(fn + 1);
  EXPECT_EQ(r.object, lib.path);
  EXPECT_EQ(r.object_address, offset + 1);
  EXPECT_EQ(r.build_id.size(), 40u);
  ASSERT_EQ(r.frames.size(), 1u);
  EXPECT_EQ(r.frames[0].function, "fixture_lib_fn");
  EXPECT_EQ(r.frames[0].file, src);
  EXPECT_EQ(r.frames[0].line, marker_line(src, "MARK_LIB_" "FN"));

  // Outside the binary scope: its symbol table, one location for the function.
  coz::Symbolizer outside([&](const std::string& path, bool) { return path != lib.path; });
  r = outside.symbolize(fn + 1);
  EXPECT_EQ(r.object, lib.path);
  ASSERT_EQ(r.frames.size(), 1u);
  EXPECT_EQ(r.frames[0].function, "fixture_lib_fn");
  EXPECT_EQ(r.frames[0].file, "");
  EXPECT_EQ(r.symbol_start, fn);
}

TEST(Symbolizer, TheCodeOfAnUnloadedLibraryStaysCodeForTheCallchainCheck) {
  // A stack sampled before a dlclose is checked after it (code_frames):
  // its frames in the library must not read as garbage.
  LibraryCopy kept("libcoz_codecheck_6163.so"), plain("libcoz_codecheck_6167.so");
  void* h = dlopen(kept.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  void* g = dlopen(plain.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(h && g) << dlerror();
  const auto fn = reinterpret_cast<uintptr_t>(dlsym(h, "fixture_lib_fn"));
  const auto gn = reinterpret_cast<uintptr_t>(dlsym(g, "fixture_lib_fn"));
  ASSERT_TRUE(fn && gn && fn != gn);
  EXPECT_TRUE(coz::code_address(fn + 1));
  EXPECT_TRUE(coz::code_address(gn + 1));
  ASSERT_EQ(runtime_dlclose(h), 0) << dlerror();
  ASSERT_EQ(dlclose(g), 0) << dlerror();  // unloaded without the runtime's hook: forgotten
  EXPECT_FALSE(coz::code_address(16));  // a miss, the loader's counters moved: the ranges read again
  EXPECT_TRUE(coz::code_address(fn + 1));
  EXPECT_FALSE(coz::code_address(gn + 1));
  const uintptr_t chain[] = {gn, fn, gn, fn};  // the leaf is the sampled IP, never checked
  EXPECT_EQ(coz::code_frames(chain, 4), 2u);
}

TEST(Symbolizer, ADlcloseThatLeavesTheLibraryLoadedKeepsNoCopy) {
  LibraryCopy lib("libcoz_twice_6157.so");
  void* h1 = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h1, nullptr) << dlerror();
  void* h2 = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_EQ(h1, h2);
  const uint64_t version = coz::unloaded_objects_version();
  uint64_t closing = coz::dlclose_begin(h1);
  EXPECT_TRUE(listed_unloaded(lib.path)) << "while dlclose runs, its objects count as closing";
  ASSERT_EQ(dlclose(h1), 0);
  coz::dlclose_done(closing);
  EXPECT_FALSE(listed_unloaded(lib.path)) << "still loaded: the second handle holds it";
  EXPECT_NE(coz::unloaded_objects_version(), version);
  ASSERT_EQ(runtime_dlclose(h2), 0);
  std::vector<coz::LoadedObject> unloaded = coz::unloaded_objects();
  ASSERT_FALSE(unloaded.empty());
  EXPECT_EQ(unloaded.front().name, lib.path) << "the newest first";
}

TEST(Symbolizer, DemanglesCppNames) {
  EXPECT_EQ(coz::demangle("_ZN3foo3barEi"), "foo::bar(int)");
  EXPECT_EQ(coz::demangle("main"), "main");
}

namespace {
__attribute__((noinline)) int stack_marker_caller(int x) { return symbolizer_marker_fn(x) + 1; }
}  // namespace

// DCPI's aggregation in the runtime: identical stacks (same thread, kind and
// frames) are one entry counted many times, each address is symbolized and
// written once, and a flush writes the counts since the previous one.
TEST(StackTable, IdenticalStacksAreOneEntryWithTheirSamplesAndTime) {
  coz::Symbolizer sym;
  coz::StackTable t;
  const uintptr_t f = reinterpret_cast<uintptr_t>(&symbolizer_marker_fn);
  const uintptr_t g = reinterpret_cast<uintptr_t>(&stack_marker_caller);
  const uintptr_t ab[] = {f, g}, ba[] = {g, f};
  for (int i = 0; i < 3; i++) t.add(7, coz::StackKind::kCpu, ab, 2, 1000);
  t.add(7, coz::StackKind::kCpu, ba, 2, 500);           // other frames
  t.add(8, coz::StackKind::kCpu, ab, 2, 1000);          // other thread
  t.add(7, coz::StackKind::kIo, ab, 2, 4000, 4);        // a wait of four periods
  EXPECT_EQ(t.distinct_stacks(), 4u);
  auto names = [](pid_t tid, std::string* thread, std::string* group) {
    *thread = "t" + std::to_string(tid);
    *group = "g";
  };
  coz::StackTable::Flush fl = t.flush(&sym, names);
  ASSERT_EQ(fl.locations.size(), 2u) << "each address once";
  ASSERT_EQ(fl.stacks.size(), 4u);
  ASSERT_EQ(fl.counts.size(), 4u);
  std::map<uint32_t, const coz::StackRecord*> by_id;
  for (const auto& s : fl.stacks) by_id[s.id] = &s;
  uint64_t cpu7 = 0;
  for (const auto& c : fl.counts) {
    const coz::StackRecord* s = by_id.at(c.id);
    if (s->tid == 7 && s->kind == "cpu" && s->locations.size() == 2 &&
        fl.locations[s->locations[0] - 1].address == f) {
      EXPECT_EQ(c.samples, 3u);
      EXPECT_EQ(c.ns, 3000u);
      cpu7++;
    }
    if (s->kind == "io") {
      EXPECT_EQ(c.samples, 4u);
      EXPECT_EQ(c.ns, 4000u);
      EXPECT_EQ(s->thread, "t7");
    }
  }
  EXPECT_EQ(cpu7, 1u);
  EXPECT_NE(fl.locations[0].lines.at(0).function.find("symbolizer_marker_fn"), std::string::npos);
  // Nothing new: an empty flush. The same stack again: its count only.
  coz::StackTable::Flush empty = t.flush(&sym, names);
  EXPECT_TRUE(empty.locations.empty() && empty.stacks.empty() && empty.counts.empty());
  t.add(7, coz::StackKind::kCpu, ab, 2, 1000);
  coz::StackTable::Flush again = t.flush(&sym, names);
  EXPECT_TRUE(again.locations.empty() && again.stacks.empty());
  ASSERT_EQ(again.counts.size(), 1u);
  EXPECT_EQ(again.counts[0].samples, 1u);
  EXPECT_EQ(stack_marker_caller(1), 15);
}

// Samples inside the runtime's own code keep its outermost frame (what the
// program called) over the program's frames; the frames inside it, however
// varied, make one stack. Synthetic addresses: the runtime's code is
// [0x1000, 0x2000), a library it calls (libunwind) at 0x9000.
TEST(StackTable, TheRuntimesOwnFramesCollapseToTheOutermost) {
  coz::Symbolizer sym;
  coz::StackTable t;
  t.set_runtime_code(0x1000, 0x2000);
  const uintptr_t deep[] = {0x9010, 0x9020, 0x1100, 0x1200, 0x5000, 0x5100};   // libunwind, call_stack, wrapper, program
  const uintptr_t other[] = {0x9030, 0x1150, 0x1200, 0x5000, 0x5100};          // elsewhere inside, same wrapper
  const uintptr_t leaf[] = {0x1200, 0x5000, 0x5100};                            // the wrapper itself
  const uintptr_t program[] = {0x5010, 0x5100};                                 // no runtime frame: as it is
  t.add(1, coz::StackKind::kCpu, deep, 6, 100);
  t.add(1, coz::StackKind::kCpu, other, 5, 100);
  t.add(1, coz::StackKind::kCpu, leaf, 3, 100);
  t.add(1, coz::StackKind::kCpu, program, 2, 100);
  EXPECT_EQ(t.distinct_stacks(), 2u);
  coz::StackTable::Flush fl = t.flush(&sym, [](pid_t, std::string*, std::string*) {});
  ASSERT_EQ(fl.stacks.size(), 2u);
  std::map<uint32_t, uint64_t> samples;
  for (const auto& c : fl.counts) samples[c.id] = c.samples;
  for (const auto& st : fl.stacks) {
    std::vector<uint64_t> addrs;
    for (uint32_t id : st.locations) addrs.push_back(fl.locations[id - 1].address);
    if (addrs.size() == 3) {
      EXPECT_EQ(addrs, (std::vector<uint64_t>{0x1200, 0x5000, 0x5100}));
      EXPECT_EQ(samples[st.id], 3u);
    } else {
      EXPECT_EQ(addrs, (std::vector<uint64_t>{0x5010, 0x5100}));
    }
  }
}

// A function named from the symbol table alone (here libc's getaddrinfo, outside
// the binary scope: the test's executable alone) is one location whatever
// its address: stacks that differ only there are one stack, with their
// samples summed. Functions with lines keep their addresses (the lines
// differ).
TEST(StackTable, AddressesOfAFunctionWithoutLinesAreOneLocation) {
  coz::Symbolizer sym([](const std::string&, bool is_main) { return is_main; });
  coz::StackTable t;
  // libc's own, from its handle (a sanitizer's interceptor has the name too).
  void* libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
  ASSERT_NE(libc, nullptr);
  const uintptr_t q = reinterpret_cast<uintptr_t>(dlsym(libc, "getaddrinfo"));
  dlclose(libc);
  ASSERT_NE(q, 0u);
  const uintptr_t f = reinterpret_cast<uintptr_t>(&symbolizer_marker_fn);
  const uintptr_t a[] = {q + 4, f}, b[] = {q + 9, f}, c[] = {q + 9, f + 1};
  t.add(3, coz::StackKind::kCpu, a, 2, 100);
  t.add(3, coz::StackKind::kCpu, b, 2, 200, 2);
  t.add(3, coz::StackKind::kCpu, c, 2, 400, 4);
  coz::StackTable::Flush fl = t.flush(&sym, [](pid_t, std::string*, std::string*) {});
  std::map<uint64_t, const coz::LocationRecord*> by_address;
  for (const auto& l : fl.locations) by_address[l.address] = &l;
  ASSERT_EQ(by_address.count(q), 1u) << "getaddrinfo's frames are at its start";
  EXPECT_EQ(by_address.at(q)->lines.at(0).function, "getaddrinfo");
  EXPECT_EQ(by_address.count(q + 4) + by_address.count(q + 9), 0u);
  ASSERT_EQ(fl.stacks.size(), 2u) << "a and b are one stack; c's caller frame differs";
  std::map<uint32_t, uint64_t> samples;
  for (const auto& n : fl.counts) samples[n.id] += n.samples;
  EXPECT_EQ(fl.counts.size(), 2u) << "one count per written stack";
  EXPECT_EQ(samples[fl.stacks[0].id] + samples[fl.stacks[1].id], 7u);
  EXPECT_TRUE(samples[fl.stacks[0].id] == 3u || samples[fl.stacks[1].id] == 3u);
}

// Flushes grow apart with the run (a tenth of the elapsed time) up to ten
// minutes: the count of flushes, hence the profile's count records, grows
// with the logarithm of a long run's length, not with its length.
TEST(StackTable, FlushesGrowApartUpToTenMinutes) {
  const uint64_t s = 1000000000ull;
  auto flushes = [&](uint64_t run_s) {
    int n = 0;
    for (uint64_t t = coz::next_stack_flush_ns(0); t <= run_s * s; t = coz::next_stack_flush_ns(t)) n++;
    return n;
  };
  EXPECT_EQ(coz::next_stack_flush_ns(0), s);                    // 1 s after the start
  EXPECT_EQ(coz::next_stack_flush_ns(100 * s), 110 * s);        // a tenth of the elapsed time
  EXPECT_EQ(coz::next_stack_flush_ns(20000 * s), 20600 * s);    // at most ten minutes apart
  EXPECT_EQ(flushes(600), 52);
  EXPECT_EQ(flushes(86400), 211);
  EXPECT_LT(flushes(86400), 5 * flushes(600));
}

namespace {
// objdump's names of a file's PLT stubs ("strlen@plt"), by address, read
// from `objdump -dC`: the known answer, from the tool users compare with.
std::map<uintptr_t, std::string> objdump_plt(const std::string& path, const char* section) {
  std::map<uintptr_t, std::string> out;
  const std::string cmd = "objdump -dC -j " + std::string(section) + " '" + path + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[4096];
  while (fgets(line, sizeof line, p)) {
    char* end = nullptr;
    const unsigned long long addr = strtoull(line, &end, 16);
    if (end == line || strncmp(end, " <", 2) != 0) continue;
    std::string name(end + 2);
    name = name.substr(0, name.rfind(">:"));
    if (name.size() > 4 && name.compare(name.size() - 4, 4, "@plt") == 0) out[addr] = name;
  }
  pclose(p);
  return out;
}
}  // namespace

TEST(Symbolizer, APltStubIsNamedForTheFunctionItCalls) {
  // A loop around a library call samples in the call's stub, which no
  // symbol covers: named as objdump names it, not left as an address.
  const coz::LoadedObject main_object = coz::loaded_objects().front();
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(len, 0);
  exe[len] = 0;
  std::map<uintptr_t, std::string> stubs = objdump_plt(exe, ".plt.sec");
  const bool sec = !stubs.empty();
  if (!sec) stubs = objdump_plt(exe, ".plt");
  ASSERT_GE(stubs.size(), 3u) << "objdump -dC found no PLT stubs in " << exe;
  coz::Symbolizer outside([](const std::string&, bool) { return false; });
  size_t i = 0, checked = 0;
  for (const auto& [addr, name] : stubs) {
    if (i++ % 16 != 0 && i != stubs.size()) continue;  // every 16th, and the last
    const coz::Symbolized s = outside.symbolize(main_object.bias + addr + 6);
    ASSERT_EQ(s.frames.size(), 1u) << name;
    EXPECT_EQ(s.frames[0].function, name);
    checked++;
  }
  EXPECT_GE(checked, 2u);
  if (!sec) {
    // The first stub of .plt calls the loader's resolver: no function's.
    const coz::Symbolized s = outside.symbolize(main_object.bias + stubs.begin()->first - 16 + 4);
    ASSERT_EQ(s.frames.size(), 1u);
    EXPECT_EQ(s.frames[0].function, "[plt]");
  }
}
