// PC to source line mapping with elfutils libdw, and binary/source scope.
//
// Not signal safe: used by the profiler thread (lookups, building the map)
// and at start-up (registering objects). The hot path in signal context only
// reads the plain address-range arrays this class hands out (see
// ranges_of()), never the class itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace coz {

// One source line. Interned: a Line* stays valid, and unique per
// (file, line), for the life of the LineMap.
struct Line {
  std::string file;  // absolute when DWARF gives a compilation directory
  uint32_t line;
  std::string name() const { return file + ":" + std::to_string(line); }
};

// Half-open range of run-time addresses [start, end).
struct AddrRange {
  uintptr_t start;
  uintptr_t end;
};

// Matches a name against upstream-style patterns: '%' matches any run of
// characters (including none), everything else literally. "MAIN" in a
// binary scope stands for the main executable.
bool scope_match(const std::string& pattern, const std::string& text);

// Whether FILE of a "FILE:LINE" the user gave names `path` (absolute,
// normalized): the same path, or, for a relative FILE, the end of the path
// at a '/' boundary ("app.c" names "/src/app.c").
bool file_names_path(const std::string& file, const std::string& path);

class LineMap {
 public:
  LineMap(std::vector<std::string> binary_scope, std::vector<std::string> source_scope);
  ~LineMap();
  LineMap(const LineMap&) = delete;
  LineMap& operator=(const LineMap&) = delete;

  // Register a loaded object: its path (as dl_iterate_phdr gives it; "" for
  // the main program is resolved via /proc/self/exe), load bias, and whether
  // it is the main executable. Returns true when it is in binary scope.
  // Cheap: it must not parse DWARF line tables (start-up cost).
  bool add_object(const std::string& path, uintptr_t load_bias, bool is_main);

  // An object the program unloaded (dlclose), as add_object registered it
  // (its path as the loader gave it, its load bias): its addresses map no
  // line from now on, in lookup, ranges_of and attributable_ranges, so that
  // a library loaded there later is not read as this one. Its lines stay
  // known by name. No effect on an object not registered.
  void remove_object(const std::string& path, uintptr_t load_bias);

  // Executable address ranges of all in-scope objects (run-time addresses).
  std::vector<AddrRange> in_scope_text() const;

  // The addresses a sample can be attributed to: for objects whose line
  // table is built, the code that has a line in the source scope; for the
  // others, all their executable code (until their table is read). Objects
  // known to have no line information contribute nothing. Sorted, merged.
  std::vector<AddrRange> attributable_ranges();
  // Changes whenever attributable_ranges() would: an object added, a table
  // built. Cheap, lock-free.
  uint64_t attributable_version() const;

  // Changes whenever an object is added or removed: what lookup() answers
  // for an address may have changed (a cache of its answers must go).
  // Cheap, lock-free.
  uint64_t objects_version() const;

  // PC (run-time address) to line; nullptr when the PC is outside in-scope
  // objects, has no line information, or its file is outside the source
  // scope. Builds each object's table on first use.
  const Line* lookup(uintptr_t pc);

  // All run-time address ranges whose line is `line` (a line can appear in
  // many places: inlining, unrolling, templates). Sorted, merged.
  std::vector<AddrRange> ranges_of(const Line* line);
  // Where the line's code begins, for a breakpoint that counts its runs:
  // the lowest address of a row the compiler marked as the start of a
  // statement (is_stmt), as debuggers choose; the lowest address of the
  // line when none is. A line's lowest address can be a fragment only some
  // runs reach: in a Go loop, the code after a mutex's slow path. 0 when
  // the line has no code.
  uintptr_t entry_address(const Line* line);

  // Lines matching "file:line" where file matches the end of the path at a
  // '/' boundary ("app.c:12" matches "/src/app.c:12"). Empty when none.
  std::vector<const Line*> find(const std::string& file_colon_line);

  // The in-scope objects registered so far: (path, load bias).
  std::vector<std::pair<std::string, uintptr_t>> objects() const;
  // Whether an object (its path; the main executable's from /proc/self/exe)
  // matches the binary scope's patterns.
  bool in_binary_scope(const std::string& path, bool is_main) const;
  // Whether a source file (absolute, normalized) is in the source scope.
  bool in_source_scope(const std::string& path) const;
  // The search path of set_debuginfo_path ("" for the default).
  std::string debuginfo_path();

  // Paths of in-scope objects that have no DWARF line information (after
  // looking for separate debug files).
  std::vector<std::string> objects_without_debug_info();
  // In-scope objects whose file could not be opened, with the open's errno
  // (EMFILE when the program's descriptor limit was reached): their lines
  // are unknown for that reason, not for a lack of debug information.
  std::vector<std::pair<std::string, int>> objects_not_opened();

  // Force the tables of every in-scope object to be built now.
  void build_all();

  // Where to look for separate debug files, in libdwfl's syntax
  // (":.debug:/usr/lib/debug" is the default: the object's folder, its
  // .debug subfolder, and a debug root searched by build-id
  // (<root>/.build-id/xx/yyyy.debug) and by .gnu_debuglink path). Call
  // before the first query.
  void set_debuginfo_path(const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coz
