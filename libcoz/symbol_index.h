// The symbol that names an address, from a module's sorted symbol table.
#pragma once

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace coz {

// A module's symbol table (its own, its debug file's, its mini debug
// information's), sorted by address: the name dwfl_module_addrsym gives an
// address, found in O(log n). That call reads every symbol of the table at
// each address: on libjvm.so's 58,000 a Java program's stacks took over
// 10 s to name at its exit, and its final records were lost.
//
// libdwfl's choice, made from the sorted table:
// - the global symbols (global, weak, unique binding) first, the local ones
//   only when none of them has a size that covers the address (nor is a
//   label exactly at it);
// - the covering symbol that starts closest below the address; at one
//   address, the strongest binding, then the smallest size, then the first
//   in the table;
// - without one, a symbol of no size (an assembly label) at the highest
//   address at or below, if no symbol there or below extends past it and it
//   is in the address's section (an absolute one only exactly at it): the
//   last such in the table.
// (libdwfl reads the table in order, and a few choices among overlapping
// symbols depend on that order; on libc, libstdc++, libm, python3 and
// libjvm its answers and these agree at every address tested.)
class SymbolIndex {
 public:
  explicit SymbolIndex(Dwfl_Module* m) {
    const int n = dwfl_module_getsymtab(m);
    for (int i = 1; i < n; i++) {
      GElf_Sym sym;
      GElf_Addr value = 0;
      GElf_Word shndx = 0;
      Elf* elf = nullptr;
      Dwarf_Addr bias = 0;
      const char* name = dwfl_module_getsym_info(m, i, &sym, &value, &shndx, &elf, &bias);
      const int type = GELF_ST_TYPE(sym.st_info);
      if (!name || !name[0] || sym.st_shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE ||
          type == STT_TLS)
        continue;
      const int bind = GELF_ST_BIND(sym.st_info);
      const int rank = bind == STB_GLOBAL ? 3 : bind == STB_WEAK ? 2 : bind == STB_LOCAL ? 1 : 0;
      (bind == STB_LOCAL ? local_ : global_)
          .syms.push_back({static_cast<uintptr_t>(value), static_cast<uintptr_t>(sym.st_size), name, rank, shndx,
                           elf, static_cast<uintptr_t>(bias)});
    }
    global_.sort();
    local_.sort();
  }

  // The symbol's name and its start (module addresses), or null.
  const char* find(uintptr_t addr, uintptr_t* start) const {
    Found f;
    global_.search(addr, &f);
    if (!f.sized && !(f.label && f.label->value == addr)) local_.search(addr, &f);
    const Sym* s = f.sized ? f.sized : (f.label && f.label->value >= f.min_label ? f.label : nullptr);
    if (!s) return nullptr;
    *start = s->value;
    return s->name;
  }

 private:
  struct Sym {
    uintptr_t value, size;
    const char* name;
    int rank;
    GElf_Word shndx;
    Elf* elf;
    uintptr_t bias;
  };
  struct Found {
    const Sym* sized = nullptr;
    const Sym* label = nullptr;
    uintptr_t min_label = 0;  // the highest end of a symbol at or below the address
  };

  // Whether `addr` lies in the section of `s`.
  static bool same_section(const Sym& s, uintptr_t addr) {
    if (s.shndx >= SHN_LORESERVE) return s.value == addr;
    const uintptr_t a = addr - s.bias;
    for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(s.elf, scn));) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) && a >= sh.sh_addr && a < sh.sh_addr + sh.sh_size) return elf_ndxscn(scn) == s.shndx;
    }
    return false;
  }

  struct Table {
    std::vector<Sym> syms;           // by address; in table order at equal ones
    std::vector<uintptr_t> max_end;  // the highest end of syms[0..i]

    void sort() {
      std::stable_sort(syms.begin(), syms.end(), [](const Sym& a, const Sym& b) { return a.value < b.value; });
      max_end.resize(syms.size());
      uintptr_t m = 0;
      for (size_t i = 0; i < syms.size(); i++) max_end[i] = m = std::max(m, syms[i].value + syms[i].size);
    }

    // The first index of the run of symbols at syms[j]'s address.
    size_t group_start(size_t j) const {
      while (j > 0 && syms[j - 1].value == syms[j].value) j--;
      return j;
    }

    void search(uintptr_t addr, Found* f) const {
      const size_t i = static_cast<size_t>(
          std::upper_bound(syms.begin(), syms.end(), addr, [](uintptr_t a, const Sym& s) { return a < s.value; }) -
          syms.begin());
      if (i == 0) return;
      f->min_label = std::max(f->min_label, max_end[i - 1]);
      // Downwards from the closest, while a symbol at or below may still
      // cover the address.
      for (size_t j = i; j-- > 0 && max_end[j] > addr;) {
        const Sym& s = syms[j];
        if (s.size == 0 || addr - s.value >= s.size) continue;
        for (size_t k = group_start(j); k <= j; k++) {
          const Sym& c = syms[k];
          if (c.size == 0 || addr - c.value >= c.size) continue;
          const Sym* b = f->sized;
          if (!b || c.rank > b->rank || (c.rank == b->rank && c.size < b->size)) f->sized = &c;
        }
        return;
      }
      // None covers it: the labels at the highest address, if nothing at or
      // below it ends past them.
      if (max_end[i - 1] > syms[i - 1].value) return;
      for (size_t k = group_start(i - 1); k < i; k++)
        if (syms[k].size == 0 && syms[k].value >= f->min_label && same_section(syms[k], addr)) f->label = &syms[k];
    }
  };
  Table global_, local_;
};

}  // namespace coz
