"""Smoke test of benchmarks/: every program runs in --short mode and prints its
result line; accuracy.py and overhead.py run in --short mode (overhead.py on
two programs, one lock program, the launcher's tiny program and a small
start-up program), every profiler run they make must succeed and every
prediction of ours must be there.

No timing is asserted. The benchmarks are taken from $COZ_BUILD_DIR (or the
usual build directories) when built there, else built standalone in a
temporary directory with `cmake -S benchmarks`. Our runtime must be built
(the README's test command builds it): without it these tests fail, they do
not skip. Only upstream COZ may be absent, and then its tests are reported
as skipped, by name.
"""

import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")
sys.path.insert(0, BENCH)
import benchlib  # noqa: E402

# program -> work units done in --short mode (the "work" field of its result)
SHORT_WORK = {"two_threads": 15, "serial_chain": 50, "prodcons": 400, "pipeline": 300,
              "spin_barrier": 100, "hash_table": 200000, "latency": 150, "io_sleep": 150,
              "over_barrier": 60, "over_pipeline": 400, "over_pool": 600}
UPSTREAM = benchlib.upstream_available()
NO_UPSTREAM = f"upstream COZ ({benchlib.UPSTREAM_COZ}) is not installed"
ACCURACY_CASES = ["two_threads.A", "latency.PARSE", "spin_barrier.SPIN"]
OVERHEAD_PROGRAMS = ["serial_chain", "latency"]
OVERHEAD_LOCK_PROGRAMS = ["locks_oversync"]  # plain, --locks-only, and without the counters


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    for d in benchlib.default_build_dirs():
        try:
            for name in SHORT_WORK:
                benchlib.find_program([d], name)
                benchlib.find_program([d], name + "_upstream")
            return d
        except benchlib.BenchError:
            continue
    d = str(tmp_path_factory.mktemp("bench-build"))
    subprocess.run(["cmake", "-S", BENCH, "-B", d], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", d, "-j2"], check=True, stdout=subprocess.DEVNULL)
    return d


@pytest.fixture(scope="module")
def libcoz(build_dir):
    path = benchlib.find_libcoz([build_dir, *benchlib.default_build_dirs()])
    assert path, ("libcoz.so is not built (looked in <build>/libcoz/ of $COZ_BUILD_DIR and the usual "
                  "build directories): build the project first (scripts/bootstrap.sh build)")
    return path


@pytest.mark.parametrize("name", sorted(SHORT_WORK))
@pytest.mark.parametrize("flavour", ["", "_upstream"])
def test_program_short(build_dir, name, flavour):
    exe = benchlib.find_program([build_dir], name + flavour)
    p = subprocess.run([exe, "--short"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    res = benchlib.parse_result(p.stdout, name)
    assert res["bench"] == name
    assert res["work"] == SHORT_WORK[name]
    assert res["elapsed_s"] > 0
    if name == "latency":
        assert 0 < res["mean_latency_s"] < res["elapsed_s"]


def test_program_rejects_unknown_argument(build_dir):
    exe = benchlib.find_program([build_dir], "serial_chain")
    p = subprocess.run([exe, "bogus=1"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "unknown argument 'bogus=1'" in p.stderr


def test_key_lines_are_unique_and_marked():
    import accuracy

    for case in accuracy.CASES:
        line = benchlib.key_line(case.program, case.key)
        path, n = line.rsplit(":", 1)
        with open(path) as f:
            text = f.read()
        assert len(re.findall(r"KEY:" + re.escape(case.key) + r" \*/", text)) == 1, case.name
        assert int(n) > 0


def _run_script(cmd, kind, libcoz):
    """Runs a benchmark script; returns (exit status, its JSON summary, output for messages)."""
    env = dict(os.environ, COZ_LIBRARY=libcoz)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    shown = p.stdout[-3000:] + p.stderr[-3000:]
    lines = p.stdout.strip().splitlines()
    assert lines, shown
    summary = json.loads(lines[-1])
    assert summary["summary"] == kind, shown
    return p.returncode, summary, shown


def _who_args():
    return [] if UPSTREAM else ["--ours-only"]


@pytest.fixture(scope="module")
def accuracy_run(build_dir, libcoz):
    """One run of accuracy.py --short for both profilers (ours only when upstream is absent)."""
    # --also: a second build of ours beside it (here the same libcoz.so, named "again").
    cmd = [sys.executable, os.path.join(BENCH, "accuracy.py"), "--short", "--build", build_dir,
           *[a for c in ACCURACY_CASES for a in ("--only", c)], *_who_args(),
           "--also", f"again={libcoz}"]
    return _run_script(cmd, "accuracy", libcoz)


@pytest.fixture(scope="module")
def overhead_run(build_dir, libcoz, tmp_path_factory):
    cmd = [sys.executable, os.path.join(BENCH, "overhead.py"), "--short", "--build", build_dir,
           *[a for p in OVERHEAD_PROGRAMS + OVERHEAD_LOCK_PROGRAMS for a in ("--only", p)],
           "--startup-lines", "5000",
           "--cache", str(tmp_path_factory.mktemp("overhead-cache")), *_who_args()]
    return _run_script(cmd, "overhead", libcoz)


def _failures_of(summary, who):
    key = "profiler" if summary["summary"] == "accuracy" else "mode"
    return [f for f in summary["failures"] if f[key].startswith(who)]


def test_accuracy_short_runs_and_measures(accuracy_run):
    status, s, shown = accuracy_run
    assert s["errors"] == [], shown
    assert sorted(r["case"] for r in s["rows"]) == sorted(ACCURACY_CASES), shown
    for r in s["rows"]:
        assert r["real"] is not None, r
    assert status == (1 if s["failures"] else 0), shown  # --short: a failed run is an error


def test_accuracy_short_ours(accuracy_run):
    status, s, shown = accuracy_run
    assert "ours" not in s["skipped"], s["skipped"]
    assert _failures_of(s, "ours") == [], shown
    for r in s["rows"]:
        assert r["ours"] is not None, (r["case"], r["notes"])
        assert r["experiments"]["ours"] > 0, r


def test_accuracy_also_runs_another_build_beside_ours(accuracy_run):
    status, s, shown = accuracy_run
    assert list(s["also"]) == ["again"], shown
    assert _failures_of(s, "again") == [], shown
    for r in s["rows"]:
        assert r["again"] is not None, (r["case"], r["notes"])
        assert r["experiments"]["again"] > 0, r
        assert r["err_again_pp"] == pytest.approx(abs(r["again"] - r["real"]) * 100)
    assert s["also"]["again"]["overall"]["vs_real"]["points"] == s["ours"]["vs_real"]["points"], shown


def test_accuracy_natural_profiles_every_line_and_reads_the_case(build_dir, libcoz, tmp_path):
    # --natural: no --fixed-line, so the one profile holds experiments on both
    # of serial_chain's lines, and the case's curve is read from it.
    keep = tmp_path / "profiles"
    cmd = [sys.executable, os.path.join(BENCH, "accuracy.py"), "--short", "--natural", "--ours-only",
           "--build", build_dir, "--only", "serial_chain.A", "--keep-profiles", str(keep)]
    status, s, shown = _run_script(cmd, "accuracy", libcoz)
    assert status == 0 and s["natural"] is True and s["failures"] == [], shown
    [row] = s["rows"]
    assert row["ours"] is not None and row["experiments"]["ours"] > 0, row
    from cozprof import profile
    [path] = list(keep.glob("serial_chain.A.ours.coz"))
    selected = {e.selected.rsplit(":", 1)[1] for e in profile.load([str(path)]).experiments}
    assert len(selected) >= 2, selected


def test_accuracy_short_upstream(accuracy_run):
    if not UPSTREAM:
        pytest.skip(NO_UPSTREAM)
    status, s, shown = accuracy_run
    assert "upstream" not in s["skipped"], s["skipped"]
    # Every upstream run succeeded and left a readable profile. A short run
    # may leave upstream without a curve (its experiments last about 0.5 s).
    assert _failures_of(s, "upstream") == [], shown
    assert all("upstream" in r["experiments"] for r in s["rows"]), s["rows"]


def test_overhead_short_runs_and_measures(overhead_run):
    status, s, shown = overhead_run
    assert s["errors"] == [], shown
    assert [r["program"] for r in s["programs"]] == OVERHEAD_PROGRAMS, shown
    assert [r["program"] for r in s["locks"]] == OVERHEAD_LOCK_PROGRAMS, shown
    assert _failures_of(s, "plain") == [], shown
    for r in s["programs"] + s["locks"]:
        assert r["wall_s"]["plain"] > 0, r
    assert s["launch"]["time_to_main_s"]["plain"] >= 0, s["launch"]
    assert set(s["targets"]) == {"sampling_slowdown", "causal_excess_vs_upstream", "lock_counters_cost",
                                 "launcher_s", "exit_s"}, s["targets"]
    assert s["startup"]["source_lines"] >= 5000
    assert s["startup"]["time_to_main_s"]["plain"] >= 0
    assert status == (1 if s["failures"] else 0), shown  # --short: a failed run is an error


def test_overhead_short_ours(overhead_run):
    status, s, shown = overhead_run
    assert "ours" not in s["skipped"], s["skipped"]
    assert _failures_of(s, "ours") == [], shown
    for r in s["programs"]:
        for mode in ("ours_sampling", "ours_causal"):
            assert r["wall_s"][mode] > 0 and r["ratio"][mode] > 0, (mode, r)
            # The profiler thread's CPU time, from the profiles: some, within the run.
            assert 0 < r["profiler_cpu_s"][mode] < r["wall_s"][mode], (mode, r)
        assert "upstream_causal" not in r["profiler_cpu_s"], r
    for r in s["locks"]:
        for mode in ("ours_locks", "ours_locks_no_counters"):
            assert r["wall_s"][mode] > 0 and r["ratio"][mode] > 0, (mode, r)
        assert r["counters_cost"] is not None, r
    for mode in ("ours_sampling", "ours_sampling_cold", "ours_causal"):
        assert s["launch"]["time_to_main_s"][mode] >= 0, s["launch"]
        assert s["launch"]["launcher_s"][mode] is not None and s["launch"]["exit_s"][mode] is not None
    assert s["startup"]["time_to_main_s"]["ours"] >= 0, s["startup"]
    # The in-program times beside perf record (where perf runs here: the
    # README's setup installs it).
    for r in s["programs"]:
        assert r["in_program_s"]["plain"] > 0 and r["in_program_s"]["ours_sampling"] > 0, r
        if "perf_record" not in s["skipped"]:
            assert r["in_program_s"]["perf_record"] > 0 and r["in_program_ratio"]["perf_record"] > 0, r


def test_overhead_short_upstream(overhead_run):
    if not UPSTREAM:
        pytest.skip(NO_UPSTREAM)
    status, s, shown = overhead_run
    assert "upstream" not in s["skipped"], s["skipped"]
    assert _failures_of(s, "upstream") == [], shown
    for r in s["programs"]:
        assert r["wall_s"]["upstream_causal"] > 0, r
    assert s["launch"]["time_to_main_s"]["upstream_causal"] >= 0, s["launch"]
    assert s["launch"]["time_to_main_s"]["upstream_causal_cold"] >= 0, s["launch"]
    assert s["startup"]["time_to_main_s"]["upstream"] >= 0, s["startup"]


def test_real_xz_short(build_dir, libcoz):
    """real_xz.py --short: xz from Debian's sources (fetched and built once
    into <build>/real_xz/, which takes minutes; later runs reuse them and need
    no network), both lines measured and predicted by ours. Skipped only when
    the source cannot be fetched (no deb-src reachable), saying why."""
    cmd = [sys.executable, os.path.join(BENCH, "real_xz.py"), "--short", "--build", build_dir,
           *_who_args()]
    status, s, shown = _run_script(cmd, "real_xz", libcoz)
    if s.get("fetch_error"):
        pytest.skip("real_xz.py: the source of xz-utils cannot be fetched with apt-get source: "
                    + s["fetch_error"].splitlines()[0])
    assert s["errors"] == [], shown
    assert sorted(r["line"] for r in s["rows"]) == ["COMPRESS", "WRITE"], shown
    assert _failures_of_real(s, "ours") == [], shown
    for r in s["rows"]:
        assert r["real"] is not None and r["ours"] is not None, r
        assert r["experiments_per_min"]["ours"] > 0, r
    assert set(s["out_of_scope_share_ours"]) == {"COMPRESS", "WRITE"}, shown
    if UPSTREAM:
        assert _failures_of_real(s, "upstream") == [], shown
    assert status == 0, shown


def _failures_of_real(summary, who):
    return [f for f in summary["failures"] if f["profiler"] == who]


def test_fixed_series_measures_the_real_and_the_predicted_curve_with_thread_times(build_dir, libcoz):
    """fixed_series.py, one round at 0 and 50%, ours beside the same build
    named "again": a real speedup and one prediction per build at each
    speedup, and each thread group's times."""
    cmd = [sys.executable, os.path.join(BENCH, "fixed_series.py"), "--build", build_dir,
           "--reps", "1", "--speedups", "0,50", "--also", f"again={libcoz}",
           "over_pipeline", "STAGE3", "s3=200000", "items=300"]
    status, s, shown = _run_script(cmd, "fixed_series", libcoz)
    assert status == 0, shown
    assert s["line"] == benchlib.key_line("over_pipeline", "STAGE3"), shown
    assert s["real"]["0"] == 0 and -1 < s["real"]["50"] < 1, shown
    for build in ("ours", "again"):
        assert len(s["predicted"][build]["50"]) == 1, shown
        assert re.search(rf"^# {build} at 50%: delay / wall 0\.[0-9]+", shown, re.M), shown
    assert re.search(r"^#   stage3 +[0-9.]+ ", shown, re.M), shown


def test_causal_split_prints_each_pair_and_the_medians(build_dir, libcoz):
    r = subprocess.run([sys.executable, os.path.join(BENCH, "causal_split.py"), "--build", build_dir,
                        "--reps", "1", "serial_chain", "--short"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, COZ_LIBRARY=libcoz))
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["summary"] == "causal_split" and s["program"] == ["serial_chain", "--short"]
    (run,) = s["runs"]
    assert run["plain_s"] > 0 and run["causal_s"] > 0 and run["delay_share"] >= 0
    assert run["rest"] == pytest.approx(run["slowdown"] - 1 - run["delay_share"])


@pytest.mark.parametrize("mode", [0, 1, 2, 3, 4])
def test_thread_events_runs_each_mode(build_dir, mode):
    exe = benchlib.find_program([build_dir], "thread_events")
    if mode == 2 and tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2]) < (5, 13):
        pytest.skip(f"mode 2 needs Linux 5.13's sigtrap; this kernel is {os.uname().release}")
    r = subprocess.run([exe, str(mode), "20"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mode"] == mode and out["threads"] == 20 and out["per_thread_us"] > 0
