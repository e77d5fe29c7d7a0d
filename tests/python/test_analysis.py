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
               "contention", "phase_factor", "drift_corrected", "carry_over", "unit", "function",
               "calls", "contains", "called_from", "samples", "on_cpu_share", "off_cpu", "category"}
TOP_FIELDS = {"schema", "profiles", "phase_correction", "progress_points", "units", "lines",
              "omitted", "threads", "thread_groups", "summary", "warnings", "diagnosis"}


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
    assert r["omitted"] == [{"unit": "line", "line": "/src/b.c:20", "progress_point": "work",
                             "reason": "too-few-speedups",
                             "detail": "2 distinct speedups, 3 needed"}]
    assert r["summary"] == {"runs": 1, "experiments": 7, "partial_experiments": 1,
                            "stalled_experiments": 0, "lost_records": 0, "dropped_samples": 0,
                            "runtime_ns": 10 * 10**9, "runs_left_out": 0, "cpu_wait_share": None}
    assert r["progress_points"] == [{"name": "work", "kind": "throughput", "experiments": 6}]
    assert r["warnings"] == ["/lib/libfoo.so has no debug information"]
    assert r["diagnosis"] is None
    json.dumps(r, allow_nan=False)  # strict JSON


def test_an_experiment_across_a_stall_is_left_out_and_said(tmp_path):
    # The runtime marks an experiment during which the whole process stood
    # still (`stalled_ns`): it is analysed as if it were not there, and said.
    with open(os.path.join(FIXTURES, "throughput.coz")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    at = next(i for i, r in enumerate(recs) if r["type"] == "experiment" and r["speedup"] > 0
              and not r.get("partial"))
    marked, without = tmp_path / "marked.coz", tmp_path / "without.coz"
    marked.write_text("".join(json.dumps(dict(r, stalled_ns=700_000_000) if i == at else r) + "\n"
                              for i, r in enumerate(recs)))
    without.write_text("".join(json.dumps(r) + "\n" for i, r in enumerate(recs) if i != at))
    m, w = run([str(marked)]), run([str(without)])
    assert m["lines"] == w["lines"] and m["omitted"] == w["omitted"]
    assert m["summary"]["experiments"] == w["summary"]["experiments"] + 1 == 7
    assert (m["summary"]["stalled_experiments"], w["summary"]["stalled_experiments"]) == (1, 0)
    assert m["warnings"][-1].startswith("1 experiment was left out: the whole process stood still during it")
    assert len(m["warnings"]) == len(w["warnings"]) + 1


def test_a_run_cut_before_its_final_records_is_said(tmp_path):
    # SIGKILL or the OOM killer: no shutdown record, and no thread table,
    # counters or last stacks. The curves stand; the warning says what is
    # missing. Upstream's profiles have no shutdown record at all: no warning.
    with open(os.path.join(FIXTURES, "throughput.coz")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    cut = tmp_path / "cut.coz"
    cut.write_text("".join(json.dumps(r) + "\n" for r in recs if r["type"] != "shutdown"))
    c, w = run([str(cut)]), run("throughput.coz")
    assert c["lines"] == w["lines"]
    assert [x for x in c["warnings"] if x not in w["warnings"]] == [
        "the run ended without its final records (killed by SIGKILL or the out-of-memory killer, or it made "
        "the exit system call itself, as Go programs do): its "
        "thread table and counters, and the stacks of its last second (or last tenth of its time), are "
        "missing; every record written before is kept"]
    assert not any("final records" in x for x in run("upstream.json.coz")["warnings"])
    assert not any("final records" in x for x in run("latency.legacy.coz")["warnings"])


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


@pytest.mark.parametrize("mode, reader", [("sampling-only", "coz report --top"),
                                          ("locks-only", "coz locks")])
def test_runs_without_experiments_by_design_are_not_called_too_short(tmp_path, mode, reader):
    f = tmp_path / "p.coz"
    f.write_text(json.dumps({"type": "startup", "version": 1, "time_ns": 1, "pid": 2, "mode": mode}) + "\n"
                 + json.dumps({"type": "samples", "counts": {"/src/a.c:3": 40}, "out_of_scope": 0}) + "\n")
    d = analysis.analyze(profile.load(str(f)))["diagnosis"]
    assert f"runs are {mode}: they make no experiment" in d and reader in d
    assert "too short" not in d and "No in-scope line" not in d


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


# -- off-CPU time and units (issues 11 and 12; arithmetic in the fixtures' README) --------

def _rewrite_startup(src, dest, **fields):
    recs = [json.loads(ln) for ln in open(src)]
    recs[0].update(fields)
    for k, v in fields.items():
        if v is None:
            del recs[0][k]
    dest.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(dest)


def test_phase_correction_counts_the_waits_it_speeds_up():
    # s_obs = 3 x (10 CPU samples + 290 ms sped up / 1 ms) = 900 in t_obs = 3 s;
    # s = 100 CPU + 1160 sleep samples (sync is not in the blocked scope "ils") in T = 10 s.
    r = run("offcpu.coz")
    a = only(r, "/src/o.c:9")
    assert a["phase_factor"] == approx((3e9 / 900) * (1260 / 1e10))  # 0.42
    assert [p["program_speedup"] for p in a["points"]] == approx([0.0, 0.42 * 0.2, 0.42 * 0.5])
    # (Counting CPU samples alone, 30 observed and 100 in all, would have given 1.0.)


@pytest.mark.parametrize("scope, s", [("ilsb", 1460), ("ilsy", 1460), ("il", 100), (None, 100)])
def test_phase_correction_follows_the_runs_blocked_scope(tmp_path, scope, s):
    path = _rewrite_startup(os.path.join(FIXTURES, "offcpu.coz"), tmp_path / "o.coz", blocked_scope=scope)
    a = only(run([path]), "/src/o.c:9")
    assert a["phase_factor"] == approx((3e9 / 900) * (s / 1e10))


def test_a_line_says_how_much_of_its_time_is_off_the_cpu():
    a = only(run("offcpu.coz"), "/src/o.c:9")
    assert a["unit"] == "line" and a["samples"] == 1460
    assert a["on_cpu_share"] == approx(100 / 1460)
    assert a["off_cpu"] == approx({"sleep": 1160 / 1460, "sync": 200 / 1460})
    assert a["category"] == "sleep"
    # a profile without samples records says nothing rather than something false
    c = only(run("contention.coz"), "/src/b.c:20")
    assert (c["on_cpu_share"], c["off_cpu"], c["category"], c["samples"]) == (None, {}, None, 0)


def test_threads_and_thread_groups_split_wall_time():
    r = run("offcpu.coz")
    G = 10 ** 9
    zero = {"io": 0, "lock": 0, "sleep": 0, "sync": 0, "sched": 0, "other": 0}
    assert r["threads"] == [
        # no off_cpu_ns (no switch records): rest is the wall time less CPU and every wait
        {"run": 0, "tid": 11, "thread": "app", "group": "main", "wall_ns": 10 * G, "cpu_ns": 2 * G,
         "wait_ns": {**zero, "sleep": 5 * G, "sync": 2 * G, "sched": G // 2}, "off_cpu_ns": None,
         "paused_ns": 0, "rest_ns": G // 2},
        # with it: the wall time less CPU, sched and the time off the CPU, which the
        # calls' time may pass (the second worker's calls took 4 G, 1 G of it off the CPU)
        {"run": 0, "tid": 12, "thread": "app", "group": "worker", "wall_ns": 8 * G, "cpu_ns": 6 * G,
         "wait_ns": {**zero, "io": G, "lock": G // 2}, "off_cpu_ns": 3 * G // 2, "paused_ns": 0, "rest_ns": G // 2},
        {"run": 0, "tid": 13, "thread": "app", "group": "worker", "wall_ns": 8 * G, "cpu_ns": 4 * G,
         "wait_ns": {**zero, "io": 2 * G, "lock": G, "sync": G}, "off_cpu_ns": G, "paused_ns": 0, "rest_ns": 3 * G}]
    assert r["thread_groups"] == [
        {"group": "main", "threads": 1, "wall_ns": 10 * G, "cpu_ns": 2 * G,
         "wait_ns": {**zero, "sleep": 5 * G, "sync": 2 * G, "sched": G // 2}, "off_cpu_ns": None,
         "paused_ns": 0, "rest_ns": G // 2},
        {"group": "worker", "threads": 2, "wall_ns": 16 * G, "cpu_ns": 10 * G,
         "wait_ns": {**zero, "io": 3 * G, "lock": 3 * G // 2, "sync": G}, "off_cpu_ns": 5 * G // 2,
         "paused_ns": 0, "rest_ns": 7 * G // 2}]
    assert run("throughput.coz")["threads"] == [] and run("throughput.coz")["thread_groups"] == []


def test_a_group_knows_its_time_off_the_cpu_only_when_each_thread_does():
    G = 10 ** 9
    zero = {"io": 0, "lock": 0, "sleep": 0, "sync": 0, "sched": 0, "other": 0}

    def thread(off):
        return {"group": "g", "wall_ns": G, "cpu_ns": 0, "wait_ns": dict(zero), "off_cpu_ns": off,
                "paused_ns": 0, "rest_ns": 0}
    assert analysis.thread_groups([thread(G // 2), thread(G // 4)])[0]["off_cpu_ns"] == 3 * G // 4
    assert analysis.thread_groups([thread(G // 2), thread(None)])[0]["off_cpu_ns"] is None
    assert analysis.thread_groups([thread(None), thread(G // 2)])[0]["off_cpu_ns"] is None


def test_a_threads_cpu_is_never_more_than_its_wall_time(tmp_path):
    # The main thread's clock counts from the process's start, before its record's
    # start_ns: a 0.75 ms program read 453% of its wall time in the CPU column.
    f = tmp_path / "p.coz"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"type": "startup", "version": 1, "time_ns": 1, "pid": 2, "mode": "sampling-only"},
        {"type": "thread", "tid": 2, "thread": "echo", "group": "main", "start_ns": 1_000_000,
         "end_ns": 1_750_000, "cpu_ns": 0, "cpu_clock_ns": 3_380_000}]) + "\n")
    r = analysis.analyze(profile.load(str(f)))
    assert r["threads"][0]["cpu_ns"] == 750_000 and r["threads"][0]["rest_ns"] == 0


def test_the_profilers_pauses_are_not_the_programs_cpu_time(tmp_path):
    # A thread that pays virtual speedup's delays by holding its CPU: its clock
    # counts those pauses (paused_cpu_ns of its paused_ns), its CPU column must
    # not. Measured on over_pipeline at 75%: its busiest stage read 78% CPU where
    # 18 of those points were the profiler's pauses.
    G = 10 ** 9
    f = tmp_path / "p.coz"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"type": "startup", "version": 1, "time_ns": 1, "pid": 2, "mode": "fixed-line"},
        {"type": "thread", "tid": 3, "thread": "w", "group": "stage2", "start_ns": 0, "end_ns": 10 * G,
         "cpu_ns": 5 * G, "cpu_clock_ns": 7 * G, "paused_ns": 3 * G, "paused_cpu_ns": 2 * G,
         "wait_ns": {"io": 0, "lock": 0, "sleep": 0, "sync": G, "sched": G, "other": 0}},
        {"type": "thread", "tid": 4, "thread": "w", "group": "stage2", "start_ns": 0, "end_ns": 10 * G,
         "cpu_ns": 4 * G, "paused_ns": G, "paused_cpu_ns": G,
         "wait_ns": {"io": 0, "lock": 0, "sleep": 0, "sync": G, "sched": 0, "other": 0}}]) + "\n")
    r = analysis.analyze(profile.load(str(f)))
    a, b = r["threads"]
    assert (a["cpu_ns"], a["paused_ns"], a["rest_ns"]) == (5 * G, 3 * G, 3 * G)
    # Without its clock, the sampled CPU time, which leaves the pauses out already.
    assert (b["cpu_ns"], b["paused_ns"], b["rest_ns"]) == (4 * G, G, 5 * G)
    g, = r["thread_groups"]
    assert (g["cpu_ns"], g["paused_ns"], g["rest_ns"]) == (9 * G, 4 * G, 8 * G)


def test_a_program_whose_threads_wait_for_a_cpu_is_told_its_predictions_are_least_reliable(tmp_path):
    # Where runnable threads outnumber the CPUs they get, predictions were off by
    # 4 to 6 points on average on the benchmarks (issue 15): the report says so
    # when the threads waited for a CPU over 10% of their runnable time.
    G = 10 ** 9
    base = open(os.path.join(FIXTURES, "throughput.coz")).read().rstrip("\n")

    def with_threads(name, sched_ns):
        f = tmp_path / name
        f.write_text(base + "\n" + "\n".join(json.dumps(
            {"type": "thread", "tid": 10 + i, "thread": "w", "group": "worker", "start_ns": 0,
             "end_ns": 10 * G, "cpu_ns": 4 * G, "cpu_clock_ns": 4 * G,
             "wait_ns": {"io": 0, "lock": 0, "sleep": 0, "sync": 0, "sched": sched_ns, "other": 0}})
            for i in range(2)) + "\n")
        return analysis.analyze(profile.load(str(f)))

    crowded = with_threads("crowded.coz", G)  # 1 s of 5 s runnable: 20%
    assert crowded["lines"] and crowded["summary"]["cpu_wait_share"] == approx(0.2)
    said = [w for w in crowded["warnings"] if "waited for a CPU" in w]
    assert len(said) == 1 and "20% of the time they were runnable" in said[0]
    free = with_threads("free.coz", G // 10)  # 0.1 s of 4.1 s: 2.4%
    assert free["summary"]["cpu_wait_share"] == approx(0.1 / 4.1)
    assert not any("waited for a CPU" in w for w in free["warnings"])


def unit_curve(result, unit, name):
    found = [ln for ln in result["lines"] if ln["unit"] == unit and ln["line"] == name]
    assert len(found) == 1, [(ln["unit"], ln["line"]) for ln in result["lines"]]
    return found[0]


def test_curves_are_kept_apart_by_unit_and_each_unit_has_its_own_phase_correction():
    r = run("units.coz")
    assert r["units"] == ["line", "function", "callsite"]
    U = "/src/u.c"
    # (t_obs / s_obs) * (s / T), T = 1 s, t_obs = 0.3 s; s and s_obs from each unit's own samples
    expected = {("line", f"{U}:5"): (300, 135), ("line", f"{U}:6"): (60, 60),
                ("function", "work"): (300 + 60, 180), ("callsite", f"{U}:20"): (200 + 40, 144),
                ("callsite", f"{U}:21"): (100 + 20, 90), ("callsite", f"{U}:22"): (60, 90)}
    assert len(r["lines"]) == len(expected)
    for (unit, name), (s, s_obs) in expected.items():
        c = unit_curve(r, unit, name)
        assert c["phase_factor"] == approx((3e8 / s_obs) * (s / 1e9)), (unit, name)
        assert c["points"][2]["program_speedup"] == approx(0.5 * c["phase_factor"])
    ranked = [(ln["unit"], ln["line"]) for ln in r["lines"]]
    assert ranked == [("line", f"{U}:5"), ("function", "work"), ("callsite", f"{U}:20"),
                      ("callsite", f"{U}:21"), ("line", f"{U}:6"), ("callsite", f"{U}:22")]


def test_a_function_knows_its_lines_and_the_call_sites_that_call_it():
    r = run("units.coz")
    U = "/src/u.c"
    work = unit_curve(r, "function", "work")
    assert (work["file"], work["lineno"], work["function"]) == (U, 5, None)
    assert work["contains"] == [f"{U}:5", f"{U}:6"]           # highest impact first
    assert work["called_from"] == [f"{U}:20", f"{U}:21"]
    assert work["on_cpu_share"] == approx(300 / 360) and work["off_cpu"] == approx({"io": 60 / 360})
    assert unit_curve(r, "line", f"{U}:5")["function"] == "work"
    assert unit_curve(r, "line", f"{U}:6")["category"] == "io"
    qs = unit_curve(r, "callsite", f"{U}:22")
    assert (qs["function"], qs["calls"], qs["file"], qs["lineno"]) == ("main", ["qsort"], U, 22)
    cs = unit_curve(r, "callsite", f"{U}:20")
    assert cs["calls"] == ["work"] and cs["samples"] == 240
    assert cs["off_cpu"] == approx({"io": 40 / 240})
    for ln in r["lines"]:
        if ln["unit"] != "function":
            assert ln["contains"] == [] and ln["called_from"] == []
        if ln["unit"] != "callsite":
            assert ln["calls"] == []


def test_a_call_sites_waits_keep_their_time_on_the_cpu(tmp_path):
    # Since 2026-12-01 a blocked sample's time on the CPU (the kernel's work
    # for the call) is a "cpu" stack under coz_kernel_in_io: a call site's
    # waits still count it in their category, and the call site calls no
    # function named so.
    src = os.path.join(FIXTURES, "units.coz")
    out = []
    for line in open(src):
        rec = json.loads(line)
        if rec["type"] == "locations":
            rec["locations"].append({"id": 99, "address": 77, "object": "/lib/libcoz.so", "object_offset": 77,
                                     "build_id": None, "lines": [{"function": "coz_kernel_in_io",
                                                                  "file": None, "line": 0}]})
        elif rec["type"] == "stacks":
            rec["stacks"].append({"id": 6, "locations": [99, 4, 2, 7], "kind": "cpu", "tid": 11,
                                  "thread": "app", "group": "main"})
        elif rec["type"] == "stack_counts":
            rec["counts"] = [[4, 25, 25000000] if c[0] == 4 else c for c in rec["counts"]]
            rec["counts"].append([6, 15, 15000000])
        out.append(json.dumps(rec))
    f = tmp_path / "split.coz"
    f.write_text("\n".join(out) + "\n")
    r = analysis.analyze(profile.load(str(f)))
    cs = unit_curve(r, "callsite", "/src/u.c:20")
    assert cs["calls"] == ["work"] and cs["samples"] == 240
    assert cs["off_cpu"] == approx({"io": 40 / 240})
    before = unit_curve(run("units.coz"), "callsite", "/src/u.c:20")
    assert cs["phase_factor"] == approx(before["phase_factor"])


def test_function_names_with_a_path_match_only_that_file():
    from cozprof import units
    assert units.split_function_name("work [/src/u.c]") == ("work", "/src/u.c")
    assert units.split_function_name("operator[]") == ("operator[]", None)
    assert units.UnitIndex.matches("work [/src/u.c]", ("work", "/src/u.c"))
    assert not units.UnitIndex.matches("work [/src/v.c]", ("work", "/src/u.c"))
    assert units.UnitIndex.matches("work", ("work", "/src/v.c"))
    assert not units.UnitIndex.matches("work", ("worker", "/src/u.c"))


def test_omitted_curves_name_their_unit():
    r = run("units.coz", min_points=4)
    assert r["lines"] == [] and len(r["omitted"]) == 6
    assert {(o["unit"], o["line"]) for o in r["omitted"]} >= {("function", "work"),
                                                              ("callsite", "/src/u.c:20")}


# -- eq. 8 on the footing of the plain intervals ------------------------------

def _serial_profile(path, phase_a=None):
    """The profile the runtime writes for one thread whose rounds of 3 ms run
    line A for 2 ms and line B for 1 ms (1 ms sampling period), with 300 ms
    experiments on A and B at the speedups below, each followed by its
    samples and its `runtime` record (effective time: wall less the delay
    the experiment inserted). `phase_a`: the experiments (by index) in which
    A runs alone, 3 ms a round (A's phase); in the others B runs alone."""
    recs = [{"type": "startup", "version": 1, "time_ns": 1, "pid": 7, "argv0": "/bin/s", "mode": "causal",
             "sample_period_ns": 1000000, "experiment_length_ns": 300000000, "blocked_scope": "ils"}]
    speedups = [0.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.25, 0.0, 0.0, 0.75]
    runtime = 0
    for i in range(24):
        # each line gets every speedup of the list once, in its order
        s = speedups[(i if phase_a is not None else i // 2) % len(speedups)]
        if phase_a is None:
            line, share = ("A", 2 / 3) if i % 2 == 0 else ("B", 1 / 3)
            counts = {"/src/s.c:1": 200, "/src/s.c:2": 100}
        else:
            line, share = ("A", 1.0) if i in phase_a else ("B", 1.0)
            counts = {"/src/s.c:1" if line == "A" else "/src/s.c:2": 300}
        name = "/src/s.c:1" if line == "A" else "/src/s.c:2"
        wall = 300000000
        delay = int(s * share * wall)
        recs.append({"type": "experiment", "selected": name, "speedup": s, "duration_ns": wall - delay,
                     "wall_ns": wall, "delay_ns": delay, "selected_samples": counts[name], "partial": False,
                     "progress": [{"name": "round", "kind": "throughput", "delta": 100}]})
        recs.append({"type": "samples", "counts": counts, "out_of_scope": 0})
        runtime += wall - delay
        recs.append({"type": "runtime", "time_ns": runtime})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return [str(path)]


def test_phase_correction_leaves_a_program_without_phases_alone(tmp_path):
    # Over effective time, A's own speedups raise its density while measured
    # (200 samples in 300 - 200 s ms of an experiment at s) more than all the
    # experiments raise it over the run: eq. 8 over effective time read 0.961
    # for A here, and its slope 0.641 for 2/3 (the runtime's profiles of
    # benchmarks/ read 0.91 to 0.99 on their top lines: docs/analysis.md,
    # section 3). On the plain intervals' footing it is 1.
    r = run(_serial_profile(tmp_path / "s.coz"))
    a, b = only(r, "/src/s.c:1"), only(r, "/src/s.c:2")
    assert a["phase_factor"] == approx(1.0) and b["phase_factor"] == approx(1.0)
    assert a["slope"] == approx(2 / 3) and b["slope"] == approx(1 / 3)


def test_phase_correction_scales_a_line_by_its_phase(tmp_path):
    # A runs alone in the first 12 of 24 experiments, B alone in the rest:
    # where measured, A's curve is x. Plain intervals: those of 0%
    # experiments after a 0% one (the first, and none after a sped-up one,
    # whose cool-off pauses fall in the next interval): experiments 0, 1, 4,
    # 7 and 10 in A's phase, 13, 16, 19 and 22 in B's. So A holds 5 of 9
    # plain intervals, and its curve over the run is 5/9 x.
    r = run(_serial_profile(tmp_path / "p.coz", phase_a=range(12)))
    a = only(r, "/src/s.c:1")
    assert a["phase_factor"] == approx(5 / 9)
    assert a["slope"] == approx(5 / 9)
