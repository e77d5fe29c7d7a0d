// Logging for fragile contexts (before main, beside foreign allocators,
// inside interposed calls): formats into a stack buffer and write(2)s it to
// standard error. No malloc, no stdio, no locks.
//
// Safe in signal context only for formats of %s, %d, %ld, %lu, %zu (no
// floating point), which is all the runtime uses.
#pragma once

namespace coz {

// Prints "coz: <message>\n" to stderr: the standard error the process
// started with (raw_log_keep_stderr), not whatever the program has made its
// descriptor 2 since.
void raw_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Keeps the standard error of the process's start for raw_log, in a
// descriptor of the runtime's own (fds.h): a daemon or a network service
// that puts its log file or a client's socket on descriptor 2 must not
// receive coz's lines. Without a standard error at the start, raw_log says
// nothing; without a free descriptor, it writes to descriptor 2. Once per
// process: a forked child keeps its parent's.
void raw_log_keep_stderr();

}  // namespace coz
