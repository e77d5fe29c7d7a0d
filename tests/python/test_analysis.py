"""Golden tests of the analysis on hand-made fixtures (arithmetic in
tests/fixtures/profiles/README.md)."""

import json
import os

import pytest
from pytest import approx

from conftest import FIXTURES, UPSTREAM_PROFILES
from cozprof import analysis, profile
from cozprof.errors import CozError

LINE_FIELDS = {"line", "file", "lineno", "progress_point", "kind", "experiments", "points",
               "slope", "slope_ci", "intercept", "r2", "impact", "max_speedup", "predicted",
               "contention", "phase_factor", "drift_corrected"}
TOP_FIELDS = {"schema", "profiles", "phase_correction", "progress_points", "lines", "omitted",
              "summary", "warnings", "diagnosis"}


def run(name, **opts):
    paths = name if isinstance(name, list) else [os.path.join(FIXTURES, name)]
    return analysis.analyze_files(paths, **opts)


def only(result, line):
    found = [ln for ln in result["lines"] if ln["line"] == line]
    assert len(found) == 1, [ln["line"] for ln in result["lines"]]
    return found[0]


def test_throughput_without_phase_correction():
    r = run("throughput.coz", phase_correction=False)
    assert set(r) == TOP_FIELDS
    a = only(r, "/src/a.c:10")
    assert set(a) == LINE_FIELDS
    assert (a["file"], a["lineno"], a["progress_point"], a["kind"]) == \
        ("/src/a.c", 10, "work", "throughput")
    assert [p["speedup"] for p in a["points"]] == [0.0, 0.5, 1.0]
    assert [p["experiments"] for p in a["points"]] == [2, 1, 1]
    assert [p["program_speedup"] for p in a["points"]] == approx([0.0, 0.2, 0.5])
    assert a["experiments"] == 4
    # least squares weighted by the visits counted at each speedup (200, 125, 200)
    assert a["slope"] == approx(0.5)
    assert a["intercept"] == approx(-1 / 84)
    assert a["impact"] == approx(5 / 21)
    assert a["r2"] == approx(105 / 106)
    assert a["predicted"] == approx({"0.25": 19 / 168, "0.5": 5 / 21, "1.0": 41 / 84})
    assert a["max_speedup"] == approx(0.5)
    assert a["phase_factor"] == 1.0
    assert a["contention"] is False and a["drift_corrected"] is False


def test_a_speedup_measured_once_still_has_an_interval():
    # No experiment is repeated except two identical baselines: the noise model is the
    # prior alone (1% relative noise, 1 degree of freedom), worked out in the README.
    a = only(run("throughput.coz", phase_correction=False), "/src/a.c:10")
    t = 12.7062047  # Student's t, 97.5%, 1 degree of freedom
    zero, half, full = a["points"]
    assert zero["ci"] == [0.0, 0.0]  # the baseline is 0 by definition
    assert half["ci"] == approx([0.2 - t * 0.75 ** 0.5 / 125, 0.2 + t * 0.75 ** 0.5 / 125])
    assert full["ci"] == approx([0.5 - t * 0.75 ** 0.5 / 200, 0.5 + t * 0.75 ** 0.5 / 200])
    lo, hi = a["slope_ci"]
    assert lo < a["slope"] < hi and hi - lo > 0.05


def test_omitted_partial_and_summary():
    r = run("throughput.coz")
    assert r["omitted"] == [{"line": "/src/b.c:20", "progress_point": "work",
                             "reason": "too-few-speedups",
                             "detail": "2 distinct speedups, 3 needed"}]
    assert r["summary"] == {"runs": 1, "experiments": 7, "partial_experiments": 1,
                            "lost_records": 0, "dropped_samples": 0,
                            "runtime_ns": 10 * 10**9, "runs_left_out": 0}
    assert r["progress_points"] == [{"name": "work", "kind": "throughput", "experiments": 6}]
    assert r["warnings"] == ["/lib/libfoo.so has no debug information"]
    assert r["diagnosis"] is None
    json.dumps(r, allow_nan=False)  # strict JSON


