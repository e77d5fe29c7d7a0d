"""coz report's causal table with units of speedup, off-CPU lines and the
per-thread breakdown (fixtures units.coz and offcpu.coz, see their README)."""

import json
import os

from conftest import FIXTURES
from cozprof import cli, plot, report


def table(capsys, *argv):
    assert cli.main(["report", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_units_are_shown_with_their_kind_and_nested_under_their_function(capsys):
    lines = table(capsys, os.path.join(FIXTURES, "units.coz"))
    header = next(ln for ln in lines if ln.startswith("#"))
    assert header.split()[:3] == ["#", "unit", "name"] and "time" in header
    at = lines.index(header)
    rows = [ln.split() for ln in lines[at + 1:at + 7]]
    # rank, kind, (nesting mark,) name, time mix: work's row opens to its lines and callers
    assert [r[:4] for r in rows] == [
        ["2", "function", "work", "cpu"],
        ["1", "line", "-", "/src/u.c:5"],
        ["3", "call", "site", "-"],
        ["4", "call", "site", "-"],
        ["5", "line", "-", "/src/u.c:6"],
        ["6", "call", "site", "/src/u.c:22"]]
    assert rows[2][4] == "/src/u.c:20" and rows[3][4] == "/src/u.c:21"
    assert rows[0][3:7] == ["cpu", "83%", "io", "17%"]
    assert rows[4][4:6] == ["io", "100%"]


def test_minus_n_limits_top_level_rows_with_their_nested_ones(capsys):
    lines = table(capsys, "-n", "1", os.path.join(FIXTURES, "units.coz"))
    header = next(ln for ln in lines if ln.startswith("#"))
    body = lines[lines.index(header) + 1:]
    assert body[4].split()[1] == "line" and "/src/u.c:6" in body[4]
    assert body[5] == "(1 more row; use -n to show more)"


def test_off_cpu_line_and_thread_groups(capsys):
    lines = table(capsys, os.path.join(FIXTURES, "offcpu.coz"))
    header = next(ln for ln in lines if ln.startswith("#"))
    assert header.split()[:4] == ["#", "line", "time", "impact"]
    row = lines[lines.index(header) + 1].split()
    assert row[:6] == ["1", "/src/o.c:9", "sleep", "79%", "sync", "14%"]
    at = lines.index("where the threads' time went (share of their wall time):")
    assert lines[at + 1].split() == ["thread", "group", "threads", "wall", "cpu", "io", "lock", "sleep",
                                     "sync", "sched", "other", "off", "rest"]
    assert lines[at + 2].split() == ["main", "1", "10.00s", "20%", "0%", "0%", "50%", "20%", "5%", "0%", "-",
                                     "5%"]
    assert lines[at + 3].split() == ["worker", "2", "16.00s", "62%", "19%", "9%", "0%", "6%", "0%", "0%",
                                     "16%", "22%"]
    # the workers' calls took 34% of their wall time, and they were off the CPU 16% of it
    assert lines[at + 4] == ("io, lock, sleep and sync are the time inside those calls, off the time off the "
                             "CPU: in worker (calls 34%, off 16%) the rest of the calls' time was the kernel's "
                             "work for them (in cpu) or preemption during them (in sched)")


def test_calls_that_waited_off_the_cpu_are_not_pointed_out():
    G = 10 ** 9
    zero = {"io": 0, "lock": 0, "sleep": 0, "sync": 0, "sched": 0, "other": 0}
    group = {"group": "g", "threads": 1, "wall_ns": 10 * G, "cpu_ns": 2 * G,
             "wait_ns": {**zero, "io": 5 * G, "sync": 2 * G}, "off_cpu_ns": 7 * G - G // 2,
             "paused_ns": 0, "rest_ns": 0}
    lines = report.format_thread_groups([group])
    assert len(lines) == 3 and lines[2].split()[-2:] == ["65%", "0%"]
    group["off_cpu_ns"] = 6 * G - G // 2  # 1.5 s of the calls not off the CPU: pointed out
    assert report.format_thread_groups([group])[-1].startswith("io, lock, sleep and sync are the time")


def test_a_profile_of_cpu_lines_keeps_the_plain_table(capsys):
    lines = table(capsys, os.path.join(FIXTURES, "throughput.coz"))
    header = next(ln for ln in lines if ln.startswith("#"))
    assert "unit" not in header and "time" not in header
    assert not any(ln.startswith("where the threads") for ln in lines)


def test_json_carries_units_mix_and_threads(capsys):
    assert cli.main(["report", "--json", "-", os.path.join(FIXTURES, "units.coz")]) == 0
    data = json.loads(capsys.readouterr().out)
    kinds = {(ln["unit"], ln["line"]) for ln in data["lines"]}
    assert ("function", "work") in kinds and ("callsite", "/src/u.c:20") in kinds
    assert data["units"] == ["line", "function", "callsite"]


def test_time_mix_shows_the_two_largest_categories():
    assert report.time_mix({"on_cpu_share": 0.6, "off_cpu": {"io": 0.3, "lock": 0.1}}) == "cpu 60% io 30%"
    assert report.time_mix({"on_cpu_share": 0.004, "off_cpu": {"sleep": 0.996}}) == "sleep 100%"
    assert report.time_mix({"on_cpu_share": None, "off_cpu": {}}) == "-"


def test_plot_titles_name_the_unit_and_the_wait():
    assert plot.panel_title({"unit": "function", "line": "work", "category": "cpu"}) == "function work"
    assert plot.panel_title({"unit": "callsite", "line": "/src/u.c:20", "file": "/src/u.c",
                             "lineno": 20, "category": "cpu"}) == "call site u.c:20"
    assert plot.panel_title({"unit": "line", "line": "/src/o.c:9", "file": "/src/o.c", "lineno": 9,
                             "category": "sleep"}) == "o.c:9 [sleep]"
    result = {"lines": [{"unit": "function", "line": "work"}, {"unit": "line", "line": "/a/b.c:3"}],
              "omitted": []}
    assert plot.select_lines(result, ["work"]) == [result["lines"][0]]
    assert plot.select_lines(result, ["b.c:3"]) == [result["lines"][1]]


def test_plot_of_units_draws_one_panel_each(tmp_path):
    out = tmp_path / "u.png"
    assert cli.main(["plot", "-o", str(out), os.path.join(FIXTURES, "units.coz")]) == 0
    assert out.stat().st_size > 1000
