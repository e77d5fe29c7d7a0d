"""Shared by accuracy.py, overhead.py and real_xz.py: finding binaries, running programs
plain, under our `coz run` and under upstream COZ, and reading the profiles.

Profiles are judged by the project's one parser and analysis
(`cozprof.profile`, `cozprof.analysis`), called from accuracy.py; nothing
here computes periods or speedups by hand.
"""

import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PYTHON_DIR = os.path.join(REPO, "python")
UPSTREAM_COZ = "/usr/bin/coz"
RUN_TIMEOUT_S = 300

if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)


class BenchError(Exception):
    pass


def default_build_dirs():
    """Where to look for the build: $COZ_BUILD_DIR, then the usual places."""
    dirs = []
    if os.environ.get("COZ_BUILD_DIR"):
        dirs.append(os.environ["COZ_BUILD_DIR"])
    dirs += [os.path.join(REPO, "build"), "/work/build-bench", "/work/build"]
    return dirs


def find_program(build_dirs, name):
    """Path of benchmark `name` in <build>/benchmarks/ or <build>/ (standalone build)."""
    for d in build_dirs:
        for c in (os.path.join(d, "benchmarks", name), os.path.join(d, name)):
            if os.path.isfile(c) and os.access(c, os.X_OK):
                return os.path.abspath(c)
    raise BenchError(f"benchmark binary {name!r} not found under {', '.join(build_dirs)}; "
                     "build it: cmake -S benchmarks -B /work/build-bench && "
                     "cmake --build /work/build-bench")


def find_libcoz(build_dirs):
    """Our libcoz.so in <build>/libcoz/, or None."""
    if os.environ.get("COZ_LIBRARY") and os.path.isfile(os.environ["COZ_LIBRARY"]):
        return os.path.abspath(os.environ["COZ_LIBRARY"])
    for d in build_dirs:
        c = os.path.join(d, "libcoz", "libcoz.so")
        if os.path.isfile(c):
            return os.path.abspath(c)
    return None


def key_line(program, key):
    """'/abs/benchmarks/<program>.c:N' for the line marked `KEY:<key>`."""
    src = os.path.join(HERE, program + ".c")
    pattern = re.compile(r"/\* KEY:" + re.escape(key) + r" \*/")
    with open(src) as f:
        for n, text in enumerate(f, 1):
            if pattern.search(text):
                return f"{src}:{n}"
    raise BenchError(f"no line marked KEY:{key} in {src}")


def args_list(args):
    """{'a': 5, 'short': True} -> ['a=5', '--short']."""
    out = []
    for k, v in args.items():
        if k == "short":
            if v:
                out.append("--short")
        else:
            out.append(f"{k}={v}")
    return out


def parse_result(stdout, what):
    """The benchmark's last JSON line ({"bench":..., "elapsed_s":...})."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") and '"bench"' in line:
            return json.loads(line)
    raise BenchError(f"{what}: no result line in its output:\n{stdout[-2000:]}")


def _run(cmd, env, what, cwd=None, result=True):
    """Runs `cmd`; its result line, with "wall_s" and "cpu_s" added (the CPU
    time, user and system, of the command and every process it waited for:
    the profiled program's under `coz run`). `result=False`: a program that
    prints none (a real program), {"elapsed_s": wall time}."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=RUN_TIMEOUT_S)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise BenchError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n"
                         f"{p.stderr[-3000:]}")
    res = parse_result(p.stdout, what) if result else {"elapsed_s": wall}
    res["wall_s"] = wall
    res["cpu_s"] = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return res


def run_plain(cmd, result=True):
    return _run(cmd, None, "plain run", result=result)


def ours_env(libcoz, python_dir=None):
    """The environment of our `coz`: libcoz.so `libcoz`, the cozprof package of this
    checkout (or of `python_dir`, another checkout's python/ folder)."""
    env = dict(os.environ)
    env["COZ_LIBRARY"] = libcoz
    env["COZ_PYTHON"] = sys.executable  # the native front's interpreter (coz_command)
    env["PYTHONPATH"] = (python_dir or PYTHON_DIR) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # The launcher's modules byte-compiled once, as an installed coz has them (pip
    # compiles them) and a source tree keeps them (in __pycache__): with
    # PYTHONDONTWRITEBYTECODE set and no __pycache__, every run compiled the
    # launcher before the program's main and the profile parser after it, +7 ms
    # each on the 2-CPU test machine. The cache is kept out of the source tree.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "coz-bench-pycache")
    return env


def _profile_options(output, fixed_line, fixed_speedup):
    """Options both launchers share; removes a stale profile first."""
    if os.path.exists(output):
        os.unlink(output)
    opts = ["-o", output]
    if fixed_line:
        opts += ["--fixed-line", fixed_line]
    if fixed_speedup is not None:
        opts += ["--fixed-speedup", str(fixed_speedup)]
    return opts


