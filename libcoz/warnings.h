// The runtime's warnings: each said once per process, written as a
// `warning` record of the profile, and printed on standard error unless the
// launcher collects them from the profiles (COZ_WARN_STDERR=0, set by
// `coz run`, which then says each once per run of the whole process tree).
//
// Not for signal context (strings, a lock). Warnings given before the
// profile is open wait for it.
#pragma once

#include <string>

namespace coz {

class ProfileWriter;

// Where warnings go from now on; `writer` may be null until it is open.
void warnings_configure(bool to_stderr, ProfileWriter* writer);
// Around fork (see fork_prepare in fork.cpp). In the child the list
// starts afresh: a followed child writes a profile of its own.
void warnings_fork_prepare();
void warnings_fork_parent();
void warnings_fork_child();

// `code` is the stable identifier of docs/profile-format.md, e.g. "no-debug-info".
void warn(const char* code, const std::string& message);

}  // namespace coz
