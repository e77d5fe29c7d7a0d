"""Where libcoz.so is, and coz-perf-warmup beside it.

Imported by `coz run` before anything else it needs (cli.main): the helper
starts as early as the command can start it.
"""

import os

from .errors import CozError


def find_library(env=None):
    """Absolute path of libcoz.so: $COZ_LIBRARY, the build tree, or package data."""
    env = os.environ if env is None else env
    given = env.get("COZ_LIBRARY")
    if given:
        if not os.path.isfile(given):
            raise CozError(f"COZ_LIBRARY names '{given}', which is not a file",
                           hint="point COZ_LIBRARY at a built libcoz.so, or unset it")
        return os.path.abspath(given)
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "..", "..", "build", "libcoz", "libcoz.so"),
                  os.path.join(here, "lib", "libcoz.so")]
    for c in candidates:
        if os.path.isfile(c):
            return os.path.realpath(c)
    raise CozError("cannot find libcoz.so",
                   hint="build it with 'cmake -S . -B build && cmake --build build' in the "
                        "source tree, or set COZ_LIBRARY=/path/to/libcoz.so")


# Beside libcoz.so in the build tree (libcoz/perf_warmup.c).
PERF_WARMUP = "coz-perf-warmup"


def start_perf_warmup():
    """Start coz-perf-warmup, which holds one idle perf event of its own so that
    the kernel's wait for the first one on a quiet machine (an RCU grace period,
    13-16 ms) runs while the launcher starts rather than before the program's
    main. `coz` calls it first thing, before parsing: a mistake in the options
    costs a helper that ends with the command. Returns (pid, descriptor whose
    closing ends it), or None when it cannot start (no libcoz.so, or no helper
    beside it): the program's own first open then waits, as without it."""
    try:
        helper = os.path.join(os.path.dirname(find_library()), PERF_WARMUP)
    except CozError:
        return None  # `coz run` says so itself
    try:
        ready, hold = os.pipe()  # close-on-exec: the program inherits neither
    except OSError:
        return None
    try:
        pid = os.posix_spawn(helper, [helper], {}, file_actions=[
            (os.POSIX_SPAWN_DUP2, ready, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, 1, 2)])
    except OSError:
        os.close(hold)
        return None
    finally:
        os.close(ready)
    return pid, hold


def adopt_perf_warmup(env=None):
    """The helper the native front (libcoz/coz_front.c) started before the
    interpreter, as (pid, descriptor), or None. Its hand-over, COZ_PERF_WARMUP
    ("PID:FD"), leaves the environment and the descriptor is made
    close-on-exec, so the profiled program inherits neither."""
    env = os.environ if env is None else env
    given = env.pop("COZ_PERF_WARMUP", None)
    if not given:
        return None
    # Only the front's hand-over is taken: a child of this process and the
    # write end of a pipe past the standard streams. A value from elsewhere
    # must not take the program's standard input or another descriptor away.
    try:
        pid, fd = (int(part) for part in given.split(":"))
        if fd <= 2 or os.readlink(f"/proc/self/fd/{fd}")[:5] != "pipe:":
            return None
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            # The front's helper, already gone (now reaped): its pipe is the
            # front's too, and no use to anyone; the program must not inherit it.
            os.close(fd)
            return None
        os.set_inheritable(fd, False)
    except (ValueError, OSError):  # ChildProcessError: not a child of this process
        return None  # not the front's: the launcher starts its own
    return pid, fd


def stop_perf_warmup(warmup):
    """End the helper that start_perf_warmup started (its standard input ends)
    and reap it."""
    pid, hold = warmup
    os.close(hold)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