def profilers(build_dirs, use_ours, use_upstream, script):
    """Which profilers can run: (libcoz path or None, use_ours, use_upstream, skipped),
    saying on stderr why one is skipped."""
    libcoz = find_libcoz(build_dirs) if use_ours else None
    skipped = {}
    if use_ours and not libcoz:
        skipped["ours"] = "libcoz.so is not built yet (looked in <build>/libcoz/ of " + \
                          ", ".join(build_dirs) + ")"
        use_ours = False
    if use_upstream and not upstream_available():
        skipped["upstream"] = f"{UPSTREAM_COZ} is not installed"
        use_upstream = False
    for who, why in skipped.items():
        print(f"{script}: skipping {who}: {why}", file=sys.stderr)
    return libcoz, use_ours, use_upstream, skipped


def check_profile(output, what, complete=True):
    """A profiled run succeeded only if it left a profile the project's parser
    reads, with at least one run in it; `complete`: and a shutdown record
    (upstream COZ writes none when a short program ends)."""
    from cozprof import profile
    from cozprof.errors import CozError

    try:
        prof = profile.load([output])
    except CozError as e:
        raise BenchError(f"{what}: its profile is unreadable: {e}") from None
    if not prof.runs:
        raise BenchError(f"{what}: its profile {output} holds no run")
    if complete and prof.shutdown_stats()["abrupt_runs"]:
        raise BenchError(f"{what}: its profile {output} has no shutdown record (the run ended abruptly)")
    return prof


def profiler_cpu_s(prof):
    """The profiler thread's CPU time over the profile's runs (their counters'
    `profiler_cpu_ns`), in seconds; None when no run recorded it."""
    own = [r.counters.get("profiler_cpu_ns") for r in prof.runs if r.counters]
    own = [v for v in own if isinstance(v, int) and not isinstance(v, bool)]
    return sum(own) / 1e9 if own else None


def coz_front():
    """The native front of our `coz` (libcoz/coz_front.c) in the build, or None."""
    for d in default_build_dirs():
        c = os.path.join(d, "libcoz", "coz")
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return None


def coz_command(python_dir=None):
    """The argv of our `coz`, as users run it: the native front that
    scripts/bootstrap.sh installs, when it is built (it runs this interpreter:
    ours_env sets COZ_PYTHON), else the script pip installs (python/bin/coz),
    run by this interpreter. `python_dir`: another checkout's python/ folder,
    run through its script (a checkout older than the script runs `python3 -m
    cozprof`), so that `overhead.py --launch-baseline` compares launchers."""
    front = None if python_dir else coz_front()
    if front:
        return [front]
    script = os.path.join(python_dir or PYTHON_DIR, "bin", "coz")
    return [sys.executable, script] if os.path.isfile(script) else [sys.executable, "-m", "cozprof"]


def run_ours(cmd, libcoz, output, fixed_line=None, fixed_speedup=None, extra=(), result=True,
             python_dir=None):
    """Run `cmd` under our `coz run` (coz_command); the profile goes to `output`.
    `python_dir`: run the cozprof package of that folder instead of this checkout's."""
    opts = _profile_options(output, fixed_line, fixed_speedup)
    full = [*coz_command(python_dir), "run", *opts, *extra, "---", *cmd]
    res = _run(full, ours_env(libcoz, python_dir), "our coz run", cwd=os.path.dirname(output),
               result=result)
    prof = check_profile(output, "our coz run")
    if isinstance(res, dict):
        res["profiler_cpu_s"] = profiler_cpu_s(prof)  # (None where the runtime did not record it)
    return res


def run_upstream(cmd, output, fixed_line=None, fixed_speedup=None, extra=(), result=True):
    """Run `cmd` under upstream COZ (/usr/bin/coz); the profile goes to `output`."""
    opts = _profile_options(output, fixed_line, fixed_speedup)
    full = [UPSTREAM_COZ, "run", *opts, *extra, "---", *cmd]
    res = _run(full, None, "upstream coz run", cwd=os.path.dirname(output), result=result)
    check_profile(output, "upstream coz run", complete=False)
    return res


def parse_also(ap, specs):
    """{NAME: libcoz.so path} from --also NAME=LIBCOZ options (another build of
    ours run beside it: before/after in one invocation); `ap.error` on a bad one."""
    others = {}
    for spec in specs:
        name, _, path = spec.partition("=")
        if not name or name in ("ours", "upstream") or name in others or not os.path.isfile(path):
            ap.error(f"--also {spec!r}: NAME=LIBCOZ with a new name and an existing file")
        others[name] = os.path.abspath(path)
    return others


