"""Shared helpers for end-to-end tests: build small C programs, run them
plainly and under `coz run`, read the profile with the project's one parser.

The runtime is taken from $COZ_BUILD_DIR/libcoz/libcoz.so (default
<repo>/build); the tests fail, not skip, when it is missing: the README's
test command builds it first.
"""

import glob
import json
import os
import signal
import subprocess
import sys

import pytest

# The programs start as from an interactive shell's foreground: SIGINT and
# SIGQUIT at their defaults, nothing blocked. A suite started in the
# background of a shell without job control (`cmd &`) would pass them on
# ignored (dispositions SIG_IGN survive exec), and the tests that check a
# program's signals would see the launcher's environment, not the product.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGQUIT, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_SETMASK, [])

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
BUILD = os.environ.get("COZ_BUILD_DIR", os.path.join(REPO, "build"))
LIBCOZ = os.path.join(BUILD, "libcoz", "libcoz.so")
PROGRAMS = os.path.join(os.path.dirname(__file__), "programs")
INCLUDE = os.path.join(REPO, "include")


def source_marker(program, text):
    """'program.c:N', N the line of tests/e2e/programs/program.c that holds
    the comment /* text */."""
    with open(os.path.join(PROGRAMS, program + ".c")) as f:
        for n, line in enumerate(f, 1):
            if f"/* {text} */" in line:
                return f"{program}.c:{n}"
    raise AssertionError(f"no /* {text} */ in {program}.c")


@pytest.fixture(scope="session")
def libcoz():
    assert os.path.exists(LIBCOZ), f"{LIBCOZ} is missing: build the project first (scripts/bootstrap.sh build)"
    return LIBCOZ


_built = {}


def build_program(name, out_dir, flags=("-g", "-O1"), sources=None, libs=("-lpthread",)):
    """Compiles tests/e2e/programs/<name>.c (or `sources`) into out_dir; cached per flags."""
    key = (name, tuple(flags), str(out_dir))
    if key in _built:
        return _built[key]
    srcs = sources or [os.path.join(PROGRAMS, name + ".c")]
    exe = os.path.join(str(out_dir), name + ("" if flags == ("-g", "-O1") else "_" + str(abs(hash(flags)))))
    cmd = ["cc", *flags, "-I", INCLUDE, *srcs, "-o", exe, *libs]
    subprocess.run(cmd, check=True)
    _built[key] = exe
    return exe


@pytest.fixture(scope="session")
def programs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("programs")


@pytest.fixture(scope="session")
def build(programs_dir):
    """build(name, flags=...) -> path of the compiled program."""

    def _build(name, **kw):
        return build_program(name, programs_dir, **kw)

    return _build


def coz_env(extra=None):
    """The environment of `python -m cozprof` in these tests: this checkout's
    package and runtime, then `extra`."""
    env = dict(os.environ)
    env["COZ_LIBRARY"] = LIBCOZ
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def coz_run(args, command, cwd=None, env=None, timeout=120, input=None, **kw):
    """Runs `coz run ARGS --- COMMAND` through the real CLI (python -m cozprof).
    A run that outlasts `timeout` fails with the stacks of the launcher and of
    every process under it (eu-stack), taken before they are killed: a hang
    seldom comes back when it is run again by hand."""
    cmd = [sys.executable, "-m", "cozprof", "run", *args, "---", *command]
    with subprocess.Popen(cmd, cwd=cwd, env=coz_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.PIPE if input is not None else None, **kw) as p:
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            tree = _process_tree(p.pid)
            stacks = "\n".join(_stack_of(pid) for pid in tree)
            for pid in reversed(tree):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.communicate()
            pytest.fail(f"coz run did not end within {timeout} s: {cmd}\nits processes' stacks:\n{stacks}")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _process_tree(root):
    """`root` and its descendants' pids, parents before children (each thread's
    /proc/PID/task/TID/children)."""
    tree, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        tree.append(pid)
        for listing in glob.glob(f"/proc/{pid}/task/*/children"):
            try:
                with open(listing) as f:
                    todo.extend(int(child) for child in f.read().split())
            except OSError:
                pass  # the thread or the process ended meanwhile
    return tree


