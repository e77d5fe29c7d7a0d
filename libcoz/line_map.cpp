// PC to source line mapping with elfutils (libdwfl finds the debug data,
// libdw reads the line tables), and binary/source scope matching.
//
// Not signal safe. Two locks:
//  - reg_mu_ guards the list of registered objects. add_object() (any
//    thread, e.g. a dlopen hook) reads the ELF program headers *outside* it
//    and holds it only to append, so a dlopen never waits for a table build.
//  - query_mu_ serializes the queries (lookup, ranges_of, find, build_all,
//    objects_without_debug_info) and guards everything they build: the
//    per-object tables, the interned lines, the libdwfl sessions.
//
// Laziness: add_object() opens the ELF file and reads its program headers
// only. The debug file search and the line-table scan of an object happen on
// its first query, in the profiler thread.

#include "line_map.h"

#include "debuginfo.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace coz {

bool scope_match(const std::string& pattern, const std::string& text) {
  // Greedy wildcard match with backtracking to the last '%': O(|p| * |t|)
  // at worst, no recursion.
  size_t p = 0, t = 0;
  size_t star = std::string::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '%') {
      star = p++;
      star_t = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '%') ++p;
  return p == pattern.size();
}

namespace {

std::string self_exe_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

// An interned line plus its reverse index entry. Every Line* handed out
// points into one of these.
struct LineEntry : Line {
  std::vector<AddrRange> ranges;  // run-time addresses
  bool merged = true;             // `ranges` sorted and merged
  uintptr_t first_statement = UINTPTR_MAX;  // lowest start of a row marked is_stmt
};

struct FileRec {
  std::string path;  // absolute (when DWARF allows), normalized
  bool in_scope = false;
  std::unordered_map<uint32_t, std::unique_ptr<LineEntry>> lines;
};

// One row range of an object's table, in run-time addresses.
struct Entry {
  uintptr_t start;
  uintptr_t end;
  LineEntry* line;
};

struct Object {
  // Set by add_object before publication; immutable afterwards.
  std::string path;
  uintptr_t bias = 0;
  bool is_main = false;
  std::vector<AddrRange> text_vaddr;  // executable PT_LOADs, link-time

  // Built lazily under query_mu_.
  bool debug_opened = false;
  int open_error = 0;  // errno of the failed open of the file (EMFILE: no descriptor was left)
  bool has_line_info = false;
  Dwfl* dwfl = nullptr;
  Dwarf* dwarf = nullptr;
  Dwarf_Addr dwarf_bias = 0;
  bool table_built = false;
  std::vector<Entry> table;  // sorted by start, non-overlapping

  ~Object() {
    if (dwfl) dwfl_end(dwfl);
  }
};

// Reads the executable PT_LOAD segments of an ELF file. False when the file
// cannot be opened or is not ELF.
bool read_text_segments(const std::string& path, std::vector<AddrRange>* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = false;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (elf && elf_kind(elf) == ELF_K_ELF) {
    size_t n = 0;
    if (elf_getphdrnum(elf, &n) == 0) {
      ok = true;
      for (size_t i = 0; i < n; ++i) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, static_cast<int>(i), &ph)) continue;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_memsz > 0) {
          out->push_back({static_cast<uintptr_t>(ph.p_vaddr),
                          static_cast<uintptr_t>(ph.p_vaddr + ph.p_memsz)});
        }
      }
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return ok;
}

bool vaddr_in_text(const Object& o, Dwarf_Addr a) {
  for (const AddrRange& r : o.text_vaddr) {
    if (a >= r.start && a < r.end) return true;
  }
  return false;
}

void merge_ranges(std::vector<AddrRange>* v) {
  std::sort(v->begin(), v->end(),
            [](const AddrRange& a, const AddrRange& b) { return a.start < b.start; });
  size_t w = 0;
  for (size_t i = 0; i < v->size(); ++i) {
    if (w > 0 && (*v)[i].start <= (*v)[w - 1].end) {
      (*v)[w - 1].end = std::max((*v)[w - 1].end, (*v)[i].end);
    } else {
      (*v)[w++] = (*v)[i];
    }
  }
  v->resize(w);
}

}  // namespace

struct LineMap::Impl {
  std::vector<std::string> binary_scope;
  std::vector<std::string> source_scope;

  // --- registration (reg_mu) ---
  mutable std::mutex reg_mu;
  std::vector<std::unique_ptr<Object>> objects;
  std::vector<std::unique_ptr<Object>> removed;  // unloaded; freed by the next refresh (query_mu)
  std::atomic<uint64_t> generation{0};
  std::atomic<uint64_t> attributable_version{0};  // generation + tables built + debug info checked

