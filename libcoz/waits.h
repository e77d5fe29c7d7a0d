// What a wait is: which category it belongs to, and whether it ended
// because another thread of the program released the waiter. The
// interposed calls (interpose.cpp) describe each blocking call with these;
// delay accounting, blocked samples and the synchronization counters read
// the same description.
//
// Descriptors: a read on a descriptor is released by a sibling thread when
// the other end is in this process: a pipe this process created, an
// AF_UNIX socket whose peer is this process (SO_PEERCRED), an eventfd
// created here. A pipe inherited from a shell (`cat x | app`) or a socket
// to a local server is the outside world. Checked only while an
// experiment runs (the answer matters for delays only then).
#pragma once

#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include <cstdint>

namespace coz {

// Wait categories of blocked samples (BCOZ's I/O, lock, synchronization,
// scheduling, other; sleeps apart). Their order is that of the profile's
// per-thread `wait_ns` and of StackKind after kCpu.
enum class WaitKind : uint8_t { kIo, kLock, kSleep, kSync, kSched, kOther };
constexpr int kWaitKinds = 6;

struct ThreadState;

// The end of an interposed wait of category `kind` that began at
// pre_block, in the thread that waited (not in signal context):
//  - delays: credits the wait when another program thread ended it
//    (`woken`), and pays what the thread owes;
//  - blocked samples: one per sampling period of waiting time (remainders
//    carried per thread and category), on the callchain of the call, for
//    the profiler thread (kind in the sample's flags);
//  - virtual speedup of waits: when the running experiment's line is the
//    call site (the call's first in-scope frame) and the category is in the
//    blocked scope, the wait's time earns delay as a CPU sample of the line
//    would (speedup x waiting time).
// `caller` is the return address of the interposed function.
void end_wait(ThreadState* t, WaitKind kind, bool woken, uintptr_t caller);
// A wait its wrapper left by an unwind instead of a return: pthread_cancel
// acting inside it (a forced unwind), or an exception thrown through it. Its
// time counts under its kind as end_wait's does, and the thread is no longer
// blocked; nothing is paid (the thread is ending, and a pause would be a
// cancellation point of its own).
void unwound_wait(ThreadState* t, WaitKind kind, uintptr_t caller);
// A longjmp with waits open (t->wait_depth): only a signal handler that
// interrupted them makes one, and it leaves them all at once. The outermost
// ends as an unwound wait, under the kind and call site its wrapper noted.
// (A handler that jumps within itself, to a setjmp of its own, would end the
// interrupted wait early, and that wait would count again at its return;
// no such handler is known to us.)
void jumped_out_of_waits(ThreadState* t);

// The call site frames of the current call, innermost first, without the
// runtime's own frames. Returns how many.
uint32_t call_stack(uintptr_t* pcs, uint32_t max, bool* truncated);

// The runtime's own code (libcoz.so's executable segment), [*start, *end);
// both 0 when unknown.
void runtime_text(uintptr_t* start, uintptr_t* end);
// libunwind's code, as the runtime loaded it; both 0 without libunwind.
void unwinder_text(uintptr_t* start, uintptr_t* end);
// An address in the runtime's function coz_runtime_unwinding: the one frame
// of a sample taken inside libunwind with no caller known (stacks.h).
uintptr_t runtime_unwinding_frame();
// An address in the runtime's function coz_kernel_in_io (_lock, _sleep,
// _sync, after the call's category): the innermost frame of the CPU time
// the kernel spent in an interposed call for the program, on the call's
// stack (no user-mode sample sees it).
uintptr_t kernel_in_call_frame(WaitKind kind);

// Descriptor bookkeeping, from the interposed calls that create, copy and
// close descriptors. Cheap: a byte store or an atomic insert.
void fds_pipe_created(const int fds[2]);
void fds_eventfd_created(int fd);
void fds_closed(int fd);
void fds_closed_range(unsigned first, unsigned last);  // close_range, closefrom
void fds_copied(int from, int to);
void fds_epoll_ctl(int epfd, int op, int fd, const struct epoll_event* ev);

// Around fork (the fork handlers, fork.cpp): prepare takes the epoll
// table's lock, parent releases it, child resets it. After the fork, in both
// processes, every descriptor open at the fork is the outside world: a pipe,
// socketpair or eventfd shared with another process links two processes, not
// two threads. (Done in the parent after a failed fork too: the safe side.)
void fds_fork_prepare();
void fds_fork_parent();
void fds_fork_child();
// A child started without the fork handlers (posix_spawn, vfork): the
// descriptors open now are treated as after a fork, by the parent, at its
// next look at a descriptor's class. Only sets a flag (a vfork child runs
// in the parent's memory).
void fds_handed_to_child();

// Whether a wait that returned on these descriptors was ended by a sibling
// thread. Answer false at once (no system call) outside experiments (and
// fd_woken_by_sibling, inline in runtime.h, without a call).
bool poll_woken_by_sibling(const struct pollfd* fds, unsigned long n, int ready);
bool select_woken_by_sibling(int nfds, const fd_set* readfds, int ready);
bool epoll_woken_by_sibling(int epfd, const struct epoll_event* events, int ready);

// The classification itself, without the experiment check.
bool fd_links_siblings(int fd);

}  // namespace coz
