// Any code address of the process to its object, function, file and line,
// with the functions inlined there: the frames of the conventional profile.
// Objects in the binary scope are read from their DWARF (the function from
// the symbol table where they have none); objects outside it (libc, ld.so,
// the runtime itself) from their ELF symbol table alone: a function name,
// no file, no line, no inlined frames.
//
// An address that no loaded object maps is looked for among the objects the
// program unloaded since (dlclose, loaded_objects.h), the most recently
// unloaded first, and read from its file the same way: stacks are
// symbolized long after they were sampled.
//
// Not signal safe, not thread safe: the profiler thread's. Each object is
// opened on its first query (libdwfl, local files only).
#pragma once

#include <cstdint>
#include <functional>
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
  // When the frame comes from the symbol table alone (outside the binary
  // scope, or no debug information): the run-time address where its symbol
  // starts. Every address of such a function names the same frame. 0 otherwise.
  uintptr_t symbol_start = 0;
};

class Symbolizer {
 public:
  // Whether an object is in the binary scope: its path (the main
  // executable's from /proc/self/exe) and whether it is the main executable.
  using InScope = std::function<bool(const std::string& path, bool is_main)>;

  // Without `in_scope`, every object is in scope.
  explicit Symbolizer(InScope in_scope = nullptr);
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
