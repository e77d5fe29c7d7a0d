#include "units.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "debuginfo.h"

namespace coz {

const char* unit_name(Unit u) {
  switch (u) {
    case Unit::kFunction:
      return "function";
    case Unit::kCallsite:
      return "callsite";
    default:
      return "line";
  }
}

bool parse_unit(const std::string& s, Unit* out) {
  for (Unit u : {Unit::kLine, Unit::kFunction, Unit::kCallsite}) {
    if (s == unit_name(u)) {
      *out = u;
      return true;
    }
  }
  return false;
}

namespace {

void merge(std::vector<AddrRange>* v) {
  std::sort(v->begin(), v->end(), [](const AddrRange& a, const AddrRange& b) { return a.start < b.start; });
  size_t w = 0;
  for (size_t i = 0; i < v->size(); i++) {
    if (w && (*v)[i].start <= (*v)[w - 1].end) {
      (*v)[w - 1].end = std::max((*v)[w - 1].end, (*v)[i].end);
    } else {
      (*v)[w++] = (*v)[i];
    }
  }
  v->resize(w);
}

// One function or call-site range, for at(): ranges of the DIEs of one
// object nest (an inlined call inside its caller), so the ranges that hold
// an address are the last one starting at or before it and its parents.
struct Span {
  uintptr_t start, end;
  uint32_t ref;  // kCallsiteRef | call site id, or function id
  uint32_t parent;
};
constexpr uint32_t kCallsiteRef = 1u << 31;
constexpr uint32_t kNone = UINT32_MAX;
constexpr int kMaxDepth = 256;  // DIE nesting; deeper trees are malformed

struct Function {
  std::string base;  // its name
  std::string decl;  // the file that declares it
  std::string name;  // as experiments name it; empty until asked
  std::vector<AddrRange> ranges;
  bool merged = true;
};

}  // namespace

struct UnitIndex::Impl {
  std::function<bool(const std::string&)> in_source_scope;
  std::string debuginfo_path;
  char* debuginfo_path_ptr = nullptr;
  Dwfl_Callbacks callbacks{};
  std::vector<std::pair<std::string, uintptr_t>> added;

  std::vector<Function> functions;
  std::map<std::pair<std::string, std::string>, uint32_t> function_ids;  // (name, decl file)
  std::map<std::string, int> files_per_name;  // how many declaring files each name has
  std::vector<std::unique_ptr<CallSite>> callsites;
  std::map<std::pair<std::string, uint32_t>, uint32_t> callsite_ids;
  std::vector<Span> spans;
  bool spans_ready = true;

  std::unordered_map<std::string, bool> scope_cache;
  bool file_in_scope(const std::string& f) {
    auto it = scope_cache.find(f);
    if (it != scope_cache.end()) return it->second;
    bool in = in_source_scope(f);
    scope_cache.emplace(f, in);
    return in;
  }

  // Per object being read.
  struct Reading {
    uintptr_t to_runtime = 0;  // DWARF address + this = run-time address
    std::vector<AddrRange> text;  // executable segments, module addresses
    uintptr_t dwarf_bias = 0;
    Dwarf_Die cudie;
    const char* comp_dir = nullptr;
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
  };

  bool in_text(const Reading& r, Dwarf_Addr a, Dwarf_Addr b) const {
    for (const AddrRange& t : r.text)
      if (a + r.dwarf_bias >= t.start && b + r.dwarf_bias <= t.end) return true;
    return false;
  }

