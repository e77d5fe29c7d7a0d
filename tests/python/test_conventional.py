"""The conventional profile: flat/cum aggregation, coz report --top/--list/--stat,
and the flame-graph tree (python/cozprof/conventional.py, views.py, stat.py)."""

import json
import os

import pytest

from conftest import FIXTURES
from cozprof import cli, conventional as conv, profile, stat, views
from cozprof.errors import CozError
from stackgen import ProfileWriter, random_profile

V1 = os.path.join(FIXTURES, "records_v1.coz")


def load(path):
    return profile.load([str(path)])


def rows(table):
    return {r.name: (r.flat, r.flat_ns, r.cum, r.cum_ns) for r in table.rows.values()}


# -- aggregation ----------------------------------------------------------------------

def test_records_v1_by_function():
    # Stack 1 (cpu, 12 samples, 12 ms): location 1 = inl (inlined) in work.
    # Stack 2 (io, 5 samples, 5 ms): memcpy called from location 1.
    prof = load(V1)
    t = conv.aggregate(prof, "function")
    assert (t.total, t.total_ns) == (12, 12_000_000)
    assert rows(t) == {"inl": (12, 12_000_000, 12, 12_000_000),
                       "work": (0, 0, 12, 12_000_000)}
    t = conv.aggregate(prof, "function", conv.parse_kinds("all"))
    assert (t.total, t.total_ns) == (17, 17_000_000)
    assert rows(t) == {"inl": (12, 12_000_000, 17, 17_000_000),
                       "work": (0, 0, 17, 17_000_000),
                       "memcpy": (5, 5_000_000, 5, 5_000_000)}
    t = conv.aggregate(prof, "function", conv.parse_kinds("io"))
    assert rows(t)["memcpy"] == (5, 5_000_000, 5, 5_000_000)
    assert "inl" in rows(t) and rows(t)["inl"][0] == 0


def test_records_v1_by_line():
    t = conv.aggregate(load(V1), "line", conv.parse_kinds("all"))
    assert rows(t) == {"/src/app.h:3": (12, 12_000_000, 17, 17_000_000),
                       "/src/app.c:12": (0, 0, 17, 17_000_000),
                       "memcpy": (5, 5_000_000, 5, 5_000_000)}
    by_name = {r.name: r for r in t.rows.values()}
    assert by_name["/src/app.h:3"].function == "inl"
    assert by_name["/src/app.c:12"].function == "work"


def test_recursion_counts_once_in_cum(tmp_path):
    w = ProfileWriter()
    # main -> f -> g -> f -> f (leaf f): f on the stack three times.
    w.add(["main", "f", "g", "f", "f"], 10)
    w.add(["main", "g"], 6)
    t = conv.aggregate(load(w.write(tmp_path / "p.coz")))
    assert rows(t)["f"][:3] == (10, 10_000_000, 10)
    assert rows(t)["g"][:3] == (6, 6_000_000, 16)
    assert rows(t)["main"][:3] == (0, 0, 16)
    assert sum(r.flat for r in t.rows.values()) == t.total == 16


def test_same_line_twice_in_stack_counts_once(tmp_path):
    w = ProfileWriter()
    w.add([("r", "/s/r.c", 4), ("r", "/s/r.c", 4), ("r", "/s/r.c", 9)], 3)
    t = conv.aggregate(load(w.write(tmp_path / "p.coz")), "line")
    assert rows(t) == {"/s/r.c:9": (3, 3_000_000, 3, 3_000_000),
                       "/s/r.c:4": (0, 0, 3, 3_000_000)}


def test_same_name_in_two_files_is_told_apart(tmp_path):
    w = ProfileWriter()
    w.add([("main", "/s/m.c", 1), ("helper", "/s/a.c", 3)], 4)
    w.add([("main", "/s/m.c", 2), ("helper", "/s/b.c", 5)], 2)
    t = conv.aggregate(load(w.write(tmp_path / "p.coz")))
    assert set(rows(t)) == {"main", "helper [/s/a.c]", "helper [/s/b.c]"}