def _stack_of(pid):
    """eu-stack's view of `pid`'s threads, or why there is none."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            what = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        r = subprocess.run(["eu-stack", "-p", str(pid)], capture_output=True, text=True, timeout=30)
        return f"--- {pid}: {what}\n{r.stdout[-6000:]}{r.stderr[-500:]}"
    except (OSError, subprocess.SubprocessError) as e:
        return f"--- {pid}: no stack ({e})"


def records(path):
    """The raw JSON records of a profile (for checks on the runtime's output itself)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def measured_experiments(path):
    """The experiment records of a profile that the analysis measures: neither
    cut short by the run's end (`partial`) nor by a stall (`stalled_ns`: the
    process, or the machine under it, stood still for 100 ms or more, and the
    experiment ended there, perhaps before its line ran at all)."""
    return [x for x in records(path) if x["type"] == "experiment" and not x["partial"] and not x.get("stalled_ns")]


def chain_times(stdout):
    """What tests/e2e/programs/chain.c measured of itself: its CPU time in ms,
    and CALL_A's share of the time of its two calls (the known answer)."""
    fields = dict(f.split(b"=") for f in stdout.split()[2:])
    a, b = int(fields[b"a_us"]), int(fields[b"b_us"])
    return int(fields[b"cpu_ms"]), a / (a + b)


def share_bound(share, n):
    """How far a sampled share of n samples may fall from the measured one:
    four standard deviations of a binomial share (periods that vary around
    their mean widen it by 1.1), plus half a point for what the program's own
    clock reads add to each call's measured time (a syscall each, which
    user-mode samples do not see)."""
    return 4 * 1.1 * (share * (1 - share) / n) ** 0.5 + 0.005


def line_result(paths, line):
    """The analysis' result for `line` (a "file:line" suffix, or a unit's
    whole name: a function's) over the
    profiles at `paths`, pooled, without phase correction (a fixed-line run
    has no other lines to correct against)."""
    from cozprof.analysis import analyze
    from cozprof.profile import load
    analysis = analyze(load([str(p) for p in paths]), phase_correction=False)
    found = [r for r in analysis["lines"] if r["line"] == line or r["line"].endswith("/" + line)]
    assert len(found) == 1, f"{len(found)} results for {line}: {analysis['lines']} / {analysis['omitted']}"
    return found[0]


def precise_slope(profile, line, half_width=0.1, max_profiles=3):
    """The causal curve of a fixed line, from as many profiles as its slope
    needs: `profile(i)` writes profile number i and returns its path; more
    are pooled while the slope's 95% interval is wider than +-half_width, up
    to max_profiles. A host whose speed jumps between experiments (another
    program taking a core for a while, then leaving it) spreads them far
    more than the program's own noise does; the bound a test checks the
    slope against stays the same, the amount of evidence grows with the
    noise the run itself measured; when even max_profiles leave it wider,
    the test is skipped, saying so. Returns (the line's result, the paths)."""
    paths = []
    while True:
        paths.append(str(profile(len(paths))))
        result = line_result(paths, line)
        lo, hi = result["slope_ci"]
        if (hi - lo) / 2 <= half_width:
            return result, paths
        if len(paths) == max_profiles:
            # Quiet, one profile gives +-0.013 to +-0.032. On a host halving
            # its speed beside a busy loop the timer sampler's test needed all
            # three, and judged then it read 0.79 against a share of 0.99.
            pytest.skip(f"{line}: the slope is too uncertain to judge from {len(paths)} profiles: "
                        f"{result['slope']:+.3f} [{lo:+.3f}, {hi:+.3f}], 95% interval wider than "
                        f"+-{half_width} (other work on the machine)")


def judged_if_precise(measure, width, what):
    """The run a known-answer test may judge: `measure(factor)` makes one
    run `factor` times as long as the test's own (1, then 3) and returns
    (its slope's 95% interval as (lo, hi), what it found in words, what the
    test judges). A run whose interval is wider than `width` cannot tell a
    right answer from a wrong one: it is made again three times as long,
    and the longer one is judged, or the test is skipped, saying so, when
    that one too is known less well. The bound the test then checks stays
    the same: only the amount of evidence grows with the noise the run
    itself measured (a host whose speed dips for tens of milliseconds, or
    other work taking a CPU for a while). Unlike precise_slope, which pools
    profiles of one program, each run here stands alone: the tests that use
    it read what their program printed in that run. Returns (what the test
    judges, what it found)."""
    (lo, hi), found, judged = measure(1)
    if hi - lo <= width:
        return judged, found
    first = found
    (lo, hi), found, judged = measure(3)
    found = f"{found} (three times as long; the first run, too uncertain to judge: {first})"
    print(f"{what}: {found}")
    if hi - lo > width:
        pytest.skip(f"{what}: the slope is too uncertain to judge even from a run three times as long "
                    f"(its 95% interval wider than {width:g}): {found}")
    return judged, found


def ready_pid(proc):
    """The pid a program started with stdout=PIPE prints on its "ready PID" line
    (tests/e2e/programs/hostile_crash.c and the like)."""
    line = proc.stdout.readline()
    assert line.startswith(b"ready "), (line, proc.stderr.read() if proc.poll() is not None else b"")
    return int(line.split()[1])


def count_records(path):
    """The raw records, with each run's `totals` (runs without experiments:
    docs/profile-format.md) replaced by the records it holds: the counts of
    every mode read the same way."""
    out, best = [], {}
    recs = records(path)
    for i, r in enumerate(recs):
        if r["type"] == "totals" and (r["pid"] not in best or r["seq"] > recs[best[r["pid"]]]["seq"]):
            best[r["pid"]] = i
    for i, r in enumerate(recs):
        if r["type"] != "totals":
            out.append(r)
        elif best.get(r["pid"]) == i:
            out.extend(r["records"])
    return out
