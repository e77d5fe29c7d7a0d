"""End-to-end runs of small programs under the real runtime (`coz run` with
build/libcoz/libcoz.so): known-answer predictions, the profile's records,
modes, options and errors as a user meets them.

Known-answer checks use the fixed-line mode and compare the analysis of
the profile with the answer worked out from the program's structure; their
tolerances hold on an otherwise idle 2-core machine (the README's test
command runs them one at a time)."""

import os
import re
import subprocess
import time

import pytest

from conftest import PROGRAMS, coz_run, records

from cozprof.analysis import analyze
from cozprof.profile import load


def marker_line(program, marker):
    """Line number of the line carrying /* MARKER */ in programs/<program>.c."""
    with open(os.path.join(PROGRAMS, program + ".c")) as f:
        for n, text in enumerate(f, 1):
            if "/* " + marker + " */" in text:
                return n
    raise AssertionError(f"no {marker} in {program}.c")


def line_result(analysis, line_suffix):
    for line in analysis["lines"]:
        if line["line"].endswith(line_suffix):
            return line
    raise AssertionError(f"no result for {line_suffix}: {analysis['lines']} / {analysis['omitted']}")


def fixed_line_profile(tmp_path, exe, args, line, length="100ms"):
    """Profiles `exe` with the line fixed and speedups chosen per experiment
    (half of them 0%), so that baseline and sped-up experiments interleave
    under the same machine conditions; returns the line's analysis."""
    out = tmp_path / "fixed.coz"
    r = coz_run(["--fixed-line", line, "--experiment-length", length, "-o", str(out)], [exe, *args])
    assert r.returncode == 0, r.stderr.decode()
    return line_result(analyze(load([str(out)])), line)


# ---- predictions with known answers ----
#
# Virtual machines like CI's change speed by a factor of two for seconds at a
# time (host load): the analysis corrects slow drift with local baselines,
# and short experiments keep most of them inside one phase, but one or two
# experiments per speedup can still be disturbed. So the shape of the
# measured points is checked with medians, which a few outliers cannot move,
# and the fitted prediction with a wider tolerance.

def median(values):
    values = sorted(values)
    assert values, "no points"
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def gain_per_speedup(result, lo, hi):
    """Median of program speedup / line speedup over points in [lo, hi]."""
    return median([p["program_speedup"] / p["speedup"] for p in result["points"] if lo <= p["speedup"] <= hi])


def test_serial_chain_line_a_at_50_percent_predicts_a_third(build, tmp_path):
    # Line A is 2/3 of each round: speeding it by x speeds the program by 2x/3,
    # so 50% faster A makes the program 33% faster.
    exe = build("serial_ab")
    line = f"serial_ab.c:{marker_line('serial_ab', 'LINE_A')}"
    result = fixed_line_profile(tmp_path, exe, ["40000"], line, length="50ms")
    assert gain_per_speedup(result, 0.2, 1.0) == pytest.approx(2 / 3, abs=0.12), result["points"]
    assert result["predicted"]["0.5"] == pytest.approx(1 / 3, abs=0.1), result


def test_serial_chain_line_b_at_50_percent_predicts_a_sixth(build, tmp_path):
    exe = build("serial_ab")
    line = f"serial_ab.c:{marker_line('serial_ab', 'LINE_B')}"
    result = fixed_line_profile(tmp_path, exe, ["40000"], line, length="50ms")
    assert gain_per_speedup(result, 0.2, 1.0) == pytest.approx(1 / 3, abs=0.1), result["points"]
    assert result["predicted"]["0.5"] == pytest.approx(1 / 6, abs=0.08), result


TWO_THREADS_ARGS = ["1200", "40000000", "20000000"]  # ~10 ms rounds, ~25 per experiment, ~45 experiments


def test_two_threads_shorter_line_predicts_nothing(build, tmp_path):
    # Each round waits for the longer thread: speeding the shorter one is useless.
    exe = build("two_threads")
    line = f"two_threads.c:{marker_line('two_threads', 'LINE_SHORT')}"
    result = fixed_line_profile(tmp_path, exe, TWO_THREADS_ARGS, line, length="250ms")
    # Measured -0.04 to +0.135 over a dozen runs on CI's kind of VM (a small
    # positive bias, not yet explained), against about 0.4 for the longer line.
    assert abs(median([p["program_speedup"] for p in result["points"] if p["speedup"] >= 0.2])) < 0.16, \
        result["points"]
    assert abs(result["predicted"]["0.5"]) < 0.1, result


