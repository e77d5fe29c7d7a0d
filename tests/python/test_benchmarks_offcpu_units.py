"""The off-CPU and unit known-answer programs of benchmarks/ (issues 11 and
12): each runs in --short mode and reports the parts it times; accuracy.py's
cases for them name real key lines and units; the real speedup of a measured
case is read off the measured shortening of its part."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")
sys.path.insert(0, BENCH)
import accuracy  # noqa: E402
import benchlib  # noqa: E402

# program -> (work units in --short mode, parts it times)
PROGRAMS = {"offcpu_sleep": (100, ["SLEEP"]), "offcpu_pipe": (150, ["READ"]),
            "offcpu_fsync": (200, ["FSYNC"]), "offcpu_lock": (100, ["LOCK_WAIT"]),
            "offcpu_mix": (100, ["SLEEP", "SIDE_SLEEP"]), "units_sites": (100, []),
            "units_qsort": (60, ["SORT_A", "SORT_B"]), "units_recursive": (100, [])}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    for d in benchlib.default_build_dirs():
        try:
            for name in PROGRAMS:
                benchlib.find_program([d], name)
            return d
        except benchlib.BenchError:
            continue
    d = str(tmp_path_factory.mktemp("bench-build"))
    subprocess.run(["cmake", "-S", BENCH, "-B", d], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", d, "-j2"], check=True, stdout=subprocess.DEVNULL)
    return d


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_short_reports_its_parts(build_dir, name, tmp_path):
    work, parts = PROGRAMS[name]
    exe = benchlib.find_program([build_dir], name)
    p = subprocess.run([exe, "--short"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = benchlib.parse_result(p.stdout, name)
    assert (res["bench"], res["work"]) == (name, work)
    assert 0 < res["elapsed_s"]
    assert sorted(res.get("parts", {})) == sorted(parts)
    for part in parts:
        assert 0 < res["parts"][part] < res["elapsed_s"], res
    assert os.listdir(tmp_path) == []  # offcpu_fsync leaves no file behind


def test_a_shorter_argument_really_shortens_the_measured_part(build_dir):
    # offcpu_sleep with no sleep at all spends no time in SLEEP: the grid's last
    # point (100%) anchors the interpolation.
    exe = benchlib.find_program([build_dir], "offcpu_sleep")
    p = subprocess.run([exe, "--short", "sleep_us=0"], capture_output=True, text=True, timeout=60)
    assert benchlib.parse_result(p.stdout, "offcpu_sleep")["parts"]["SLEEP"] < 0.001


def test_cases_name_unique_key_lines_and_their_units():
    names = [c.name for c in accuracy.CASES]
    assert len(names) == len(set(names))
    groups = {c.group for c in accuracy.CASES}
    assert groups == {"cpu", "offcpu", "units", "over"}
    for case in accuracy.CASES:
        line = benchlib.key_line(case.program, case.key)
        with open(line.rsplit(":", 1)[0]) as f:
            assert len(re.findall(r"KEY:" + re.escape(case.key) + r" \*/", f.read())) == 1, case.name
        unit, name = accuracy.target(case)
        assert unit == case.unit
        if unit == "function":
            # the marker is on the function's definition
            assert re.search(r"\b" + re.escape(case.function) + r"\(", open(line.rsplit(":", 1)[0]).read()
                             .splitlines()[int(line.rsplit(":", 1)[1]) - 1]), case.name
        # Upstream has no units; it is run on every other case, the off-CPU
        # ones included (it predicts what a profiler blind to waits does).
        assert (case.upstream == accuracy.NO_UNITS) == (case.group == "units"), case.name
        assert case.upstream in (True, accuracy.NO_UNITS), case.name
        if case.measured:
            assert case.measured in PROGRAMS[case.program][1], case.name


def test_interpolation_between_measured_shortenings():
    pairs = [(0.0, 0.0), (0.2, 0.1), (0.6, 0.3), (1.0, 0.5)]
    assert accuracy.interpolate(pairs, 0.4) == pytest.approx(0.2)
    assert accuracy.interpolate(pairs, 0.2) == pytest.approx(0.1)
    assert accuracy.interpolate(pairs, 0.8) == pytest.approx(0.4)
    # beyond the last pair: the line through the last two
    assert accuracy.interpolate([(0.0, 0.0), (0.3, 0.1), (0.6, 0.3)], 0.75) == pytest.approx(0.4)


def test_repeated_profiled_runs_give_the_median_of_their_predictions():
    # --profile-reps: the prediction at x is the median of the runs that made one.
    runs = [{0.25: 0.10, 0.5: 0.30}, {0.25: 0.20, 0.5: None}, {0.25: 0.40, 0.5: 0.50}]
    got = accuracy.median_predictions(runs, [0.25, 0.5, 0.75])
    assert got == {0.25: 0.20, 0.5: 0.40, 0.75: None}
