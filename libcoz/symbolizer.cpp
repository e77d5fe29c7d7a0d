#include "symbolizer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "debuginfo.h"
#include "symbol_index.h"
#include "loaded_objects.h"

namespace coz {

namespace {

struct Segment {
  uintptr_t start, end;  // run-time
  bool operator==(const Segment& o) const { return start == o.start && end == o.end; }
};

struct Object {
  std::string path;
  uintptr_t bias = 0;
  std::vector<Segment> segments;
  bool is_main = false;
  bool opened = false;
  bool symbols_only = false;  // outside the binary scope: the symbol table alone
  Dwfl* dwfl = nullptr;
  Dwfl_Module* module = nullptr;
  std::string build_id;
  // The functions' ranges from .eh_frame_hdr's table, sorted (module
  // addresses): read on the first address that no symbol names.
  bool read_unwind_ranges = false;
  std::vector<std::pair<uintptr_t, uintptr_t>> unwind_ranges;
  // Its symbol table, sorted once it has named kDirectLookups addresses
  // (libdwfl's lookup reads the whole table each time; the sort costs about
  // as much as 16 of those lookups, so a short run's few addresses skip it).
  std::unique_ptr<SymbolIndex> symbols;
  unsigned symbol_lookups = 0;
  ~Object() {
    if (dwfl) dwfl_end(dwfl);
  }
};

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// A symbol table's name without its version ("__libc_start_main@@GLIBC_2.34"
// is __libc_start_main), demangled.
std::string symbol_name(const char* name) {
  const char* at = strchr(name, '@');
  return demangle(at ? std::string(name, at).c_str() : name);
}

// A PLT stub's name, "sym@plt" as objdump and perf write it, for an
// address in a .plt section, which no symbol covers (a loop around a
// library call samples there: about one in 80 runs of 600 samples of
// tests/e2e/test_unloaded_libraries.py's program). x86-64's stubs are 16
// bytes: in .plt the first calls the loader's resolver and the i-th after
// it jumps through the i-th relocation of .rela.plt; in .plt.sec (code
// built with -fcf-protection) the i-th does. Anything else in a .plt
// section (the resolver's stub, .plt.got's stubs, which jump through .got)
// is "[plt]". Empty where `addr` (the module's own address) is in none.
std::string plt_name(Dwfl_Module* module, Dwarf_Addr addr) {
  constexpr uint64_t kStub = 16;
  Dwarf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(module, &bias);
  size_t shstrndx = 0;
  if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return "";
  const Dwarf_Addr a = addr - bias;
  Elf_Scn* rela = nullptr;
  GElf_Shdr rela_sh{};
  std::string section;
  uint64_t index = UINT64_MAX;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name) continue;
    if (strcmp(name, ".rela.plt") == 0 && sh.sh_type == SHT_RELA) {
      rela = scn;
      rela_sh = sh;
    } else if (strncmp(name, ".plt", 4) == 0 && sh.sh_type == SHT_PROGBITS && a >= sh.sh_addr &&
               a < sh.sh_addr + sh.sh_size) {
      section = name;
      const uint64_t stub = (a - sh.sh_addr) / kStub;
      if (section == ".plt.sec") index = stub;
      else if (section == ".plt" && stub > 0) index = stub - 1;
    }
  }
  if (section.empty()) return "";
  const char* sym_name = nullptr;
  Elf_Data* data = rela ? elf_getdata(rela, nullptr) : nullptr;
  GElf_Rela r;
  Elf_Scn* symtab = rela ? elf_getscn(elf, rela_sh.sh_link) : nullptr;
  GElf_Shdr symtab_sh;
  Elf_Data* syms = symtab && gelf_getshdr(symtab, &symtab_sh) ? elf_getdata(symtab, nullptr) : nullptr;
  GElf_Sym sym;
  if (index != UINT64_MAX && data && syms && index < rela_sh.sh_size / sizeof(Elf64_Rela) &&
      gelf_getrela(data, static_cast<int>(index), &r) && GELF_R_SYM(r.r_info) != 0 &&
      gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym))
    sym_name = elf_strptr(elf, symtab_sh.sh_link, sym.st_name);
  return sym_name && *sym_name ? symbol_name(sym_name) + "@plt" : "[plt]";
}