  // --- queries (query_mu) ---
  std::mutex query_mu;
  uint64_t seen_generation = UINT64_MAX;
  struct TextIndex {
    uintptr_t start, end;
    Object* obj;
  };
  std::vector<TextIndex> text_index;  // sorted by start
  std::vector<Object*> snapshot;
  std::unordered_map<std::string, std::unique_ptr<FileRec>> files;
  std::string debuginfo_path;  // empty: libdwfl's default
  char* debuginfo_path_ptr = nullptr;
  Dwfl_Callbacks callbacks{};

  // The libdwfl sessions (in objects) must end before the callbacks and
  // path they point to go away.
  ~Impl() { objects.clear(); }

  bool in_binary_scope(const std::string& path, bool is_main) const {
    for (const std::string& p : binary_scope) {
      if (p == "MAIN") {
        if (is_main) return true;
      } else if (scope_match(p, path)) {
        return true;
      }
    }
    return false;
  }

  bool in_source_scope(const std::string& path) const {
    for (const std::string& p : source_scope) {
      if (scope_match(p, path)) return true;
    }
    return false;
  }

  // Brings the query-side view of the object list up to date.
  void refresh() {
    uint64_t g = generation.load(std::memory_order_acquire);
    if (g == seen_generation) return;
    std::lock_guard<std::mutex> lk(reg_mu);
    seen_generation = generation.load(std::memory_order_relaxed);
    forget_removed();
    snapshot.clear();
    text_index.clear();
    for (auto& o : objects) {
      snapshot.push_back(o.get());
      for (const AddrRange& r : o->text_vaddr) {
        text_index.push_back({r.start + o->bias, r.end + o->bias, o.get()});
      }
    }
    std::sort(text_index.begin(), text_index.end(),
              [](const TextIndex& a, const TextIndex& b) { return a.start < b.start; });
  }

  // The lines of removed objects lose those objects' addresses (the lines'
  // other code, a header inlined elsewhere, stays); then the objects go, with
  // their libdwfl sessions. Under both locks: nothing of the queries points
  // into them once the snapshot is rebuilt.
  void forget_removed() {
    if (removed.empty()) return;
    std::vector<LineEntry*> touched;
    for (const auto& o : removed)
      for (const Entry& e : o->table) touched.push_back(e.line);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (LineEntry* l : touched) {
      l->ranges.clear();
      l->merged = false;
    }
    for (const auto& o : objects)
      for (const Entry& e : o->table)
        if (std::binary_search(touched.begin(), touched.end(), e.line)) e.line->ranges.push_back({e.start, e.end});
    removed.clear();
  }

  Object* object_at(uintptr_t pc) {
    auto it = std::upper_bound(text_index.begin(), text_index.end(), pc,
                               [](uintptr_t v, const TextIndex& t) { return v < t.start; });
    if (it == text_index.begin()) return nullptr;
    --it;
    return pc < it->end ? it->obj : nullptr;
  }

  FileRec* file_rec(const std::string& normalized) {
    auto it = files.find(normalized);
    if (it != files.end()) return it->second.get();
    auto rec = std::make_unique<FileRec>();
    rec->path = normalized;
    rec->in_scope = in_source_scope(normalized);
    FileRec* raw = rec.get();
    files.emplace(normalized, std::move(rec));
    return raw;
  }

  LineEntry* line_entry(FileRec* f, uint32_t lineno) {
    auto& slot = f->lines[lineno];
    if (!slot) {
      slot = std::make_unique<LineEntry>();
      slot->file = f->path;
      slot->line = lineno;
    }
    return slot.get();
  }

