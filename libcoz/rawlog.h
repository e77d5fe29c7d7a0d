// Logging for fragile contexts (before main, beside foreign allocators,
// inside interposed calls): formats into a stack buffer and write(2)s it to
// standard error. No malloc, no stdio, no locks.
//
// Safe in signal context only for formats of %s, %d, %ld, %lu, %zu (no
// floating point), which is all the runtime uses.
#pragma once

namespace coz {

// Prints "coz: <message>\n" to stderr.
void raw_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace coz