// The vDSO has no file: the kernel maps its whole ELF image, section headers
// and symbol table included, at AT_SYSINFO_EHDR. Read from a copy (libelf
// may write into an image it is given), made once: the image never changes
// while the process lives, and libdwfl's Elf points into it until dwfl_end.
const std::vector<char>& vdso_image() {
  // Never destroyed: exit() runs the destructors of statics made after the
  // runtime's exit hook first, and the profiler thread symbolizes the final
  // stacks after that (the vDSO's addresses then read freed memory: a
  // sample in clock_gettime went unnamed in about 1 of 100 runs of
  // tests/e2e/test_unloaded_libraries.py's program).
  static const std::vector<char>* image = [] {
    auto* bytes = new std::vector<char>();
    const auto* base = reinterpret_cast<const char*>(getauxval(AT_SYSINFO_EHDR));
    if (!base || memcmp(base, ELFMAG, SELFMAG) != 0) return bytes;
    const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
    if (eh->e_ident[EI_CLASS] != (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32) || eh->e_phentsize != sizeof(ElfW(Phdr))) return bytes;
    size_t size = eh->e_shoff + static_cast<size_t>(eh->e_shnum) * eh->e_shentsize;
    const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(base + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++)
      if (ph[i].p_type == PT_LOAD) size = std::max<size_t>(size, ph[i].p_offset + ph[i].p_filesz);
    if (size > (1u << 20)) return bytes;  // not the few pages a vDSO is
    bytes->assign(base, base + size);
    return bytes;
  }();
  return *image;
}

int find_vdso_elf(Dwfl_Module*, void**, const char*, Dwarf_Addr, char** file_name, Elf** elfp) {
  *file_name = nullptr;
  const std::vector<char>& image = vdso_image();
  *elfp = image.empty() ? nullptr : elf_memory(const_cast<char*>(image.data()), image.size());
  return -1;
}

// No separate debug file either (libdwfl calls this for a fuller symbol table).
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word, char**) {
  return -1;
}

const Dwfl_Callbacks kVdsoCallbacks = {find_vdso_elf, no_debuginfo, nullptr, nullptr};

}  // namespace

struct Symbolizer::Impl {
  std::vector<std::unique_ptr<Object>> objects;   // loaded, as the last look found them
  unsigned long long seen_changes = 0;            // the loader's, at that look
  std::vector<std::unique_ptr<Object>> unloaded;  // unloaded by the program, newest first
  uint64_t unloaded_version = 0;                  // unloaded_objects_version() of that copy
  InScope in_scope;
  Dwfl_Callbacks callbacks{};

  explicit Impl(InScope scope) : in_scope(std::move(scope)) {
    callbacks.find_elf = dwfl_build_id_find_elf;  // unused: the file is given
    callbacks.find_debuginfo = find_debuginfo_local;
    callbacks.section_address = dwfl_offline_section_address;
  }

  // `list` becomes `fresh`, keeping each object it already had (same path,
  // bias and segments) with what was read of it.
  static void replace(std::vector<std::unique_ptr<Object>>* list, const std::vector<LoadedObject>& fresh) {
    std::vector<std::unique_ptr<Object>> out;
    for (const LoadedObject& lo : fresh) {
      auto o = std::make_unique<Object>();
      o->is_main = lo.is_main;
      o->path = !lo.name.empty() ? lo.name : (o->is_main ? self_exe() : "");
      o->bias = lo.bias;
      for (const ElfW(Phdr)& ph : lo.phdrs)
        if (ph.p_type == PT_LOAD && ph.p_memsz) o->segments.push_back({lo.bias + ph.p_vaddr, lo.bias + ph.p_vaddr + ph.p_memsz});
      for (auto& old : *list)
        if (old && old->bias == o->bias && old->path == o->path && old->is_main == o->is_main && old->segments == o->segments) {
          o = std::move(old);
          break;
        }
      out.push_back(std::move(o));
    }
    *list = std::move(out);
  }

