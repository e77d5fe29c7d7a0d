// The runtime's own file descriptors (profile, perf events, breakpoints)
// live high in the descriptor table, away from the numbers a program uses:
// programs allocate lowest-first, and `dup2(fd, 5)` or a loop closing 3..20
// before exec must not hit ours. They also never take more than the upper
// half of the open-file soft limit, so that the program's own open() fails
// no sooner than without the profiler.
#pragma once

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)  // linux/close_range.h, not in every libc's headers
#endif

namespace coz {

// The lowest descriptor number the runtime uses: half the soft limit, at
// most 4096 (a very high limit must not make the kernel grow the table).
int runtime_fd_base();

// Moves `fd` to the lowest free number at or above runtime_fd_base(), with
// close-on-exec, and closes the original (a descriptor already there stays
// as it is; open it with O_CLOEXEC). Returns the descriptor, or -1 (errno
// set, `fd` closed) when no number is free there.
int move_fd_high(int fd);

// A pipe made by code running for the runtime (libunwind makes one to test
// addresses before reading them): both ends moved high like move_fd_high,
// in place in `fds`, so its owner keeps the new numbers. An end that cannot
// move stays where it is. Without this the pipe took the program's lowest
// free numbers: its stdout, when the program started with it closed.
void move_pipe_high(int fds[2]);

// Opens `path` read-only for the runtime's own reading (ELF and DWARF files
// that libdwfl keeps open for the run), high like move_fd_high; -1 if it
// cannot be opened. Where the program has taken every number, one held back
// by fds_hold_reserve is given up for it.
int open_high(const char* path);

// Holds back a few descriptor numbers (8, high, on /dev/null) for the
// runtime's own files: a program that opens up to its limit would
// otherwise leave the final stacks' symbolizer none.
void fds_hold_reserve();
// Gives up one number held back, for an open of the runtime's that failed
// with EMFILE (the caller opens again); false when none is left.
bool fds_release_reserve();

// The runtime's descriptors are noted as they are made (move_fd_high,
// move_pipe_high) and forgotten when closed or replaced (close, dup2, dup3
// over them), so that close_range and closefrom, which would close every
// number of a range at once, can leave them open.
void fd_forget(int fd);
bool fd_is_runtimes(int fd);

// close_range(first, last, flags) without the runtime's descriptors: the
// numbers between them are closed by the system call, a range at a time
// (CLOSE_RANGE_CLOEXEC marks the whole range: the runtime's are close-on-exec
// already). Returns as close_range does.
int close_range_sparing_runtime(unsigned first, unsigned last, int flags);

}  // namespace coz