def predict(out, unit, name, point, amounts, natural=False):
    """({x: predicted speedup or None}, notes, experiments of the curve) from the
    profile `out` of ONE run that fixed the unit (`unit`: "line", "callsite" or
    "function"; `name`: 'FILE:LINE' or the function's name). `natural`: the
    run fixed nothing (every unit the profiler chose), and the unit's curve
    is read as `coz report` shows it, with the phase correction.

    The run had no `--fixed-speedup`: the profiler picked a speedup per
    experiment, half of them 0%, interleaved, so baselines and sped-up
    experiments share the machine's conditions. The profile is judged by the
    project's one analysis (`cozprof.analysis.analyze`, no phase correction:
    the unit is the only one ever selected). The prediction at x is the
    experiment-weighted mean of the measured points within 5 points of x;
    only when no point is that near, the fit's value at x (marked "fit")."""
    from cozprof import analysis, profile

    prof = profile.load([out])
    res = analysis.analyze(prof, phase_correction=natural)

    def same(entry):
        if entry.get("unit", "line") != unit:
            return False
        if unit == "function":
            return entry["line"].split(" [")[0] == name
        path, lineno = name.rsplit(":", 1)
        f, _, n = entry["line"].rpartition(":")
        return n == lineno and os.path.basename(f) == os.path.basename(path)

    curve = next((c for c in res["lines"] if same(c) and c["progress_point"] == point), None)
    notes = []
    if curve is None:
        why = [o for o in res["omitted"] if same(o) and o["progress_point"] == point]
        notes.append("no curve: " + (f"{why[0]['reason']} ({why[0]['detail']})" if why
                                     else res["diagnosis"] or "unit not in the analysis"))
        return {x: None for x in amounts}, notes, res["summary"]["experiments"]
    pred = {}
    fitted = []
    for x in amounts:
        near = [p for p in curve["points"]
                if p["speedup"] > 0 and abs(p["speedup"] - x) <= 0.05 + 1e-9]
        n = sum(p["experiments"] for p in near)
        if n:
            pred[x] = sum(p["program_speedup"] * p["experiments"] for p in near) / n
        else:
            pred[x] = curve["intercept"] + curve["slope"] * x
            fitted.append(f"{int(round(x * 100))}%")
    base_exps = sum(p["experiments"] for p in curve["points"] if p["speedup"] == 0)
    notes.append(f"{curve['experiments']} exps ({base_exps} at 0%)")
    if fitted:
        notes.append("fit at " + ",".join(fitted))
    return pred, notes, curve["experiments"]


def upstream_available():
    return os.path.isfile(UPSTREAM_COZ) and os.access(UPSTREAM_COZ, os.X_OK)


def median(xs):
    return statistics.median(xs) if xs else None


# Percentile bootstrap intervals (overhead.py's slowdowns, accuracy.py's
# mean errors), seeded so that the same runs give the same figures.
INTERVAL_LEVEL = 0.95
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 20261202


def bootstrap(resample, stat, level=INTERVAL_LEVEL, draws=BOOTSTRAP_DRAWS, seed=BOOTSTRAP_SEED):
    """[lo, hi]: the central `level` of stat(resample(rng)) over `draws`
    resamples, `resample` drawing one data set with replacement from the
    random.Random it is given; None where `stat` gives None for most of
    them."""
    rng = random.Random(seed)
    vals = []
    for _ in range(draws):
        v = stat(resample(rng))
        if v is not None:
            vals.append(v)
    if len(vals) < draws // 2:
        return None
    vals.sort()
    cut = int(len(vals) * (1 - level) / 2)
    return [vals[cut], vals[len(vals) - 1 - cut]]


def bootstrap_rounds(rounds, stat):
    """bootstrap() of stat over resamples of `rounds`, each round drawn
    whole (the runs of one round stay together); None under 3 rounds."""
    if len(rounds) < 3:
        return None
    return bootstrap(lambda rng: [rng.choice(rounds) for _ in rounds], stat)


def judge(found, bound, upper=True):
    """A target's verdict from its figures, found = [(name, point,
    interval or None)]: the figure must stay at or under `bound` (upper),
    or at or over it. Returns (wrong, across, verdict): the names whose
    interval lies wholly on the wrong side, those whose interval holds the
    bound, and "missed" when some lies on the wrong side, "not resolved"
    when some holds it, else "met". A figure without an interval is judged
    by its point."""
    wrong, across = [], []
    for name, point, iv in found:
        lo, hi = iv if iv else (point, point)
        b = bound
        if not upper:  # the mirror image: at or over the bound
            lo, hi, b = -hi, -lo, -bound
        if lo > b:
            wrong.append(name)
        elif hi > b:
            across.append(name)
    return wrong, across, "missed" if wrong else "not resolved" if across else "met"


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def machine_description():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs"


def tempdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)


def cleanup(path):
    shutil.rmtree(path, ignore_errors=True)
