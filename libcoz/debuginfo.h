// Finding the debug information of an ELF object with libdwfl, on this
// machine only: the object itself, a separate debug file by build-id under
// the debug roots, or by .gnu_debuglink beside the object, in its .debug
// folder, or under the roots. Never debuginfod: with DEBUGINFOD_URLS set
// (Debian sets it in login shells) libdwfl's standard search would make the
// profiled process reach the network and stall the profiler thread for up to
// 90 s per object. Shared by the line map and the symbolizer.
#pragma once

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <string>

namespace coz {

// The default search path, in libdwfl's syntax: the object's folder, its
// .debug subfolder, and /usr/lib/debug.
extern const char kDefaultDebuginfoPath[];

// libdwfl find_debuginfo callback. The module's user data, when set, is a
// std::string* with the search path to use instead of the default.
int find_debuginfo_local(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                         const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                         char** debuginfo_file_name);

// dwfl_report_elf (base 0, add_p_vaddr: module addresses are the file's own)
// on a descriptor the runtime opened high (fds.h), which libdwfl keeps for
// the session: its own open would take the program's lowest free number, its
// stdout when the program started with it closed. Null on failure;
// `open_error`, when given, is then the open's errno (0: opened, but libdwfl
// refused the file), so that a full descriptor table is not mistaken for a
// file without debug information.
Dwfl_Module* report_elf(Dwfl* dwfl, const std::string& path, int* open_error = nullptr);

// The last component of a path ("/usr/bin/sort" is "sort"; a name
// without a slash is itself): how a frame or a call site names its object.
std::string path_base(const std::string& path);

// Lexical normalization: drops empty and "." components and folds
// "dir/.." ("/build/obj/../src/app.c" becomes "/build/src/app.c").
std::string normalize_path(const std::string& path);

// A source file named in DWARF, made absolute with the compilation
// directory when it is relative, and normalized: how the profile names files.
std::string source_path(const char* name, const char* comp_dir);

// C++ and Rust symbol names, demangled; others as they are.
std::string demangle(const char* name);

// The function a subprogram or inlined_subroutine DIE stands for: its
// linkage name demangled (qualified C++ and Rust names), else its name,
// following abstract origins and specifications; "" when it has none.
std::string die_function_name(Dwarf_Die* die);

// DW_AT_comp_dir of a compilation unit's DIE, or null.
const char* die_comp_dir(Dwarf_Die* cudie);

}  // namespace coz
