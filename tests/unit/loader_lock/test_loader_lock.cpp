// The runtime never allocates while the dynamic loader's lock is held.
//
// dl_iterate_phdr holds that lock while it calls back, and libunwind takes
// it in the sample handler, which may interrupt the program inside its own
// malloc's critical section. A callback of ours that allocated would wait
// for the program's malloc lock while the program waited for the loader's:
// a program with its own malloc hung that way (loaded_objects.h).
//
// Its own binary: it replaces malloc (forwarding to glibc's) to count the
// allocations made inside dl_iterate_phdr's callbacks, and wraps
// dl_iterate_phdr to know when a callback runs.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <cerrno>
#include <functional>
#include <cstring>
#include <string>

#include "loaded_objects.h"
#include "symbolizer.h"
#include "unwind.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
thread_local int tls_in_callback = 0;
std::atomic<long> g_allocs_in_callback{0};

void note() {
  if (tls_in_callback) g_allocs_in_callback.fetch_add(1);
}

struct Wrapped {
  int (*cb)(dl_phdr_info*, size_t, void*);
  void* data;
};

int wrapped_callback(dl_phdr_info* info, size_t size, void* data) {
  Wrapped* w = static_cast<Wrapped*>(data);
  tls_in_callback++;
  int r = w->cb(info, size, w->data);
  tls_in_callback--;
  return r;
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  note();
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  note();
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  note();
  return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
  note();
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }

int dl_iterate_phdr(int (*cb)(dl_phdr_info*, size_t, void*), void* data) {
  using Fn = int (*)(int (*)(dl_phdr_info*, size_t, void*), void*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dl_iterate_phdr"));
  Wrapped w{cb, data};
  return real(wrapped_callback, &w);
}
}

namespace {

long allocs_during(const std::function<void()>& fn) {
  long before = g_allocs_in_callback.load();
  fn();
  return g_allocs_in_callback.load() - before;
}

// The check itself can fail: an allocating callback is seen.
TEST(LoaderLock, AnAllocatingCallbackIsCounted) {
  long n = allocs_during([] {
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void*) -> int {
          std::string copy = std::string(info->dlpi_name ? info->dlpi_name : "") + " (a name long enough to be on the heap)";
          return copy.empty();
        },
        nullptr);
  });
  EXPECT_GT(n, 0);
}

TEST(LoaderLock, LoadedObjectsCopiesWithoutAllocatingInside) {
  std::vector<coz::LoadedObject> objects;
  EXPECT_EQ(allocs_during([&] { objects = coz::loaded_objects(); }), 0);
  ASSERT_GE(objects.size(), 2u);  // this program and at least libc
  EXPECT_TRUE(objects[0].is_main);
  EXPECT_FALSE(objects[1].is_main);
  // The same list the loader gives, names and load addresses.
  struct Seen {
    std::vector<std::pair<std::string, uintptr_t>> list;
  } seen;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        static_cast<Seen*>(data)->list.emplace_back(info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr);
        return 0;
      },
      &seen);
  ASSERT_EQ(seen.list.size(), objects.size());
  for (size_t i = 0; i < objects.size(); i++) {
    EXPECT_EQ(objects[i].name, seen.list[i].first);
    EXPECT_EQ(objects[i].bias, seen.list[i].second);
    EXPECT_FALSE(objects[i].phdrs.empty()) << objects[i].name;
  }
  bool libc = false;
  for (const auto& o : objects) libc = libc || o.name.find("libc.so") != std::string::npos;
  EXPECT_TRUE(libc);
}

__attribute__((noinline)) int marker_function(int x) { return x * 3 + 1; }

TEST(LoaderLock, SymbolizingLooksUpObjectsWithoutAllocatingInside) {
  coz::Symbolizer symbolizer;
  long n = allocs_during([&] {
    coz::Symbolized s = symbolizer.symbolize(reinterpret_cast<uintptr_t>(&marker_function));
    EXPECT_NE(s.frames.size(), 0u);
    // The first look copies the loader's list; a pc in libc, and one in no
    // object, read its counters (dl_iterate_phdr) and the list again only if
    // they moved: none of it allocates inside the loader's lock.
    symbolizer.symbolize(reinterpret_cast<uintptr_t>(&strlen));
    symbolizer.symbolize(16);
  });
  EXPECT_EQ(n, 0);
}

