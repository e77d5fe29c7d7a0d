#include "debuginfo.h"

#include "fds.h"

#include <cxxabi.h>
#include <cerrno>
#include <dwarf.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace coz {

const char kDefaultDebuginfoPath[] = ":.debug:/usr/lib/debug";

namespace {

// True when `cand` may be the debug file of `mod`: same build-id when both
// have one.
bool debug_file_matches(Dwfl_Module* mod, int fd) {
  const unsigned char* want = nullptr;
  GElf_Addr vaddr;
  int want_len = dwfl_module_build_id(mod, &want, &vaddr);
  if (want_len <= 0) return true;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (!elf) return false;
  const void* have = nullptr;
  ssize_t have_len = dwelf_elf_gnu_build_id(elf, &have);
  bool ok = have_len <= 0 ||
            (have_len == want_len && memcmp(have, want, static_cast<size_t>(want_len)) == 0);
  elf_end(elf);
  return ok;
}

}  // namespace

// libdwfl find_debuginfo callback. The same local search as
// dwfl_standard_find_debuginfo (build-id under each debug root, then the
// .gnu_debuglink or .gnu_debugaltlink name beside the file, in its .debug
// folder, and under each root) but never its last resort, a debuginfod
// download: with DEBUGINFOD_URLS set (Debian sets it in login shells) that
// would make the profiled process reach the network and stall the profiler
// thread for up to 90 s per object.
Dwfl_Module* report_elf(Dwfl* dwfl, const std::string& path, int* open_error) {
  int fd = open_high(path.c_str());
  if (open_error) *open_error = fd < 0 ? errno : 0;
  if (fd < 0) return nullptr;
  Dwfl_Module* mod = dwfl_report_elf(dwfl, path.c_str(), path.c_str(), fd, 0, true);
  if (!mod) close(fd);  // consumed only on success
  return mod;
}

int find_debuginfo_local(Dwfl_Module* mod, void** userdata, const char* modname,
                         Dwarf_Addr base, const char* file_name, const char* debuglink_file,
                         GElf_Word debuglink_crc, char** debuginfo_file_name) {
  int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name,
                                        debuglink_file, debuglink_crc, debuginfo_file_name);
  // (Its open found every number taken: open_high's reserve, fds.h.)
  if (fd < 0 && errno == EMFILE && fds_release_reserve())
    fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                                      debuginfo_file_name);
  if (fd >= 0) return move_fd_high(fd);
  if (!file_name) return fd;
  const std::string file = file_name;
  const size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash);
  std::string link = debuglink_file ? debuglink_file
                                    : file.substr(file.rfind('/') + 1) + ".debug";
  // The module's user data is the debuginfo path (see Impl::open_debug).
  const std::string* path = static_cast<const std::string*>(*userdata);
  std::vector<std::string> candidates;
  if (link[0] == '/') {
    candidates.push_back(link);
  } else {
    const std::string& p = path ? *path : std::string(kDefaultDebuginfoPath);
    size_t i = 0;
    while (i <= p.size()) {
      size_t j = p.find(':', i);
      if (j == std::string::npos) j = p.size();
      std::string entry = p.substr(i, j - i);
      if (!entry.empty() && (entry[0] == '+' || entry[0] == '-')) entry.erase(0, 1);
      if (entry.empty()) {
        candidates.push_back(dir + "/" + link);
      } else if (entry[0] == '/') {
        candidates.push_back(entry + dir + "/" + link);
      } else {
        candidates.push_back(dir + "/" + entry + "/" + link);
      }
      i = j + 1;
    }
  }
  for (const std::string& c : candidates) {
    if (c == file) continue;
    fd = open_high(c.c_str());
    if (fd < 0) continue;
    // Only a .gnu_debuglink search (CRC given) is checked here; libdw
    // checks an alternate file against its .gnu_debugaltlink build-id.
    if (debuglink_crc == 0 || debug_file_matches(mod, fd)) {
      *debuginfo_file_name = strdup(c.c_str());
      return fd;
    }
    close(fd);
  }
  return -1;
}


std::string path_base(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Lexical normalization of an absolute or relative path: drops empty and "."
// components and folds "dir/.." (DWARF paths such as
// "/build/obj/../src/app.c" become "/build/src/app.c").
std::string normalize_path(const std::string& path) {
  const bool absolute = !path.empty() && path[0] == '/';
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    if (part.empty() || part == ".") {
      // skip
    } else if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
      }  // "/.." is "/"
    } else {
      parts.push_back(std::move(part));
    }
    i = j + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k) out += '/';
    out += parts[k];
  }
  if (out.empty()) out = ".";
  return out;
}


std::string source_path(const char* name, const char* comp_dir) {
  std::string p = name;
  if (!p.empty() && p[0] != '/' && comp_dir && comp_dir[0]) p = std::string(comp_dir) + "/" + p;
  return normalize_path(p);
}

std::string demangle(const char* name) {
  if (!name) return "";
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (out && status == 0) {
      std::string s(out);
      free(out);
      return s;
    }
    free(out);
  }
  return name;
}

std::string die_function_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (!n) n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  if (n) return demangle(n);
  n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
  return n ? n : "";
}

const char* die_comp_dir(Dwarf_Die* cudie) {
  Dwarf_Attribute attr;
  return dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &attr));
}

}  // namespace coz