  static Object* mapping(const std::vector<std::unique_ptr<Object>>& list, uintptr_t pc) {
    for (auto& o : list)
      for (const Segment& s : o->segments)
        if (pc >= s.start && pc < s.end) return o.get();
    return nullptr;
  }

  Object* find(uintptr_t pc) {
    if (Object* o = mapping(objects, pc)) return o;
    // A library loaded since the last look, when the loader's list changed.
    unsigned long long changes = loader_changes();
    if (!changes || changes != seen_changes) {
      seen_changes = changes;
      replace(&objects, loaded_objects());
      if (Object* o = mapping(objects, pc)) return o;
    }
    // None maps it now: an object the program unloaded since the sample
    // (loaded_objects.h), read from its file as a loaded one is.
    uint64_t version = unloaded_objects_version();
    if (version != unloaded_version) {
      unloaded_version = version;
      replace(&unloaded, unloaded_objects());
    }
    return mapping(unloaded, pc);
  }

  void open(Object* o) {
    if (o->opened) return;
    o->opened = true;
    if (o->path.empty()) return;
    if (is_vdso(o->path)) {
      // Its symbol table alone (it has no DWARF), over its own addresses.
      o->symbols_only = true;
      if (o->segments.empty() || !(o->dwfl = dwfl_begin(&kVdsoCallbacks))) return;
      uintptr_t lo = UINTPTR_MAX, hi = 0;
      for (const Segment& s : o->segments) lo = std::min(lo, s.start), hi = std::max(hi, s.end);
      o->module = dwfl_report_module(o->dwfl, o->path.c_str(), lo - o->bias, hi - o->bias);
      dwfl_report_end(o->dwfl, nullptr, nullptr);
      return;
    }
    o->symbols_only = in_scope && !in_scope(o->path, o->is_main);
    o->dwfl = dwfl_begin(&callbacks);
    if (!o->dwfl) return;
    // Base 0, add_p_vaddr: module addresses are the file's own.
    o->module = report_elf(o->dwfl, o->path);
    dwfl_report_end(o->dwfl, nullptr, nullptr);
    if (!o->module) return;
    const unsigned char* id = nullptr;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(o->module, &id, &vaddr);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < len; i++) {
      o->build_id += digits[id[i] >> 4];
      o->build_id += digits[id[i] & 15];
    }
  }
};