TEST(LoaderLock, TheUnwindersCodeCheckLooksUpObjectsWithoutAllocatingInside) {
  long n = allocs_during([] {
    EXPECT_TRUE(coz::code_address(reinterpret_cast<uintptr_t>(&marker_function)));
    EXPECT_FALSE(coz::code_address(16));  // not found: the loader's counters read again
  });
  EXPECT_EQ(n, 0);
}

// --- the published copy (what libunwind sees in program threads) ---------

std::vector<std::pair<std::string, uintptr_t>> list_copy() {
  std::vector<std::pair<std::string, uintptr_t>> out;
  out.reserve(256);
  coz::iterate_published_objects(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* v = static_cast<std::vector<std::pair<std::string, uintptr_t>>*>(data);
        if (v->size() < v->capacity()) v->emplace_back(info->dlpi_name, info->dlpi_addr);  // within the reserve
        return 0;
      },
      &out);
  return out;
}

std::vector<std::pair<std::string, uintptr_t>> list_loader() {
  std::vector<std::pair<std::string, uintptr_t>> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        static_cast<std::vector<std::pair<std::string, uintptr_t>>*>(data)->emplace_back(
            info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr);
        return 0;
      },
      &out);
  return out;
}

bool listed(const std::vector<std::pair<std::string, uintptr_t>>& v, const char* part) {
  for (const auto& o : v)
    if (o.first.find(part) != std::string::npos) return true;
  return false;
}

// The copy answers while another thread holds the loader's lock: the case
// of a handler that interrupted a thread taking it, or waiting for it.
TEST(PublishedObjects, AnswerWhileAnotherThreadHoldsTheLoadersLock) {
  coz::publish_loaded_objects(coz::loaded_objects());
  static std::atomic<int> stage{0};
  stage = 0;
  std::thread holder([] {
    dl_iterate_phdr(
        [](dl_phdr_info*, size_t, void*) -> int {
          stage = 1;
          auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (stage == 1 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
          return 1;
        },
        nullptr);
  });
  while (stage == 0) std::this_thread::yield();
  auto walked = std::async(std::launch::async, [] { return list_copy(); });
  bool answered = walked.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  stage = 2;  // let the holder go either way
  holder.join();
  ASSERT_TRUE(answered) << "the copy waited for the loader's lock";
  EXPECT_EQ(walked.get(), list_loader());
}

TEST(PublishedObjects, WalkingTheCopyAllocatesNothing) {
  coz::publish_loaded_objects(coz::loaded_objects());
  size_t count = 0;
  long n = allocs_during([&] {
    tls_in_callback++;  // every allocation from here on counts
    coz::iterate_published_objects(
        [](dl_phdr_info*, size_t, void* data) -> int {
          ++*static_cast<size_t*>(data);
          return 0;
        },
        &count);
    tls_in_callback--;
  });
  EXPECT_EQ(n, 0);
  EXPECT_EQ(count, list_loader().size());
}

// A library loaded later is in the copy once published again; one unloaded
// since is skipped without being read (glibc's _dl_find_object says so).
TEST(PublishedObjects, FollowLoadsAndSkipUnloadedObjects) {
  const char* lib = "line_map_fixtures/liblm_units.so";
  coz::publish_loaded_objects(coz::loaded_objects());
  ASSERT_FALSE(listed(list_copy(), "liblm_units.so"));
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_FALSE(listed(list_copy(), "liblm_units.so"));  // not published yet
  coz::publish_loaded_objects(coz::loaded_objects());
  EXPECT_TRUE(listed(list_copy(), "liblm_units.so"));
  ASSERT_EQ(dlclose(h), 0);
  ASSERT_FALSE(listed(list_loader(), "liblm_units.so")) << "still loaded: cannot check the skip";
  if (!dlsym(RTLD_DEFAULT, "_dl_find_object")) GTEST_SKIP() << "glibc before 2.35: no lock-free lookup to tell";
  EXPECT_FALSE(listed(list_copy(), "liblm_units.so"));
}

}  // namespace