  // Finds the object's DWARF (in the file itself or a separate debug file)
  // and checks that some compilation unit has a line table. Cheap: reads
  // unit headers only.
  void open_debug(Object* o) {
    if (o->debug_opened) return;
    o->debug_opened = true;
    attributable_version.fetch_add(1, std::memory_order_release);
    if (!debuginfo_path.empty()) {
      debuginfo_path_ptr = &debuginfo_path[0];
      callbacks.debuginfo_path = &debuginfo_path_ptr;
    }
    callbacks.find_elf = dwfl_build_id_find_elf;  // unused: we pass the file
    callbacks.find_debuginfo = find_debuginfo_local;
    callbacks.section_address = dwfl_offline_section_address;
    o->dwfl = dwfl_begin(&callbacks);
    if (!o->dwfl) return;
    // Base 0, add_p_vaddr: module addresses are the file's own vaddrs; the
    // run-time load bias is added by us.
    Dwfl_Module* mod = report_elf(o->dwfl, o->path, &o->open_error);
    dwfl_report_end(o->dwfl, nullptr, nullptr);
    if (!mod) return;
    void** userdata = nullptr;
    dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    if (userdata) *userdata = debuginfo_path.empty() ? nullptr : &debuginfo_path;
    o->dwarf = dwfl_module_getdwarf(mod, &o->dwarf_bias);
    if (!o->dwarf) return;
    Dwarf_CU* cu = nullptr;
    Dwarf_CU* next = nullptr;
    Dwarf_Half version;
    uint8_t unit_type;
    Dwarf_Die cudie, subdie;
    while (dwarf_get_units(o->dwarf, cu, &next, &version, &unit_type, &cudie, &subdie) == 0) {
      cu = next;
      if ((unit_type == DW_UT_compile || unit_type == DW_UT_skeleton) &&
          dwarf_hasattr(&cudie, DW_AT_stmt_list)) {
        o->has_line_info = true;
        break;
      }
    }
  }

  // Scans every compilation unit's line table once.
  void build(Object* o) {
    if (o->table_built) return;
    o->table_built = true;
    attributable_version.fetch_add(1, std::memory_order_release);
    open_debug(o);
    if (!o->has_line_info) {
      release_debug(o);
      return;
    }
    const uintptr_t to_runtime = static_cast<uintptr_t>(o->dwarf_bias) + o->bias;

    Dwarf_CU* cu = nullptr;
    Dwarf_CU* next = nullptr;
    Dwarf_Half version;
    uint8_t unit_type;
    Dwarf_Die cudie, subdie;
    std::unordered_map<const char*, FileRec*> cu_files;
    while (dwarf_get_units(o->dwarf, cu, &next, &version, &unit_type, &cudie, &subdie) == 0) {
      cu = next;
      // Partial units (dwz) and type units carry no address rows.
      if (unit_type != DW_UT_compile && unit_type != DW_UT_skeleton) continue;
      Dwarf_Lines* lines = nullptr;
      size_t n = 0;
      if (dwarf_getsrclines(&cudie, &lines, &n) != 0) continue;
      Dwarf_Attribute attr;
      const char* comp_dir = dwarf_formstring(dwarf_attr(&cudie, DW_AT_comp_dir, &attr));
      cu_files.clear();
      for (size_t i = 0; i + 1 < n; ++i) {
        Dwarf_Line* l = dwarf_onesrcline(lines, i);
        Dwarf_Line* nl = dwarf_onesrcline(lines, i + 1);
        bool end_seq = false;
        Dwarf_Addr a = 0, b = 0;
        if (!l || !nl || dwarf_lineendsequence(l, &end_seq) != 0 || end_seq) continue;
        if (dwarf_lineaddr(l, &a) != 0 || dwarf_lineaddr(nl, &b) != 0 || b <= a) continue;
        int lineno = 0;
        if (dwarf_lineno(l, &lineno) != 0 || lineno <= 0) continue;  // 0: no source line
        // Rows of sequences the linker discarded (COMDAT, gc-sections) sit
        // at 0 or at a tombstone address outside the text.
        if (!vaddr_in_text(*o, a)) continue;
        const char* src = dwarf_linesrc(l, nullptr, nullptr);
        if (!src) continue;
        FileRec*& f = cu_files[src];
        if (!f) {
          std::string p = src;
          if (p[0] != '/' && comp_dir && comp_dir[0]) p = std::string(comp_dir) + "/" + p;
          f = file_rec(normalize_path(p));
        }
        if (!f->in_scope) continue;
        LineEntry* e = line_entry(f, static_cast<uint32_t>(lineno));
        AddrRange r{static_cast<uintptr_t>(a) + to_runtime, static_cast<uintptr_t>(b) + to_runtime};
        o->table.push_back({r.start, r.end, e});
        e->ranges.push_back(r);
        e->merged = false;
        bool stmt = false;
        if (dwarf_linebeginstatement(l, &stmt) == 0 && stmt && r.start < e->first_statement)
          e->first_statement = r.start;
      }
    }

    // Sort, cut overlaps (units that overlap each other: keep the later
    // start), and merge neighbours of the same line.
    std::sort(o->table.begin(), o->table.end(),
              [](const Entry& x, const Entry& y) { return x.start < y.start; });
    std::vector<Entry> out;
    out.reserve(o->table.size());
    for (const Entry& e : o->table) {
      if (!out.empty() && out.back().end > e.start) out.back().end = e.start;
      if (!out.empty() && out.back().start == out.back().end) out.pop_back();
      if (!out.empty() && out.back().line == e.line && out.back().end == e.start) {
        out.back().end = e.end;
      } else {
        out.push_back(e);
      }
    }
    out.shrink_to_fit();
    o->table.swap(out);
    release_debug(o);
  }

