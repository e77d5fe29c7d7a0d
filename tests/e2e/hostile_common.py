"""Helpers of the hostile-host tests (test_hostile_*.py): run a command plainly
and under `coz run`, and compare what an observer of the program would see."""

import os
import re
import subprocess

from conftest import LIBCOZ, coz_run

FAST = ["--experiment-length", "50ms"]


# The profiler's own messages. The profiler thread may print one while the
# program is half-way through a line of its own ("sort: " + message), so
# they are cut out wherever they start, not only at line starts.
_COZ_MESSAGE = re.compile(r"coz: (?:warning|error|note): [^\n]*\n")


def strip_coz(stderr):
    """Standard error without the profiler's own messages ("coz: warning: ...")."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    return _COZ_MESSAGE.sub("", text)


def run_plain(command, cwd=None, env=None, timeout=60, **kw):
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(command, cwd=cwd, env=full_env, timeout=timeout, capture_output=True, **kw)


def run_both(command, coz_args=(), cwd=None, env=None, profile=None, timeout=60, **kw):
    """(plain, profiled) results of `command`; the profile goes to `profile`."""
    plain = run_plain(command, cwd=cwd, env=env, timeout=timeout, **kw)
    args = [*FAST, *coz_args]
    if profile is not None:
        args += ["-o", str(profile)]
    profiled = coz_run(args, command, cwd=cwd, env=env, timeout=timeout, **kw)
    return plain, profiled


def assert_same_behaviour(plain, profiled, sort_lines=False):
    """Same exit status (or signal), same stdout, same stderr but for "coz: " lines."""
    def out(r):
        text = r.stdout.decode(errors="replace")
        return sorted(text.splitlines()) if sort_lines else text

    assert profiled.returncode == plain.returncode, (
        f"exit status {profiled.returncode} under coz, {plain.returncode} without; "
        f"stderr under coz:\n{profiled.stderr.decode(errors='replace')}")
    assert out(profiled) == out(plain)
    assert strip_coz(profiled.stderr) == strip_coz(plain.stderr)


def preloaded_env(extra=None):
    """Environment for a process started with libcoz preloaded by hand."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = LIBCOZ
    env.update(extra or {})
    return env