def test_two_threads_longer_line_gains_then_saturates(build, tmp_path):
    # Speeding the longer thread by x shortens rounds by x until x = 50%,
    # where it is as short as the other thread; beyond that nothing more.
    exe = build("two_threads")
    line = f"two_threads.c:{marker_line('two_threads', 'LINE_LONG')}"
    result = fixed_line_profile(tmp_path, exe, TWO_THREADS_ARGS, line, length="250ms")
    # Under the profiler each round also pays for starting two sampled threads,
    # which dilutes the relative gain: the plateau measures about 0.4 (0.23 to
    # 0.47 seen on a noisy host). A profiler that ignored the other thread would
    # put it at x itself (0.6 to 1).
    assert median([p["program_speedup"] for p in result["points"] if p["speedup"] >= 0.2]) > 0.15, \
        result["points"]
    plateau = median([p["program_speedup"] for p in result["points"] if p["speedup"] >= 0.6])
    assert 0.15 < plateau < 0.58, result["points"]


# ---- the profile as written ----

def test_profile_records_are_whole_and_ordered(build, tmp_path):
    exe = build("serial_ab")
    out = tmp_path / "p.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms"], [exe, "3000"])
    assert r.returncode == 0, r.stderr.decode()
    recs = records(out)
    assert recs[0]["type"] == "startup" and recs[0]["version"] == 1
    assert recs[0]["mode"] == "causal" and recs[0]["sampler"] == "perf_event"
    assert recs[0]["sample_period_ns"] == 1000000 and recs[0]["experiment_length_ns"] == 100000000
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit"
    exps = [x for x in recs if x["type"] == "experiment"]
    assert len(exps) >= 3
    a, b = marker_line("serial_ab", "LINE_A"), marker_line("serial_ab", "LINE_B")
    chosen = [e["selected"] for e in exps]
    # Lines are chosen in proportion to their samples: A or B almost always,
    # but a rare sample elsewhere in the loop (its COZ_PROGRESS line) may be chosen too.
    assert all(c.startswith(f"{PROGRAMS}/serial_ab.c:") for c in chosen), chosen
    main_lines = {f"{PROGRAMS}/serial_ab.c:{a}", f"{PROGRAMS}/serial_ab.c:{b}"}
    assert sum(c in main_lines for c in chosen) >= len(chosen) - 1, chosen
    for e in exps:
        assert e["duration_ns"] + e["delay_ns"] == e["wall_ns"]
        assert e["delay_ns"] == pytest.approx(e["selected_samples"] * e["speedup"] * 1e6, abs=1e6 + 1)
        assert [p["name"] for p in e["progress"]] == ["round"]
    samples = {}
    for x in recs:
        if x["type"] == "samples":
            for k, v in x["counts"].items():
                samples[k] = samples.get(k, 0) + v
    # Line A runs twice as long as line B.
    ratio = samples[f"{PROGRAMS}/serial_ab.c:{a}"] / samples[f"{PROGRAMS}/serial_ab.c:{b}"]
    assert 1.5 < ratio < 2.7, samples
    assert recs[-1]["samples"] >= sum(samples.values())


def test_stdio_and_exit_status_pass_through(build, tmp_path):
    exe = build("echo_exit")
    data = b"causal\x00profiling\n" * 1000
    plain = subprocess.run([exe], input=data, capture_output=True)
    profiled = coz_run(["-o", str(tmp_path / "e.coz")], [exe], input=data)
    assert plain.returncode == profiled.returncode == 7
    assert profiled.stdout == plain.stdout == data
    assert profiled.stderr == plain.stderr


def test_fixed_line_matching_no_line_is_a_one_line_error(build, tmp_path):
    exe = build("serial_ab")
    r = coz_run(["--fixed-line", "serial_ab.c:1", "-o", str(tmp_path / "x.coz")], [exe, "10"])
    assert r.returncode == 2
    err = r.stderr.decode()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("coz: error: --fixed-line serial_ab.c:1 matches no line"), err
    assert len(lines) == 2 and lines[1].startswith("coz: ") and "coz: coz:" not in err, err
    assert r.stdout == b"", "the program must not run"
    assert not (tmp_path / "x.coz").exists(), "no empty profile is left behind"