def test_lost_location_and_unsymbolized_address(tmp_path):
    w = ProfileWriter()
    w.add(["main", "leaf"], 2)
    lines = w.lines()
    # The location record is lost: the stacks name location ids it never defined.
    lines = [ln for ln in lines if '"type": "locations"' not in ln]
    path = tmp_path / "p.coz"
    path.write_text("\n".join(lines) + "\n")
    t = conv.aggregate(load(path))
    assert rows(t) == {conv.UNKNOWN: (2, 2_000_000, 2, 2_000_000)}
    w = ProfileWriter()
    w.add(["main", [(None, None, 0)]], 1)
    t = conv.aggregate(load(w.write(tmp_path / "q.coz")))
    names = set(rows(t))
    assert "main" in names and any(n.startswith("app+0x") for n in names)
    # An address in no known object is named by the address itself.
    w = ProfileWriter()
    w.add(["main", [(None, None, 0)]], 1, object="")
    prof = load(w.write(tmp_path / "r.coz"))
    leaf = prof.runs[0].stacks[1].locations[0]
    t = conv.aggregate(prof)
    assert set(rows(t)) == {"main", f"0x{prof.runs[0].locations[leaf].address:x}"}


def naive(added, kinds, by):
    """Reference: every sample expanded, frames listed one by one."""
    flat, cum = {}, {}
    for frames, n, ns, kind, _tid in added:
        if kind not in kinds:
            continue
        expanded = []       # innermost first
        for f in reversed(frames):
            inner_first = f if isinstance(f, list) else [f]
            expanded.extend(inner_first)
        keys = [(fn if by == "function" else f"{fl}:{ln}") for fn, fl, ln in expanded]
        flat[keys[0]] = flat.get(keys[0], 0) + n
        for k in set(keys):
            cum[k] = cum.get(k, 0) + n
    return flat, cum


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("by", ["function", "line"])
@pytest.mark.parametrize("kinds", ["cpu", "all", "io,lock"])
def test_aggregation_matches_a_naive_count(tmp_path, seed, by, kinds):
    w, added = random_profile(seed)
    prof = load(w.write(tmp_path / "p.coz"))
    ks = conv.parse_kinds(kinds)
    t = conv.aggregate(prof, by, ks)
    flat, cum = naive(added, ks, by)
    got_flat = {r.name: r.flat for r in t.rows.values() if r.flat}
    got_cum = {r.name: r.cum for r in t.rows.values()}
    assert got_flat == flat
    assert got_cum == cum
    assert t.total == sum(n for _, n, _, k, _ in added if k in ks)
    assert t.total_ns == sum(ns for _, _, ns, k, _ in added if k in ks)


def test_parse_kinds():
    assert conv.parse_kinds("cpu") == {"cpu"}
    assert conv.parse_kinds("all") == set(conv.KINDS)
    assert conv.parse_kinds("off") == set(profile.WAIT_KINDS)
    assert conv.parse_kinds("cpu, io") == {"cpu", "io"}
    with pytest.raises(CozError, match="unknown sample kind 'disk'"):
        conv.parse_kinds("cpu,disk")


# -- flame tree -----------------------------------------------------------------------

def _check_node(node):
    kids = node["children"]
    assert node["samples"] == node["self_samples"] + sum(c["samples"] for c in kids)
    assert node["time_ns"] == node["self_time_ns"] + sum(c["time_ns"] for c in kids)
    assert [c["time_ns"] for c in kids] == sorted((c["time_ns"] for c in kids), reverse=True)
    for c in kids:
        _check_node(c)


def test_flame_tree_shape_and_sums(tmp_path):
    w, added = random_profile(5)
    prof = load(w.write(tmp_path / "p.coz"))
    tree = conv.flame_tree(prof, conv.parse_kinds("all"))
    json.dumps(tree)   # JSON-ready
    assert tree["name"] == "all"
    assert tree["samples"] == sum(n for _, n, _, _, _ in added)
    _check_node(tree)
    assert set(tree) == {"name", "file", "samples", "time_ns", "self_samples", "self_time_ns",
                         "children"}


def test_flame_tree_of_records_v1():
    tree = conv.flame_tree(load(V1), conv.parse_kinds("all"), by_thread=True)
    t7, t8 = tree["children"]
    assert t7["name"] == "thread app (tid 7, group main)" and t7["samples"] == 12
    work = t8["children"][0]
    assert (work["name"], work["file"]) == ("work", "/src/app.c")
    inl = work["children"][0]
    assert inl["name"] == "inl"
    memcpy = inl["children"][0]
    wait = memcpy["children"][0]
    assert wait == {"name": "[wait: io]", "file": None, "samples": 5, "time_ns": 5_000_000,
                    "self_samples": 5, "self_time_ns": 5_000_000, "children": []}
    # CPU only: no wait leaves.
    tree = conv.flame_tree(load(V1))
    assert tree["samples"] == 12
    assert tree["children"][0]["children"][0] == {
        "name": "inl", "file": "/src/app.h", "samples": 12, "time_ns": 12_000_000,
        "self_samples": 12, "self_time_ns": 12_000_000, "children": []}