  std::vector<AddrRange> die_ranges(const Reading& r, Dwarf_Die* die) {
    std::vector<AddrRange> out;
    Dwarf_Addr base = 0, a = 0, b = 0;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(die, off, &base, &a, &b)) > 0) {
      // Code the linker discarded sits at 0 or at a tombstone outside the text.
      if (b > a && a != 0 && in_text(r, a, b)) out.push_back({a + r.to_runtime, b + r.to_runtime});
    }
    return out;
  }

  uint32_t function_id(const std::string& name, const std::string& decl) {
    auto key = std::make_pair(name, decl);
    auto it = function_ids.find(key);
    if (it != function_ids.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(functions.size());
    functions.push_back(Function{name, decl, "", {}, true});
    function_ids.emplace(key, id);
    files_per_name[name]++;
    return id;
  }

  uint32_t callsite_id(const std::string& file, uint32_t line) {
    auto key = std::make_pair(file, line);
    auto it = callsite_ids.find(key);
    if (it != callsite_ids.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(callsites.size());
    callsites.push_back(std::unique_ptr<CallSite>(new CallSite{file, line, {}}));
    callsite_ids.emplace(key, id);
    return id;
  }

  void add_spans(const std::vector<AddrRange>& rs, uint32_t ref) {
    for (const AddrRange& x : rs) spans.push_back({x.start, x.end, ref, kNone});
    spans_ready = false;
  }

  // A function DIE with code: a subprogram or an inlined call.
  void note_function(Reading& r, Dwarf_Die* die, int tag) {
    std::vector<AddrRange> rs = die_ranges(r, die);
    if (rs.empty()) return;
    std::string name = die_function_name(die);
    const char* decl = dwarf_decl_file(die);
    if (!name.empty() && decl) {
      std::string path = source_path(decl, r.comp_dir);
      if (file_in_scope(path)) {
        uint32_t id = function_id(name, path);
        Function& f = functions[id];
        f.ranges.insert(f.ranges.end(), rs.begin(), rs.end());
        f.merged = false;
        add_spans(rs, id);
      }
    }
    if (tag != DW_TAG_inlined_subroutine) return;
    Dwarf_Attribute attr;
    Dwarf_Word file_idx = 0, line = 0;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &line) != 0 || line == 0) return;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &file_idx) != 0) return;
    if (!r.files && dwarf_getsrcfiles(&r.cudie, &r.files, &r.nfiles) != 0) return;
    if (file_idx >= r.nfiles) return;
    const char* f = dwarf_filesrc(r.files, file_idx, nullptr, nullptr);
    if (!f) return;
    std::string path = source_path(f, r.comp_dir);
    if (!file_in_scope(path)) return;
    uint32_t id = callsite_id(path, static_cast<uint32_t>(line));
    CallSite& c = *callsites[id];
    c.ranges.insert(c.ranges.end(), rs.begin(), rs.end());
    add_spans(rs, kCallsiteRef | id);
  }

  void walk(Reading& r, Dwarf_Die* parent, int depth) {
    if (depth > kMaxDepth) return;
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0) return;
    do {
      int tag = dwarf_tag(&child);
      switch (tag) {
        case DW_TAG_subprogram:
        case DW_TAG_inlined_subroutine:
          note_function(r, &child, tag);
          walk(r, &child, depth + 1);
          break;
        case DW_TAG_lexical_block:
        case DW_TAG_namespace:
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
        case DW_TAG_union_type:
        case DW_TAG_module:
          walk(r, &child, depth + 1);
          break;
        default:
          break;
      }
    } while (dwarf_siblingof(&child, &child) == 0);
  }

  bool read(const std::string& path, uintptr_t bias) {
    if (!debuginfo_path.empty()) {
      debuginfo_path_ptr = &debuginfo_path[0];
      callbacks.debuginfo_path = &debuginfo_path_ptr;
    }
    callbacks.find_elf = dwfl_build_id_find_elf;  // unused: the file is given
    callbacks.find_debuginfo = find_debuginfo_local;
    callbacks.section_address = dwfl_offline_section_address;
    Dwfl* dwfl = dwfl_begin(&callbacks);
    if (!dwfl) return false;
    bool any = false;
    // Base 0, add_p_vaddr: module addresses are the file's own.
    Dwfl_Module* mod = report_elf(dwfl, path);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (mod) {
      void** userdata = nullptr;
      dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
      if (userdata) *userdata = debuginfo_path.empty() ? nullptr : &debuginfo_path;
      Reading r;
      GElf_Addr elf_bias = 0;
      if (Elf* elf = dwfl_module_getelf(mod, &elf_bias)) {
        size_t n = 0;
        if (elf_getphdrnum(elf, &n) == 0) {
          for (size_t i = 0; i < n; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
              r.text.push_back({ph.p_vaddr + elf_bias, ph.p_vaddr + ph.p_memsz + elf_bias});
          }
        }
      }
      Dwarf_Addr dwarf_bias = 0;
      Dwarf* dwarf = dwfl_module_getdwarf(mod, &dwarf_bias);
      if (dwarf) {
        any = true;
        r.dwarf_bias = dwarf_bias;
        r.to_runtime = static_cast<uintptr_t>(dwarf_bias) + bias;
        Dwarf_CU* cu = nullptr;
        Dwarf_CU* next = nullptr;
        Dwarf_Half version;
        uint8_t unit_type;
        Dwarf_Die subdie;
        while (dwarf_get_units(dwarf, cu, &next, &version, &unit_type, &r.cudie, &subdie) == 0) {
          cu = next;
          if (unit_type != DW_UT_compile && unit_type != DW_UT_skeleton) continue;
          r.comp_dir = die_comp_dir(&r.cudie);
          r.files = nullptr;
          r.nfiles = 0;
          walk(r, &r.cudie, 0);
        }
      }
    }
    dwfl_end(dwfl);
    return any;
  }

  void prepare_spans() {
    if (spans_ready) return;
    spans_ready = true;
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<uint32_t> open;
    for (uint32_t i = 0; i < spans.size(); i++) {
      while (!open.empty() && spans[open.back()].end <= spans[i].start) open.pop_back();
      spans[i].parent = open.empty() ? kNone : open.back();
      open.push_back(i);
    }
  }
};