def test_min_points_option():
    r = run("throughput.coz", min_points=2)
    assert {ln["line"] for ln in r["lines"]} == {"/src/a.c:10", "/src/b.c:20"}
    r = run("throughput.coz", min_points=4)
    assert r["lines"] == []
    assert "enough different speedups" in r["diagnosis"]


def test_upstream_json_matches_hand_computation():
    r = run("upstream.json.coz", phase_correction=False)
    a = only(r, "a.c:10")
    assert a["slope"] == approx(0.5)
    r = run("upstream.json.coz")
    # 4 experiments x 50 samples in 4 s; 400 samples in 10 s -> (4e9/200)*(400/1e10) = 0.8
    assert only(r, "a.c:10")["phase_factor"] == approx(0.8)


def test_latency_littles_law_legacy():
    r = run("latency.legacy.coz")
    lat = [ln for ln in r["lines"] if ln["progress_point"] == "req"][0]
    assert lat["kind"] == "latency"
    assert [p["program_speedup"] for p in lat["points"]] == approx([0.0, 0.2, 0.5])
    assert lat["slope"] == approx(1.0)
    assert lat["intercept"] == approx(-1 / 60)
    assert lat["phase_factor"] == 1.0  # selected-samples are all 0: no correction possible
    thr = [ln for ln in r["lines"] if ln["progress_point"] == "main.c:9"][0]
    assert thr["slope"] == approx(0.0) and thr["r2"] == 1.0
    # the 100% experiment has a wrapped (negative) duration and is left out
    assert [p["speedup"] for p in lat["points"]] == [0.0, 0.25, 0.5]
    assert any("without a positive effective duration" in w for w in r["warnings"])


def test_fixed_speedup_needs_only_two_points():
    r = run("fixed_speedup.coz")
    a = only(r, "/src/a.c:10")
    assert [p["program_speedup"] for p in a["points"]] == approx([0.0, 1 / 3])
    assert a["slope"] == approx(2 / 3) and a["intercept"] == approx(0.0, abs=1e-12)
    assert a["impact"] == approx(1 / 3)


def test_end_to_end_runs_keep_partial_experiments():
    r = run("end_to_end.coz")
    a = only(r, "/src/a.c:10")
    assert a["progress_point"] == "end-to-end"
    assert [p["program_speedup"] for p in a["points"]] == approx([0.0, 0.1, 0.2])
    assert a["slope"] == approx(0.2) and a["impact"] == approx(0.1)
    assert r["summary"]["runs"] == 3 and r["summary"]["partial_experiments"] == 3


def test_contention_flag_and_interval():
    r = run("contention.coz")
    b = only(r, "/src/b.c:20")
    assert b["contention"] is True
    lo, hi = b["slope_ci"]
    assert lo < b["slope"] < hi < 0
    # the spread of the repeated experiments (+-2%) bounds the slope well below zero (README)
    assert -0.8 < lo and hi < -0.5
    for p in b["points"][1:]:
        assert p["ci"][0] < p["program_speedup"] < p["ci"][1]
    # the y at 0.5 is 1 - 300/240 = -0.25, at 1.0 it is 1 - 300/180
    assert [p["program_speedup"] for p in b["points"]] == approx([0.0, -0.25, -2 / 3])


def test_analysis_is_deterministic():
    a = run("contention.coz")
    b = run("contention.coz")
    assert a == b


def test_diagnoses():
    assert "No progress point was reached" in run("no_progress.coz")["diagnosis"]
    assert "No experiment at speedup 0" in run("no_baseline.coz")["diagnosis"]
    assert "No in-scope line was sampled" in run("no_samples.coz")["diagnosis"]
    assert "too short" in run("too_short.coz")["diagnosis"]
    for name in ("no_progress.coz", "no_baseline.coz", "no_samples.coz", "too_short.coz"):
        assert run(name)["lines"] == []