  // Once the table is built it is all we need: free libdw's copies of the
  // line programs and unmap the debug files.
  static void release_debug(Object* o) {
    if (o->dwfl) dwfl_end(o->dwfl);
    o->dwfl = nullptr;
    o->dwarf = nullptr;
  }

  void build_all() {
    refresh();
    for (Object* o : snapshot) build(o);
  }
};

LineMap::LineMap(std::vector<std::string> binary_scope, std::vector<std::string> source_scope)
    : impl_(new Impl) {
  elf_version(EV_CURRENT);
  impl_->binary_scope = std::move(binary_scope);
  impl_->source_scope = std::move(source_scope);
  if (impl_->binary_scope.empty()) impl_->binary_scope = {"MAIN"};
  if (impl_->source_scope.empty()) impl_->source_scope = {"%"};
}

LineMap::~LineMap() = default;

void LineMap::set_debuginfo_path(const std::string& path) {
  std::lock_guard<std::mutex> lk(impl_->query_mu);
  impl_->debuginfo_path = path;
}

bool LineMap::add_object(const std::string& given_path, uintptr_t load_bias, bool is_main) {
  std::string path = given_path;
  if (path.empty()) {
    if (!is_main) return false;
    path = self_exe_path();
    if (path.empty()) return false;
  }
  if (!impl_->in_binary_scope(path, is_main)) return false;
  {
    std::lock_guard<std::mutex> lk(impl_->reg_mu);
    for (const auto& o : impl_->objects) {
      if (o->path == path && o->bias == load_bias) return true;  // already known
    }
  }
  auto obj = std::make_unique<Object>();
  obj->path = path;
  obj->bias = load_bias;
  obj->is_main = is_main;
  // e.g. "linux-vdso.so.1" has no file: it cannot be mapped, so it is not
  // in scope.
  if (!read_text_segments(path, &obj->text_vaddr)) return false;
  std::lock_guard<std::mutex> lk(impl_->reg_mu);
  for (const auto& o : impl_->objects) {
    if (o->path == path && o->bias == load_bias) return true;  // raced with another thread
  }
  impl_->objects.push_back(std::move(obj));
  impl_->generation.fetch_add(1, std::memory_order_release);
  impl_->attributable_version.fetch_add(1, std::memory_order_release);
  return true;
}

void LineMap::remove_object(const std::string& path, uintptr_t load_bias) {
  std::lock_guard<std::mutex> lk(impl_->reg_mu);
  auto& v = impl_->objects;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if ((*it)->path != path || (*it)->bias != load_bias || (*it)->is_main) continue;
    impl_->removed.push_back(std::move(*it));
    v.erase(it);
    impl_->generation.fetch_add(1, std::memory_order_release);
    impl_->attributable_version.fetch_add(1, std::memory_order_release);
    return;
  }
}

std::vector<AddrRange> LineMap::in_scope_text() const {
  std::lock_guard<std::mutex> lk(impl_->reg_mu);
  std::vector<AddrRange> out;
  for (const auto& o : impl_->objects) {
    for (const AddrRange& r : o->text_vaddr) out.push_back({r.start + o->bias, r.end + o->bias});
  }
  merge_ranges(&out);
  return out;
}

std::vector<AddrRange> LineMap::attributable_ranges() {
  std::lock_guard<std::mutex> lk(impl_->query_mu);
  impl_->refresh();
  std::vector<AddrRange> out;
  for (Object* o : impl_->snapshot) {
    if (o->table_built) {
      for (const Entry& e : o->table) out.push_back({e.start, e.end});
    } else if (!o->debug_opened || o->has_line_info) {
      for (const AddrRange& r : o->text_vaddr) out.push_back({r.start + o->bias, r.end + o->bias});
    }
  }
  merge_ranges(&out);
  return out;
}

uint64_t LineMap::objects_version() const { return impl_->generation.load(std::memory_order_acquire); }