UnitIndex::UnitIndex(std::function<bool(const std::string&)> in_source_scope, std::string debuginfo_path)
    : impl_(new Impl) {
  elf_version(EV_CURRENT);
  impl_->in_source_scope = std::move(in_source_scope);
  impl_->debuginfo_path = std::move(debuginfo_path);
}

UnitIndex::~UnitIndex() = default;

bool UnitIndex::add_object(const std::string& path, uintptr_t bias) {
  for (const auto& a : impl_->added)
    if (a.first == path && a.second == bias) return true;
  impl_->added.emplace_back(path, bias);
  return impl_->read(path, bias);
}

size_t UnitIndex::function_count() const { return impl_->functions.size(); }

const std::string& UnitIndex::function_name(uint32_t id) {
  Function& f = impl_->functions.at(id);
  if (f.name.empty()) f.name = impl_->files_per_name[f.base] > 1 ? f.base + " [" + f.decl + "]" : f.base;
  return f.name;
}

const std::vector<AddrRange>& UnitIndex::function_ranges(uint32_t id) {
  Function& f = impl_->functions.at(id);
  if (!f.merged) {
    merge(&f.ranges);
    f.merged = true;
  }
  return f.ranges;
}

std::vector<uint32_t> UnitIndex::find_functions(const std::string& name) {
  std::vector<uint32_t> out;
  for (uint32_t id = 0; id < impl_->functions.size(); id++) {
    const Function& f = impl_->functions[id];
    std::string bare = f.base.substr(0, f.base.find('('));  // C++: without the parameter list
    bool match = f.base == name || bare == name || function_name(id) == name ||
                 (bare.size() > name.size() + 2 && bare.compare(bare.size() - name.size(), name.size(), name) == 0 &&
                  bare.compare(bare.size() - name.size() - 2, 2, "::") == 0);
    if (match) out.push_back(id);
  }
  return out;
}

std::vector<const UnitIndex::CallSite*> UnitIndex::find_callsites(const std::string& file, uint32_t line) {
  std::vector<const CallSite*> out;
  for (const auto& c : impl_->callsites) {
    if (c->line == line && file_names_path(file, c->file)) {
      merge(&c->ranges);
      out.push_back(c.get());
    }
  }
  return out;
}

void UnitIndex::at(uintptr_t pc, At* out) {
  out->functions.clear();
  out->callsites.clear();
  impl_->prepare_spans();
  const std::vector<Span>& spans = impl_->spans;
  auto it = std::upper_bound(spans.begin(), spans.end(), pc, [](uintptr_t v, const Span& s) { return v < s.start; });
  if (it == spans.begin()) return;
  uint32_t i = static_cast<uint32_t>(it - spans.begin() - 1);
  for (int hops = 0; i != kNone && hops < kMaxDepth * 4; hops++, i = spans[i].parent) {
    const Span& s = spans[i];
    if (pc < s.start || pc >= s.end) continue;
    if (s.ref & kCallsiteRef) {
      const CallSite* c = impl_->callsites[s.ref & ~kCallsiteRef].get();
      if (std::find(out->callsites.begin(), out->callsites.end(), c) == out->callsites.end())
        out->callsites.push_back(c);
    } else if (std::find(out->functions.begin(), out->functions.end(), s.ref) == out->functions.end()) {
      out->functions.push_back(s.ref);
    }
  }
}

}  // namespace coz