namespace {
// A section's address and bytes, or none.
struct SectionBytes {
  uintptr_t addr = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
};
SectionBytes section_named(Elf* elf, const char* want) {
  SectionBytes out;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return out;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr sh;
    const char* name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : nullptr;
    if (!name || strcmp(name, want) != 0 || sh.sh_type == SHT_NOBITS) continue;
    Elf_Data* d = elf_rawdata(scn, nullptr);
    if (!d || !d->d_buf) return out;
    out.addr = static_cast<uintptr_t>(sh.sh_addr);
    out.data = static_cast<const uint8_t*>(d->d_buf);
    out.size = d->d_size;
    return out;
  }
  return out;
}
int32_t read_s32(const uint8_t* p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

// Every function's range, as the unwind entries (.eh_frame FDEs) that the
// compiler emits for each function, symbol or not, give them: the sorted
// table of .eh_frame_hdr (a function's start), each entry's FDE for its
// length. Only the layout GCC and Clang write is read (table of
// datarel|sdata4 pairs, FDEs of pcrel|sdata4 starts whose start matches the
// table's); an entry in another is left out.
std::vector<std::pair<uintptr_t, uintptr_t>> read_unwind_ranges(Elf* elf) {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  const SectionBytes hdr = section_named(elf, ".eh_frame_hdr");
  const SectionBytes frames = section_named(elf, ".eh_frame");
  constexpr uint8_t kPcrelSdata4 = 0x1b, kUdata4 = 0x03, kDatarelSdata4 = 0x3b;
  if (hdr.size < 12 || !frames.data || hdr.data[0] != 1 || hdr.data[1] != kPcrelSdata4 || hdr.data[2] != kUdata4 ||
      hdr.data[3] != kDatarelSdata4)
    return out;
  uint32_t count;
  memcpy(&count, hdr.data + 8, sizeof count);
  if (count > (hdr.size - 12) / 8) return out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t* entry = hdr.data + 12 + 8 * static_cast<size_t>(i);
    const uintptr_t start = hdr.addr + static_cast<intptr_t>(read_s32(entry));
    const uintptr_t fde = hdr.addr + static_cast<intptr_t>(read_s32(entry + 4));
    // FDE: length (4), CIE pointer (4), start (pcrel sdata4), length of code (4).
    if (fde < frames.addr || fde - frames.addr + 16 > frames.size) continue;
    const uint8_t* f = frames.data + (fde - frames.addr);
    const uintptr_t begin = fde + 8 + static_cast<intptr_t>(read_s32(f + 8));
    const uint32_t length = static_cast<uint32_t>(read_s32(f + 12));
    if (begin != start || length == 0) continue;  // another encoding
    out.emplace_back(start, start + length);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The start (module address) of the function that covers `addr`, a module
// address, by its unwind entry.
bool unwind_entry_start(Object* o, Dwarf_Addr addr, uintptr_t* start) {
  Dwarf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(o->module, &bias);
  if (!o->read_unwind_ranges) {
    o->read_unwind_ranges = true;
    if (elf) o->unwind_ranges = read_unwind_ranges(elf);
  }
  if (!elf || addr < bias) return false;
  const uintptr_t vaddr = static_cast<uintptr_t>(addr - bias);
  const auto& r = o->unwind_ranges;
  auto it = std::upper_bound(r.begin(), r.end(), std::make_pair(vaddr, UINTPTR_MAX));
  if (it == r.begin() || vaddr >= std::prev(it)->second) return false;
  *start = static_cast<uintptr_t>(std::prev(it)->first + bias);
  return true;
}
}  // namespace

Symbolizer::Symbolizer(InScope in_scope) : impl_(new Impl(std::move(in_scope))) { elf_version(EV_CURRENT); }
Symbolizer::~Symbolizer() = default;

Symbolized Symbolizer::symbolize(uintptr_t pc) {
  Symbolized out;
  Object* o = impl_->find(pc);
  if (!o) return out;
  impl_->open(o);
  out.object = o->path.empty() ? "[vdso]" : o->path;
  out.object_address = pc - o->bias;
  out.build_id = o->build_id;
  if (!o->module) return out;
  const Dwarf_Addr addr = pc - o->bias;
  Dwarf_Addr bias = 0;
  // Outside the binary scope, no DWARF: reading libc's debug file for the
  // lines and inlined frames of a few addresses took ~50 ms at the exit of
  // a 10 ms program, where its symbol table takes ~1 ms.
  Dwarf_Die* cudie = o->symbols_only ? nullptr : dwfl_module_addrdie(o->module, addr, &bias);
  if (cudie) {
    const Dwarf_Addr daddr = addr - bias;
    const char* comp_dir = die_comp_dir(cudie);
    SourceFrame cur;
    if (Dwarf_Line* l = dwarf_getsrc_die(cudie, daddr)) {
      int lineno = 0;
      dwarf_lineno(l, &lineno);
      const char* src = dwarf_linesrc(l, nullptr, nullptr);
      if (src) cur.file = source_path(src, comp_dir);
      cur.line = lineno > 0 ? static_cast<uint32_t>(lineno) : 0;
    }
    // The innermost function scope at the address, then outwards: an
    // inlined call's caller is the function scope that contains the
    // inlined_subroutine DIE in the concrete tree (dwarf_getscopes follows
    // the abstract definition instead, after an inlined call).
    Dwarf_Die die;
    bool have = false;
    Dwarf_Die* scopes = nullptr;
    int n = dwarf_getscopes(cudie, daddr, &scopes);
    for (int i = 0; i < n && !have; i++) {
      int tag = dwarf_tag(&scopes[i]);
      if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
        die = scopes[i];
        have = true;
      }
    }
    free(scopes);
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    for (int depth = 0; have && depth < 64; depth++) {
      cur.function = die_function_name(&die);
      out.frames.push_back(cur);
      if (dwarf_tag(&die) != DW_TAG_inlined_subroutine) break;
      // The next frame out is where this function was inlined: its call site.
      Dwarf_Attribute attr;
      Dwarf_Word file_idx = 0, line = 0;
      cur = SourceFrame();
      if (dwarf_formudata(dwarf_attr(&die, DW_AT_call_line, &attr), &line) == 0)
        cur.line = static_cast<uint32_t>(line);
      if (dwarf_formudata(dwarf_attr(&die, DW_AT_call_file, &attr), &file_idx) == 0 &&
          (files || dwarf_getsrcfiles(cudie, &files, &nfiles) == 0) && file_idx < nfiles) {
        const char* f = dwarf_filesrc(files, file_idx, nullptr, nullptr);
        if (f) cur.file = source_path(f, comp_dir);
      }
      Dwarf_Die* chain = nullptr;
      int m = dwarf_getscopes_die(&die, &chain);
      have = false;
      for (int j = 1; j < m && !have; j++) {
        int tag = dwarf_tag(&chain[j]);
        if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
          die = chain[j];
          have = true;
        }
      }
      free(chain);
    }
    if (!out.frames.empty()) return out;
  }
  // Outside the binary scope, or no debug information (or no function
  // there): the symbol table, the object's own or its debug file's (whose
  // .symtab names the static functions a stripped library's .dynsym lacks,
  // such as libc's start_thread).
  constexpr unsigned kDirectLookups = 16;
  uintptr_t sym_start = 0;
  const char* name = nullptr;
  if (!o->symbols && o->symbol_lookups++ < kDirectLookups) {
    GElf_Sym sym;
    GElf_Word shndx = 0;
    name = dwfl_module_addrsym(o->module, addr, &sym, &shndx);
    sym_start = static_cast<uintptr_t>(sym.st_value);
  } else {
    if (!o->symbols) o->symbols.reset(new SymbolIndex(o->module));
    name = o->symbols->find(static_cast<uintptr_t>(addr), &sym_start);
  }
  if (name) {
    SourceFrame f;
    f.function = symbol_name(name);
    out.frames.push_back(f);
    out.symbol_start = sym_start + o->bias;
  } else if (std::string plt = plt_name(o->module, addr); !plt.empty()) {
    SourceFrame f;
    f.function = plt;
    out.frames.push_back(f);
  } else if (uintptr_t start = 0; unwind_entry_start(o, addr, &start)) {
    // No symbol at all (a stripped executable's own functions, a stripped
    // library's static ones): the function its unwind entry covers, named
    // by where it starts, so that its addresses are one frame, as a named
    // function's are, not one per instruction.
    SourceFrame f;
    char hex[2 + 2 * sizeof(uintptr_t) + 1];
    snprintf(hex, sizeof hex, "0x%jx", static_cast<uintmax_t>(start));
    f.function = path_base(o->path) + "+" + hex;
    out.frames.push_back(f);
    out.symbol_start = start + o->bias;
  }
  return out;
}

std::string Symbolizer::function_name(uintptr_t pc) {
  Symbolized s = symbolize(pc);
  return s.frames.empty() ? "" : s.frames.back().function;
}

}  // namespace coz
