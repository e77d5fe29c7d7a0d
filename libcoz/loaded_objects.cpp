#include "loaded_objects.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>

#include "runtime.h"
#include "kept.h"

namespace coz {

__thread int tls_objects_from_copy __attribute__((tls_model("initial-exec"))) = 0;

namespace {

// One pass of dl_iterate_phdr that measures (buffers null) or fills
// buffers sized by an earlier pass. No allocation: the loader's lock is held.
struct Pass {
  struct Raw {
    uintptr_t bias;
    size_t name_at, name_len, phdr_at, phdr_n;
  };
  Raw* raw = nullptr;
  char* names = nullptr;
  ElfW(Phdr)* phdrs = nullptr;
  size_t raw_cap = 0, names_cap = 0, phdrs_cap = 0;
  size_t n = 0, name_bytes = 0, phdr_n = 0;
  bool overflow = false;

  static int visit(dl_phdr_info* info, size_t, void* data) {
    Pass* p = static_cast<Pass*>(data);
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    size_t len = strlen(name);
    if (p->raw) {
      if (p->n >= p->raw_cap || p->name_bytes + len > p->names_cap || p->phdr_n + info->dlpi_phnum > p->phdrs_cap) {
        p->overflow = true;  // loaded between the passes: measure again
        return 1;
      }
      p->raw[p->n] = Raw{info->dlpi_addr, p->name_bytes, len, p->phdr_n, info->dlpi_phnum};
      memcpy(p->names + p->name_bytes, name, len);
      memcpy(p->phdrs + p->phdr_n, info->dlpi_phdr, info->dlpi_phnum * sizeof(ElfW(Phdr)));
    }
    p->n++;
    p->name_bytes += len;
    p->phdr_n += info->dlpi_phnum;
    return 0;
  }
};

}  // namespace

std::vector<LoadedObject> loaded_objects() {
  for (;;) {
    Pass measure;
    dl_iterate_phdr(Pass::visit, &measure);
    // Room for a few more, loaded between the passes.
    std::vector<Pass::Raw> raw(measure.n + 8);
    std::vector<char> names(measure.name_bytes + 8 * 4096);
    std::vector<ElfW(Phdr)> phdrs(measure.phdr_n + 8 * 16);
    Pass fill;
    fill.raw = raw.data();
    fill.names = names.data();
    fill.phdrs = phdrs.data();
    fill.raw_cap = raw.size();
    fill.names_cap = names.size();
    fill.phdrs_cap = phdrs.size();
    dl_iterate_phdr(Pass::visit, &fill);
    if (fill.overflow) continue;
    std::vector<LoadedObject> out(fill.n);
    for (size_t i = 0; i < fill.n; i++) {
      const Pass::Raw& r = raw[i];
      out[i].name.assign(names.data() + r.name_at, r.name_len);
      out[i].bias = r.bias;
      out[i].is_main = i == 0;
      out[i].phdrs.assign(phdrs.begin() + static_cast<long>(r.phdr_at),
                          phdrs.begin() + static_cast<long>(r.phdr_at + r.phdr_n));
    }
    return out;
  }
}

bool is_vdso(const std::string& name) {
  return name.find("linux-vdso") != std::string::npos || name.find("linux-gate") != std::string::npos;
}

unsigned long long loader_changes() {
  unsigned long long changes = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
          *static_cast<unsigned long long*>(data) = info->dlpi_adds + info->dlpi_subs;
        return 1;
      },
      &changes);
  return changes;
}

}  // namespace coz

namespace coz {

namespace {

struct Published {
  std::vector<LoadedObject> objects;
  std::vector<dl_phdr_info> infos;  // pointing into `objects`
  std::vector<uintptr_t> probe;     // per object: an address it maps (its first PT_LOAD), or 0
};

// Replaced copies are never freed: a handler may still be walking one.
std::atomic<Published*> g_published{nullptr};

// glibc's lock-free lookup of the object mapping an address (2.35 on),
// resolved outside signal context.
#ifdef DLFO_STRUCT_HAS_EH_DBASE
using FindObjectResult = struct dl_find_object;
#else
struct FindObjectResult {  // glibc 2.35's struct dl_find_object on x86-64, for older headers
  unsigned long long dlfo_flags;
  void* dlfo_map_start;
  void* dlfo_map_end;
  struct link_map* dlfo_link_map;
  void* dlfo_eh_frame;
  unsigned long long reserved[7];
};
#endif
using FindObjectFn = int (*)(void*, FindObjectResult*);
std::atomic<FindObjectFn> g_find_object{nullptr};

// Whether the object that mapped `probe` for the copy still does, at the same bias.
bool still_loaded(uintptr_t probe, uintptr_t bias) {
  FindObjectFn find = g_find_object.load(std::memory_order_relaxed);
  if (!find || !probe) return true;  // no way to tell: as the copy says
  FindObjectResult r;
  if (find(reinterpret_cast<void*>(probe), &r) != 0 || !r.dlfo_link_map) return false;
  return r.dlfo_link_map->l_addr == bias;
}

}  // namespace

void publish_loaded_objects(std::vector<LoadedObject> objects) {
  static bool resolved = false;
  if (!resolved) {
    resolved = true;
    g_find_object.store(reinterpret_cast<FindObjectFn>(dlsym(RTLD_DEFAULT, "_dl_find_object")));
  }
  auto* p = new Published;
  kept_for_readers(p);
  p->objects = std::move(objects);
  p->infos.resize(p->objects.size());
  p->probe.resize(p->objects.size());
  for (size_t i = 0; i < p->objects.size(); i++) {
    const LoadedObject& o = p->objects[i];
    dl_phdr_info& info = p->infos[i];
    memset(&info, 0, sizeof info);
    info.dlpi_addr = o.bias;
    info.dlpi_name = o.name.c_str();
    info.dlpi_phdr = o.phdrs.data();
    info.dlpi_phnum = static_cast<ElfW(Half)>(o.phdrs.size());
    for (const ElfW(Phdr)& ph : o.phdrs)
      if (ph.p_type == PT_LOAD && ph.p_memsz) {
        p->probe[i] = o.bias + ph.p_vaddr;
        break;
      }
  }
  g_published.store(p, std::memory_order_release);
}

int iterate_published_objects(int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  Published* p = g_published.load(std::memory_order_acquire);
  if (!p) return 0;
  for (size_t i = 0; i < p->infos.size(); i++) {
    if (!still_loaded(p->probe[i], p->infos[i].dlpi_addr)) continue;
    dl_phdr_info info = p->infos[i];
    if (int r = callback(&info, offsetof(dl_phdr_info, dlpi_adds), data)) return r;
  }
  return 0;
}

}  // namespace coz