def test_progress_point_filter():
    r = run("latency.legacy.coz", progress_point="req")
    assert {ln["progress_point"] for ln in r["lines"]} == {"req"}
    with pytest.raises(CozError, match="no progress point named 'nope'"):
        run("latency.legacy.coz", progress_point="nope")


def test_upstream_profile_analysis_is_strict_json():
    path = os.path.join(UPSTREAM_PROFILES, "ferret.coz")
    if not os.path.exists(path):
        pytest.skip("upstream coz-profiler sample profiles not installed")
    r = analysis.analyze_files([path])
    assert r["lines"] and r["diagnosis"] is None
    impacts = [ln["impact"] for ln in r["lines"]]
    assert impacts == sorted(impacts, reverse=True)
    for ln in r["lines"]:
        assert ln["points"][0]["speedup"] == 0.0
        assert ln["slope_ci"][0] <= ln["slope_ci"][1]
    json.dumps(r, allow_nan=False)


def _drift_profile(path, true_gain=1 / 3):
    """A fixed-line run whose machine runs twice as slow in its first half.

    Every experiment's period is exact for its phase: at speedup s it is the
    phase's baseline period times (1 - true_gain * s). Pooling all baselines
    compares the slow phase's (high) speedups with a baseline of both phases,
    and the fast phase's (low) speedups too."""
    lines = [json.dumps({"type": "startup", "version": 1, "time_ns": 1, "pid": 1, "argv0": "/a",
                         "mode": "fixed-line", "sample_period_ns": 1000000,
                         "experiment_length_ns": 100000000, "sampler": "perf_event",
                         "binary_scope": ["MAIN"], "source_scope": ["%"],
                         "fixed_line": "a.c:1", "fixed_speedup": None})]
    phases = [(200000.0, [0.0, 0.8, 0.0, 0.9, 0.0, 0.0, 0.7, 0.0, 0.6, 0.0, 0.0, 0.8, 0.0]),
              (100000.0, [0.0, 0.2, 0.0, 0.3, 0.0, 0.0, 0.1, 0.0, 0.2, 0.0, 0.0, 0.3, 0.0])]
    for phase_period, speedups in phases:  # ns per unit of progress; speedups unevenly spread
        for s in speedups:
            period = phase_period * (1 - true_gain * s)
            delta = 1000
            lines.append(json.dumps({"type": "experiment", "selected": "/src/a.c:1", "speedup": s,
                                     "duration_ns": int(period * delta), "wall_ns": int(period * delta),
                                     "delay_ns": 0, "selected_samples": 50, "partial": False,
                                     "progress": [{"name": "p", "kind": "throughput", "delta": delta}]}))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_drift_in_machine_speed_is_corrected_with_local_baselines(tmp_path):
    result = analysis.analyze(profile.load([_drift_profile(tmp_path / "drift.coz")]),
                              phase_correction=False)
    line = result["lines"][0]
    assert line["drift_corrected"] is True
    for p in line["points"]:
        assert p["program_speedup"] == pytest.approx(p["speedup"] / 3, abs=0.02), line["points"]
    assert line["slope"] == pytest.approx(1 / 3, abs=0.02)


def test_without_local_baselines_drift_would_bias_the_answer(tmp_path, monkeypatch):
    # The same profile with the correction disabled: the check above can fail.
    monkeypatch.setattr(analysis, "DRIFT_MIN_BASELINES", 10 ** 6)
    result = analysis.analyze(profile.load([_drift_profile(tmp_path / "drift.coz")]),
                              phase_correction=False)
    assert result["lines"][0]["drift_corrected"] is False
    worst = max(abs(p["program_speedup"] - p["speedup"] / 3) for p in result["lines"][0]["points"])
    assert worst > 0.1
