// Any code address of the process to its object, function, file and line,
// with the functions inlined there: the frames of the conventional profile.
// Objects outside the binary scope are symbolized too (their functions from
// the symbol table when they have no debug information).
//
// Not signal safe, not thread safe: the profiler thread's. Each object's
// debug data is opened on its first query (libdwfl, local files only).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coz {

struct SourceFrame {
  std::string function;  // demangled; empty when unknown
  std::string file;      // absolute; empty without debug information
  uint32_t line = 0;     // 0 without debug information
};

struct Symbolized {
  std::string object;          // path of the ELF object; empty when none maps the address
  uintptr_t object_address = 0;  // the address in the object's own (link-time) addresses
  std::string build_id;        // hex; empty when none
  std::vector<SourceFrame> frames;  // innermost first: inlined functions, then the one they are in
};

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  Symbolized symbolize(uintptr_t pc);

  // The name of the function containing `pc` (its out-of-line function, not
  // an inlined one), or "" (for thread groups: the start routine's name).
  std::string function_name(uintptr_t pc);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// C++ and Rust symbol names, demangled; others as they are (debuginfo.cpp).
std::string demangle(const char* name);

}  // namespace coz