// --- Objects the program unloaded ----------------------------------------------

namespace coz {

namespace {

// A dlclose's objects: while under way, every object loaded at its start;
// then the ones it unloaded.
struct Closed {
  uint64_t token;
  bool under_way;
  std::vector<LoadedObject> objects;
};

// Kept at most, the oldest dropped: a program that loads and unloads
// libraries without end does not grow the runtime without end.
constexpr size_t kMaxUnloaded = 1024;  // objects

struct Unloaded {
  std::mutex mu;
  std::vector<Closed> closes;  // oldest first
  uint64_t next_token = 1;
  std::atomic<uint64_t> version{0};
};

Unloaded& unloaded() {
  static Unloaded* u = new Unloaded;  // never destroyed: dlclose may run in exit handlers
  return *u;
}

bool same_object(const LoadedObject& a, const LoadedObject& b) { return a.bias == b.bias && a.name == b.name; }

}  // namespace

uint64_t dlclose_begin(void* handle) {
  if (!handle) return 0;
  RuntimeGuard guard;  // its lock and the loader's are the runtime's, not waits of the program
  int saved = errno;
  std::vector<LoadedObject> objects = loaded_objects();
  Unloaded& u = unloaded();
  uint64_t token;
  {
    std::lock_guard<std::mutex> g(u.mu);
    token = u.next_token++;
    u.closes.push_back(Closed{token, true, std::move(objects)});
    u.version.fetch_add(1, std::memory_order_release);
  }
  errno = saved;
  return token;
}

void dlclose_done(uint64_t token) {
  if (!token) return;
  RuntimeGuard guard;
  int saved = errno;
  std::vector<LoadedObject> loaded = loaded_objects();
  std::sort(loaded.begin(), loaded.end(), [](const LoadedObject& a, const LoadedObject& b) { return a.bias < b.bias; });
  auto still_loaded = [&](const LoadedObject& o) {
    auto it = std::lower_bound(loaded.begin(), loaded.end(), o.bias,
                               [](const LoadedObject& l, uintptr_t bias) { return l.bias < bias; });
    for (; it != loaded.end() && it->bias == o.bias; ++it)
      if (it->name == o.name) return true;
    return false;
  };
  Unloaded& u = unloaded();
  {
    std::lock_guard<std::mutex> g(u.mu);
    auto it = std::find_if(u.closes.begin(), u.closes.end(), [&](const Closed& c) { return c.token == token; });
    if (it != u.closes.end()) {
      Closed done = std::move(*it);
      u.closes.erase(it);
      done.under_way = false;
      done.objects.erase(std::remove_if(done.objects.begin(), done.objects.end(), still_loaded), done.objects.end());
      if (!done.objects.empty()) {
        // Older copies of the same objects, and the oldest beyond the bound.
        size_t kept = done.objects.size();
        for (auto c = u.closes.rbegin(); c != u.closes.rend(); ++c) {
          if (c->under_way) continue;
          auto& objs = c->objects;
          objs.erase(std::remove_if(objs.begin(), objs.end(),
                                    [&](const LoadedObject& o) {
                                      if (kept >= kMaxUnloaded) return true;
                                      for (const LoadedObject& d : done.objects)
                                        if (same_object(o, d)) return true;
                                      kept++;
                                      return false;
                                    }),
                     objs.end());
        }
        u.closes.erase(std::remove_if(u.closes.begin(), u.closes.end(),
                                      [](const Closed& c) { return !c.under_way && c.objects.empty(); }),
                       u.closes.end());
        u.closes.push_back(std::move(done));
      }
      u.version.fetch_add(1, std::memory_order_release);
    }
  }
  errno = saved;
}

std::vector<LoadedObject> unloaded_objects() {
  RuntimeGuard guard;
  Unloaded& u = unloaded();
  std::lock_guard<std::mutex> g(u.mu);
  std::vector<LoadedObject> out;
  for (auto c = u.closes.rbegin(); c != u.closes.rend(); ++c) out.insert(out.end(), c->objects.begin(), c->objects.end());
  return out;
}

uint64_t unloaded_objects_version() { return unloaded().version.load(std::memory_order_acquire); }

void unloaded_objects_fork_prepare() { unloaded().mu.lock(); }
void unloaded_objects_fork_parent() { unloaded().mu.unlock(); }
void unloaded_objects_fork_child() { new (&unloaded().mu) std::mutex(); }

}  // namespace coz