uint64_t LineMap::attributable_version() const {
  return impl_->attributable_version.load(std::memory_order_acquire);
}

const Line* LineMap::lookup(uintptr_t pc) {
  std::lock_guard<std::mutex> lk(impl_->query_mu);
  impl_->refresh();
  Object* o = impl_->object_at(pc);
  if (!o) return nullptr;
  impl_->build(o);
  const std::vector<Entry>& t = o->table;
  auto it = std::upper_bound(t.begin(), t.end(), pc,
                             [](uintptr_t v, const Entry& e) { return v < e.start; });
  if (it == t.begin()) return nullptr;
  --it;
  return pc < it->end ? it->line : nullptr;
}

std::vector<AddrRange> LineMap::ranges_of(const Line* line) {
  if (!line) return {};
  std::lock_guard<std::mutex> lk(impl_->query_mu);
  // A line may have code in several objects (a header inlined in a library
  // and in the program): every in-scope table must be built.
  impl_->build_all();
  // Every Line* this class hands out is a LineEntry.
  LineEntry* e = const_cast<LineEntry*>(static_cast<const LineEntry*>(line));
  if (!e->merged) {
    merge_ranges(&e->ranges);
    e->merged = true;
  }
  return e->ranges;
}

uintptr_t LineMap::entry_address(const Line* line) {
  std::vector<AddrRange> r = ranges_of(line);
  if (r.empty()) return 0;
  uintptr_t stmt = static_cast<const LineEntry*>(line)->first_statement;
  for (const AddrRange& a : r)
    if (stmt >= a.start && stmt < a.end) return stmt;
  return r[0].start;
}

bool file_names_path(const std::string& file_given, const std::string& path) {
  if (file_given.empty()) return false;
  const bool absolute = file_given[0] == '/';
  const std::string file = normalize_path(file_given);  // also drops a leading "./"
  if (path == file) return true;
  if (absolute) return false;
  const std::string suffix = "/" + file;
  return path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<const Line*> LineMap::find(const std::string& spec) {
  std::vector<const Line*> out;
  size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= spec.size()) return out;
  const std::string num = spec.substr(colon + 1);
  if (num.find_first_not_of("0123456789") != std::string::npos || num.size() > 9) return out;
  const uint32_t lineno = static_cast<uint32_t>(std::stoul(num));
  const std::string file = spec.substr(0, colon);

  std::lock_guard<std::mutex> lk(impl_->query_mu);
  impl_->build_all();
  for (const auto& kv : impl_->files) {
    const FileRec& f = *kv.second;
    if (!f.in_scope || !file_names_path(file, f.path)) continue;
    auto it = f.lines.find(lineno);
    if (it != f.lines.end() && !it->second->ranges.empty()) out.push_back(it->second.get());
  }
  std::sort(out.begin(), out.end(), [](const Line* a, const Line* b) { return a->file < b->file; });
  return out;
}

std::vector<std::pair<std::string, uintptr_t>> LineMap::objects() const {
  std::lock_guard<std::mutex> lk(impl_->reg_mu);
  std::vector<std::pair<std::string, uintptr_t>> out;
  for (const auto& o : impl_->objects) out.emplace_back(o->path, o->bias);
  return out;
}

bool LineMap::in_binary_scope(const std::string& path, bool is_main) const {
  return impl_->in_binary_scope(path, is_main);
}

bool LineMap::in_source_scope(const std::string& path) const { return impl_->in_source_scope(path); }

std::string LineMap::debuginfo_path() {
  std::lock_guard<std::mutex> lk(impl_->query_mu);
  return impl_->debuginfo_path;
}

std::vector<std::string> LineMap::objects_without_debug_info() {
  std::lock_guard<std::mutex> lk(impl_->query_mu);
  impl_->refresh();
  std::vector<std::string> out;
  for (Object* o : impl_->snapshot) {
    impl_->open_debug(o);
    if (!o->has_line_info && !o->open_error) out.push_back(o->path);
  }
  return out;
}

std::vector<std::pair<std::string, int>> LineMap::objects_not_opened() {
  std::lock_guard<std::mutex> lk(impl_->query_mu);
  impl_->refresh();
  std::vector<std::pair<std::string, int>> out;
  for (Object* o : impl_->snapshot) {
    impl_->open_debug(o);
    if (o->open_error) out.emplace_back(o->path, o->open_error);
  }
  return out;
}

void LineMap::build_all() {
  std::lock_guard<std::mutex> lk(impl_->query_mu);
  impl_->build_all();
}

}  // namespace coz
