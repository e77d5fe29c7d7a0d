// Units of virtual speedup besides lines (issue 12): functions and call
// sites, from the DWARF of the in-scope objects.
//   - A function's code is its out-of-line body and every copy of it inlined
//     elsewhere: an address lies in every function of its inline chain.
//   - A call site FILE:LINE is the code of the line and the code of every
//     function inlined by a call on that line (what an out-of-line call on
//     the line reaches is found at run time, in the callchain).
// Functions are identified by name and declaring file: the copies of a
// `static inline` function of a header, or of a C++ inline function, in
// several compilation units or objects are one function.
//
// Not signal safe, not thread safe: the profiler thread's (and start-up's,
// for --fixed-function and --fixed-callsite). The index is built only when a
// unit other than lines is asked for: reading every DIE of an object takes
// milliseconds for small programs, seconds for large C++ ones.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "line_map.h"

namespace coz {

enum class Unit : uint8_t { kLine = 0, kFunction = 1, kCallsite = 2 };
constexpr int kUnits = 3;
const char* unit_name(Unit u);
// "line", "function", "callsite"; false for anything else.
bool parse_unit(const std::string& s, Unit* out);

class UnitIndex {
 public:
  // `in_source_scope` tells which source files count (a function by the file
  // that declares it, an inlined call by the file of the call);
  // `debuginfo_path` as LineMap::set_debuginfo_path takes it ("": default).
  UnitIndex(std::function<bool(const std::string&)> in_source_scope, std::string debuginfo_path);
  ~UnitIndex();
  UnitIndex(const UnitIndex&) = delete;
  UnitIndex& operator=(const UnitIndex&) = delete;

  // Reads the DIEs of an object loaded at `bias` (once per object). False
  // when it has no DWARF (nothing to add).
  bool add_object(const std::string& path, uintptr_t bias);

  size_t function_count() const;
  // As experiments name it: its name (demangled), or "name [file]" when
  // functions of two files share the name. Stable once given.
  const std::string& function_name(uint32_t id);
  // Its code in run-time addresses, sorted and merged.
  const std::vector<AddrRange>& function_ranges(uint32_t id);
  // The functions a user's NAME means: those named exactly so, or whose
  // name without its parameter list is NAME or ends with "::NAME".
  std::vector<uint32_t> find_functions(const std::string& name);

  struct CallSite {
    std::string file;  // absolute, normalized: as the profile names files
    uint32_t line;
    std::vector<AddrRange> ranges;  // the code inlined by calls on the line
  };
  // The inlined call sites on lines FILE:LINE names (see file_names_path).
  std::vector<const CallSite*> find_callsites(const std::string& file, uint32_t line);

  // The functions `pc` lies in, innermost first, and the inlined calls it is
  // the code of, innermost first.
  struct At {
    std::vector<uint32_t> functions;
    std::vector<const CallSite*> callsites;
  };
  void at(uintptr_t pc, At* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coz