# -- coz report --top ------------------------------------------------------------------

def _table_lines(out):
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:5] == ["flat", "flat%", "sum%", "cum", "cum%"])
    return lines[head], [ln.split() for ln in lines[head + 1:] if ln and not ln.startswith("(")]


def test_top_table(tmp_path, capsys):
    w = ProfileWriter()
    w.add(["main", "work", "hot"], 60)          # 60 ms
    w.add(["main", "work"], 30)                 # 30 ms
    w.add(["main", "cold"], 10)                 # 10 ms
    w.add(["main", "read"], 40, kind="io")      # waiting, not shown by default
    path = w.write(tmp_path / "p.coz")
    assert cli.main(["report", "--top", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("100 samples (100ms) on-CPU in 1 run; not shown: io 40ms "
                                   "(--kind all shows them)")
    head, body = _table_lines(out)
    assert head.split() == ["flat", "flat%", "sum%", "cum", "cum%", "function"]
    assert body == [["60ms", "60.00%", "60.00%", "60ms", "60.00%", "hot"],
                    ["30ms", "30.00%", "90.00%", "90ms", "90.00%", "work"],
                    ["10ms", "10.00%", "100.00%", "10ms", "10.00%", "cold"],
                    ["0", "0.00%", "100.00%", "100ms", "100.00%", "main"]]
    assert cli.main(["report", "--top", "--kind", "all", "--value", "samples", "--sort", "cum",
                     "-n", "2", str(path)]) == 0
    out = capsys.readouterr().out
    _, body = _table_lines(out)
    assert body == [["0", "0.00%", "0.00%", "140", "100.00%", "main"],
                    ["30", "21.43%", "21.43%", "90", "64.29%", "work"]]
    assert "(3 more functions; -n N shows N)" in out


def test_top_gives_the_runtimes_word_on_short_threads(tmp_path, capsys):
    # A thread's sampling period under way when it ends is lost: threads
    # shorter than a period or two are mostly in no sample (two_threads'
    # 600 threads of 5 to 8 ms each, sampled every 10 ms, read its thread B
    # at 0% where it had 37%). The runtime says so in a warning
    # ("short-threads", tests/e2e/test_conventional_profile.py runs it);
    # --top and --list give it under their first line, and no other.
    said = ("4 of 5 threads ran under 2 sampling periods (10 ms) of CPU time each, 0.02 s in all, "
            "and their samples hold 0.00 s of it: ...")

    def profile_with(warnings):
        w = ProfileWriter(sample_period_ns=10_000_000)
        w.add(["main", "work"], 5, time_ns=50_000_000)
        for code, message in warnings:
            w.records.append({"type": "warning", "code": code, "message": message})
        return w.write(tmp_path / f"p{len(warnings)}.coz")

    assert cli.main(["report", "--top", str(profile_with([("no-debug-info", "x")]))]) == 0
    assert "note:" not in capsys.readouterr().out
    path = profile_with([("no-debug-info", "x"), ("short-threads", said)])
    assert cli.main(["report", "--top", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "note: " + said
    assert sum(line.startswith("note:") for line in lines) == 1


def test_top_by_line_and_json(tmp_path, capsys):
    w = ProfileWriter()
    w.add([("main", "/s/m.c", 7), ("work", "/s/w.c", 21)], 3)
    w.add([("main", "/s/m.c", 7), ("work", "/s/w.c", 22)], 1)
    path = w.write(tmp_path / "p.coz")
    assert cli.main(["report", "--top", "--by", "line", str(path)]) == 0
    _, body = _table_lines(capsys.readouterr().out)
    assert body[0] == ["3ms", "75.00%", "75.00%", "3ms", "75.00%", "/s/w.c:21", "(work)"]
    assert body[-1] == ["0", "0.00%", "100.00%", "4ms", "100.00%", "/s/m.c:7", "(main)"]
    assert cli.main(["report", "--top", "--json", "-", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["by"] == "function" and data["kinds"] == ["cpu"]
    assert (data["total_samples"], data["total_ns"]) == (4, 4_000_000)
    assert data["rows"][0] == {"name": "work", "function": "work", "file": "/s/w.c", "line": None,
                               "flat": 4, "flat_ns": 4_000_000, "cum": 4, "cum_ns": 4_000_000}


@pytest.mark.parametrize("argv, message", [
    (["report", "--by", "line", V1], "--by applies to --top"),
    (["report", "--kind", "all", V1], "--kind applies to --top and --list"),
    (["report", "--top", "--kind", "nap", V1], "unknown sample kind 'nap'"),
    (["report", "--list", "(", V1], "is not a regular expression"),
    (["report", "--top", "--stat", "--json", "-", V1], "--json writes one view"),
    # Options that were ignored by the views given.
    (["report", "--top", "--no-phase-correction", V1], "--no-phase-correction applies to the causal table and --list"),
    (["report", "--stat", "--min-points", "2", V1], "--min-points applies to the causal table and --list"),
    (["report", "--top", "--progress-point", "p", V1], "--progress-point applies to the causal table and --list"),
    (["report", "--stat", "-n", "3", V1], "-n applies to the causal table and --top, not to --list or --stat"),
    (["report", "--list", "work", "-n", "3", V1], "-n applies to the causal table and --top"),
    (["report", "--top", "--json", "-", "-n", "3", V1], "-n applies to the --top table, not to --json"),
    (["report", "--top", os.path.join(FIXTURES, "throughput.coz")], "the profile has no stacks"),
    (["report", "--stat", os.path.join(FIXTURES, "throughput.coz")], "no counters record"),
])
def test_view_errors(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("coz: error: ") and message in err[0]
    assert err[1].startswith("coz: ") and len(err) == 2


@pytest.mark.parametrize("argv", [
    ["report", "--top", "-n", "1", V1],
    ["report", "--top", "--list", "work", "-n", "1", "--no-phase-correction", V1],
    ["report", "--list", "work", "--min-points", "2", "--progress-point", "p", "--no-phase-correction", V1],
])
def test_options_are_taken_with_a_view_they_apply_to(capsys, argv):
    assert cli.main(argv) == 0
    assert capsys.readouterr().err == ""


def test_top_default_limit_and_speed_of_many_stacks(tmp_path, capsys):
    w, _ = random_profile(9, stacks=400, functions=60)
    path = w.write(tmp_path / "p.coz")
    assert cli.main(["report", "--top", str(path)]) == 0
    out = capsys.readouterr().out
    _, body = _table_lines(out)
    assert len(body) == views.DEFAULT_TOP
    assert "more functions; -n N shows N)" in out


# -- coz report --list --------------------------------------------------------------------

SOURCE = """#include <stdio.h>
static int hot(int x) {
    int y = x * 3;
    return y + 1;
}
int work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += hot(i);
    return s;
}
"""


def test_list_shows_source_flat_cum_and_causal(tmp_path, capsys):
    src = tmp_path / "w.c"
    src.write_text(SOURCE)
    f = str(src)
    w = ProfileWriter(mode="causal")
    w.add([("main", "/s/m.c", 3), ("work", f, 9), ("hot", f, 3)], 70)
    w.add([("main", "/s/m.c", 3), ("work", f, 9), ("hot", f, 4)], 20)
    w.add([("main", "/s/m.c", 3), ("work", f, 8)], 10)
    # Experiments on w.c:9 as in throughput.coz (tests/fixtures/profiles/README.md):
    # impact 5/21 without phase correction.
    exps = []
    for s, k in ((0.0, 100), (0.0, 100), (0.5, 125), (1.0, 200)):
        exps.append(json.dumps({"type": "experiment", "selected": f"{f}:9", "speedup": s,
                                "duration_ns": 1_000_000_000, "wall_ns": 1_000_000_000,
                                "delay_ns": 0, "selected_samples": 50, "partial": False,
                                "progress": [{"name": "work", "kind": "throughput", "delta": k}]}))
    path = w.write(tmp_path / "p.coz", extra_lines=exps)
    assert cli.main(["report", "--list", "^work$", "--no-phase-correction", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    i = lines.index(f"ROUTINE ======================== work in {f}")
    assert lines[i + 1].split() == ["10ms", "100ms", "(flat,", "cum)", "100.00%", "of", "total"]
    assert lines[i + 2].split()[:4] == ["flat", "cum", "causal", "line"]
    body = {ln.split()[3] if len(ln.split()) > 3 and ln.split()[2].endswith("%") else None: ln
            for ln in lines[i + 3:]}
    row9 = next(ln for ln in lines[i + 3:] if ln.rstrip().endswith("s += hot(i);"))
    assert row9.split()[:4] == [".", "90ms", "+23.8%", "9"]
    row8 = next(ln for ln in lines[i + 3:] if ln.rstrip().endswith("for (int i = 0; i < n; i++)"))
    assert row8.split()[:3] == ["10ms", "10ms", "8"]
    row6 = next(ln for ln in lines[i + 3:] if ln.rstrip().endswith("int work(int n) {"))
    assert row6.split()[:3] == [".", ".", "6"]
    assert body  # the routine has rows
    assert "hot in" not in out   # ^work$ matches one function
    assert cli.main(["report", "--list", "hot", "--value", "samples", str(path)]) == 0
    out = capsys.readouterr().out
    row3 = next(ln for ln in out.splitlines() if ln.rstrip().endswith("int y = x * 3;"))
    assert row3.split()[:3] == ["70", "70", "3"]


def test_list_without_source_or_match(tmp_path, capsys):
    assert cli.main(["report", "--list", "work", V1]) == 0
    out = capsys.readouterr().out
    assert "ROUTINE ======================== work in /src/app.c" in out
    assert "source (not found: /src/app.c)" in out
    row = next(ln for ln in out.splitlines() if ln.split()[-1:] == ["12"])
    assert row.split() == [".", "12ms", "12"]
    assert cli.main(["report", "--list", "zzz", V1]) == 0
    assert "no function matches 'zzz'" in capsys.readouterr().out


def test_an_empty_list_pattern_lists_every_function(capsys):
    # '' matches every name, as in pprof: it is a --list, not an absent one.
    assert cli.main(["report", "--list", "", "--kind", "cpu", V1]) == 0
    out = capsys.readouterr().out
    assert "ROUTINE ======================== work in /src/app.c" in out
    assert out.count("ROUTINE ====") >= 2


def test_shown_lines_blocks():
    assert views._shown_lines([10], 100) == [7, 8, 9, 10, 11, 12, 13]
    assert views._shown_lines([2, 40], 41) == [1, 2, 3, 4, 5, None, 37, 38, 39, 40, 41]
    assert views._shown_lines([10, 18], 100) == list(range(7, 22))


# -- coz report --stat -----------------------------------------------------------------------

def test_stat_software_only(capsys):
    assert cli.main(["report", "--stat", V1]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == " Counters of '/bin/app' (pid 7):"
    # task clock 2000 ns over 3000 ns of wall time
    assert "task-clock        #  0.667 CPUs utilized" in out
    assert [ln.split()[:2] for ln in out.splitlines() if "context-switches" in ln] == [["4", "context-switches"]]
    assert "<not counted>  cpu-migrations    #  the kernel does not tell" in out
    assert "hardware counters (cycles, instructions, ...): no PMU in this virtual machine" in out
    assert "0.000003000 seconds time elapsed" in out


def test_stat_hardware_and_json(tmp_path, capsys):
    w = ProfileWriter()
    w.add(["main"], 1)
    w.counters(migrations=5, hardware={"cycles": 4_000_000, "instructions": 6_000_000},
               hardware_unavailable=None)
    path = w.write(tmp_path / "p.coz")
    assert cli.main(["report", "--stat", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2,000.00 msec  task-clock" in out and "0.500 CPUs utilized" in out
    assert "6,000,000  instructions" in out and "1.50 insn per cycle" in out
    assert "5  cpu-migrations" in out
    assert "hardware counters" not in out
    assert "20.000 /sec" in out       # 40 context switches in 2 s of task clock
    assert cli.main(["report", "--stat", "--json", "-", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    s = data["runs"][0]
    assert s["cpus_utilized"] == 0.5 and s["instructions_per_cycle"] == 1.5
    assert s["context_switches"] == {"voluntary": 30, "involuntary": 10, "total": 40}
    assert s["hardware_unavailable"] is None and s["migrations"] == 5
    assert s["children"] is None  # a profile of a runtime that did not write them


def test_stat_children(tmp_path, capsys):
    w = ProfileWriter()
    w.add(["main"], 1)
    w.counters(children={"cpu_ns": 369_070_000, "profiled": False})
    path = w.write(tmp_path / "p.coz")
    assert cli.main(["report", "--stat", str(path)]) == 0
    out = capsys.readouterr().out
    assert "369.07 msec  children task-clock  #  not in this profile (--follow-children)" in out
    assert cli.main(["report", "--stat", "--json", "-", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["children"] == {"cpu_ns": 369_070_000,
                                                                          "profiled": False}


def test_stat_profiler_thread(tmp_path, capsys):
    # 30 ms of the run's 2000 ms of task clock were the profiler thread's.
    w = ProfileWriter()
    w.add(["main"], 1)
    w.counters(profiler_cpu_ns=30_000_000)
    path = w.write(tmp_path / "p.coz")
    assert cli.main(["report", "--stat", str(path)]) == 0
    out = capsys.readouterr().out
    assert "30.00 msec  profiler-thread   #  1.50% of task-clock" in out
    assert cli.main(["report", "--stat", "--json", "-", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["profiler_cpu_ns"] == 30_000_000
    # Profiles of runtimes that did not write it: no row, null in JSON.
    w = ProfileWriter()
    w.add(["main"], 1)
    w.counters()
    path = w.write(tmp_path / "q.coz")
    assert cli.main(["report", "--stat", str(path)]) == 0
    assert "profiler-thread" not in capsys.readouterr().out
    assert cli.main(["report", "--stat", "--json", "-", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["profiler_cpu_ns"] is None


def test_stat_run_stat_without_counters(tmp_path):
    w = ProfileWriter()
    w.add(["main"], 1)
    prof = load(w.write(tmp_path / "p.coz"))
    assert stat.run_stat(prof.runs[0]) is None
    with pytest.raises(CozError, match="no counters record"):
        stat.require_counters(prof)


def test_format_time():
    assert [conv.format_time(v) for v in (0, 999, 1500, 12_500_000, 1_250_000_000, 250_000_000_000)] == \
        ["0", "999ns", "1.5us", "12.5ms", "1.25s", "250s"]


def test_benchmark_script_runs(tmp_path):
    """benchmarks/conventional_bench.py (the speed figures of docs/conventional.md)
    runs its commands to the end on a small profile."""
    import subprocess
    import sys

    from conftest import REPO
    out = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "conventional_bench.py"),
                          "--stacks", "300", "--keep", str(tmp_path / "b")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("profile: 300 distinct stacks")
    timed = [ln for ln in lines if ln.startswith("coz ")]
    assert len(timed) == 6 and all(" s wall " in ln and ln.endswith(" s CPU") for ln in timed)
    assert os.path.getsize(tmp_path / "b" / "big.pb.gz") > 0


def test_header_names_the_kinds():
    prof = load(V1)
    assert views.header(prof, conv.parse_kinds("all"), "time") == "17 samples (17ms) of all kinds in 1 run"
    assert views.header(prof, conv.parse_kinds("off"), "time") == \
        "5 samples (5ms) off-CPU in 1 run; not shown: cpu 12ms (--kind all shows them)"
    assert views.header(prof, conv.parse_kinds("io,lock"), "time").startswith(
        "5 samples (5ms) of kinds io,lock in 1 run")


def _no_stack_error(tmp_path, records):
    path = tmp_path / "p.coz"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(CozError) as e:
        conv.require_stacks(profile.load([str(path)]))
    return str(e.value), e.value.hint


def test_a_run_without_samples_says_so_rather_than_blaming_the_format(tmp_path):
    # A run of this runtime that took no sample (a program shorter than the
    # period, or one that became a daemon) is not an old or upstream profile.
    startup = ProfileWriter().records[0]
    shutdown = {"type": "shutdown", "time_ns": 1, "reason": "exit", "samples": 0, "lost_records": 0,
                "dropped_samples": 0, "skipped_records": 0, "truncated_stacks": 0, "experiments": 0}
    msg, hint = _no_stack_error(tmp_path, [startup, shutdown])
    assert msg == "the profile has no stacks: its runs took no sample"
    assert "ended before its first sample" in hint and "--follow-children" in hint
    msg, hint = _no_stack_error(tmp_path, [startup, dict(shutdown, reason="daemon")])
    assert msg == "the profile has no stacks: its runs took no sample" and "became a daemon" in hint
    # A run with samples but no final records (killed before its first
    # flush of stacks, or still going) is not blamed on the format either.
    samples = {"type": "samples", "counts": {"/src/a.c:1": 3}, "out_of_scope": 0}
    msg, hint = _no_stack_error(tmp_path, [startup, samples])
    assert msg == "the profile has no stacks: its runs wrote none yet"
    assert "still runs" in hint and "SIGKILL" in hint
    # Upstream's profiles keep the message about formats.
    with open(os.path.join(FIXTURES, "upstream.json.coz")) as f:
        upstream = [json.loads(line) for line in f if line.strip()]
    msg, hint = _no_stack_error(tmp_path, upstream)
    assert msg == "the profile has no stacks: it holds no conventional profile" and "upstream" in hint