def test_upstream_header_builds_are_counted(build, tmp_path):
    # A program compiled against Debian's /usr/include/coz.h (upstream's).
    assert os.path.exists("/usr/include/coz.h"), "coz-profiler (upstream) is installed by the bootstrap script"
    exe = tmp_path / "serial_upstream_h"
    subprocess.run(["cc", "-g", "-O1", "-I/usr/include", "-include", "/usr/include/coz.h",
                    os.path.join(PROGRAMS, "serial_ab.c"), "-o", str(exe)], check=True)
    # -include makes sure upstream's header is the one that defines COZ_H first.
    out = tmp_path / "u.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms"], [str(exe), "3000"])
    assert r.returncode == 0, r.stderr.decode()
    deltas = [p["delta"] for x in records(out) if x["type"] == "experiment" for p in x["progress"]]
    assert sum(deltas) > 100


def test_end_to_end_mode_runs_one_experiment(build, tmp_path):
    exe = build("serial_ab")
    out = tmp_path / "e2e.coz"
    line = f"serial_ab.c:{marker_line('serial_ab', 'LINE_A')}"
    r = coz_run(["--end-to-end", "--fixed-line", line, "--fixed-speedup", "40", "-o", str(out)], [exe, "2000"])
    assert r.returncode == 0, r.stderr.decode()
    recs = records(out)
    assert recs[0]["mode"] == "end-to-end"
    exps = [x for x in recs if x["type"] == "experiment"]
    assert len(exps) == 1
    assert exps[0]["speedup"] == 0.4
    assert {"name": "end-to-end", "kind": "throughput", "delta": 1} in exps[0]["progress"]
    assert exps[0]["selected_samples"] > 0


def test_latency_points_count_arrivals_and_departures(build, tmp_path):
    exe = build("requests")
    out = tmp_path / "lat.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms"], [exe, "1.5"])
    assert r.returncode == 0, r.stderr.decode()
    lat = [p for x in records(out) if x["type"] == "experiment" for p in x["progress"] if p["kind"] == "latency"]
    assert lat and all(p["name"] == "request" for p in lat)
    assert sum(p["arrivals"] for p in lat) > 50
    for p in lat:
        assert abs(p["arrivals"] - p["departures"]) <= 2
        assert 0 <= p["difference"] <= 2  # two workers: at most two requests in flight


def test_progress_point_from_the_command_line(build, tmp_path):
    exe = build("no_coz_loop")
    out = tmp_path / "bp.coz"
    line = f"no_coz_loop.c:{marker_line('no_coz_loop', 'LINE_ITEM_DONE')}"
    r = coz_run(["-p", line, "-o", str(out), "--experiment-length", "100ms"], [exe, "20000"])
    assert r.returncode == 0, r.stderr.decode()
    exps = [x for x in records(out) if x["type"] == "experiment"]
    assert exps
    counted = sum(p["delta"] for x in exps for p in x["progress"] if p["name"] == line)
    # Every item passes the breakpoint once; experiments cover most of the run.
    assert 5000 < counted <= 20000, counted


def test_legacy_format_on_request(build, tmp_path):
    exe = build("serial_ab")
    out = tmp_path / "legacy.coz"
    r = coz_run(["--format", "legacy", "-o", str(out), "--experiment-length", "100ms"], [exe, "3000"])
    assert r.returncode == 0, r.stderr.decode()
    text = out.read_text()
    assert text.startswith("startup\ttime=")
    assert re.search(r"^experiment\tselected=\S+:\d+\tspeedup=\d\.\d\d\tduration=\d+\tselected-samples=\d+$", text, re.M)
    assert re.search(r"^throughput-point\tname=round\tdelta=\d+$", text, re.M)
    prof = load([str(out)])
    assert len(prof.experiments) >= 3


def test_no_debug_information_is_named_with_the_fix(build, tmp_path):
    exe = build("serial_ab", flags=("-O1", "-g0"))
    out = tmp_path / "nodebug.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "50ms"], [exe, "500"])
    assert r.returncode == 0
    err = r.stderr.decode()
    assert f"coz: warning: {exe} has no debug information: rebuild it with -g" in err, err
    warnings = [x for x in records(out) if x["type"] == "warning"]
    assert any(w["code"] == "no-debug-info" and exe in w["message"] for w in warnings)


def test_exit_does_not_wait_for_the_running_experiment(build, tmp_path):
    # A 10 s experiment must not hold a short program's exit (upstream waits it out).
    exe = build("serial_ab")
    start = time.monotonic()
    r = coz_run(["-o", str(tmp_path / "x.coz"), "--experiment-length", "10s"], [exe, "300"])
    elapsed = time.monotonic() - start
    assert r.returncode == 0
    assert elapsed < 5, elapsed
    recs = records(tmp_path / "x.coz")
    assert recs[-1]["type"] == "shutdown"
    assert any(x["type"] == "experiment" and x["partial"] for x in recs)
