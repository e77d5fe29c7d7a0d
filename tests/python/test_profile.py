"""The one parser: both formats, merging, truncation, and robustness."""

import glob
import json
import os
import random

import pytest

from conftest import FIXTURES, UPSTREAM_PROFILES
from cozprof import profile
from cozprof.errors import CozError


def fx(name):
    return os.path.join(FIXTURES, name)


def test_json_profile_fields():
    p = profile.load(fx("throughput.coz"))
    assert len(p.runs) == 1
    run = p.runs[0]
    assert run.dialect == "json" and run.mode == "causal"
    assert len(run.experiments) == 7
    e = run.experiments[2]
    assert (e.selected, e.speedup, e.duration_ns, e.selected_samples) == ("/src/a.c:10", 0.5, 10**9, 50)
    assert [(q.name, q.kind, q.delta) for q in e.progress] == [("work", "throughput", 125)]
    assert run.experiments[6].partial is True
    # samples records are increments: 300 + 100
    assert run.samples == {"/src/a.c:10": 400, "/src/b.c:20": 40}
    assert run.out_of_scope == 10
    assert run.runtime_ns == 10 * 10**9
    assert run.shutdown["reason"] == "exit"
    assert p.runtime_warnings() == ["/lib/libfoo.so has no debug information"]
    assert p.warnings == []


def test_legacy_profile_cumulative_samples_and_latency():
    p = profile.load(fx("latency.legacy.coz"))
    run = p.runs[0]
    assert run.dialect == "legacy"
    # legacy samples are running totals: the last value wins
    assert run.samples == {"c.c:5": 30}
    assert run.runtime_ns == 3 * 10**9
    e = run.experiments[1]
    assert e.speedup == 0.25
    lat, thr = e.progress
    assert (lat.kind, lat.arrivals, lat.departures, lat.difference) == ("latency", 100, 100, 8)
    assert (thr.kind, thr.name, thr.delta) == ("throughput", "main.c:9", 1000)
    # upstream's unsigned underflow comes back negative
    assert run.experiments[3].duration_ns < 0
    assert run.shutdown == {"time_ns": 1415880356165907817, "samples": 348580}


def test_upstream_json_variant():
    p = profile.load(fx("upstream.json.coz"))
    run = p.runs[0]
    assert run.dialect == "upstream-json"
    assert [(e.speedup, e.progress[0].delta) for e in run.experiments] == \
        [(0.0, 100), (0.0, 100), (0.5, 125), (1.0, 200)]
    assert run.samples == {"a.c:10": 400}
    assert run.runtime_ns == 10 * 10**9


def test_several_files_and_runs_merge():
    p = profile.load([fx("end_to_end.coz"), fx("throughput.coz"), fx("latency.legacy.coz")])
    assert len(p.runs) == 3 + 1 + 1
    assert [r.path for r in p.runs[:3]] == [fx("end_to_end.coz")] * 3
    assert len(p.experiments) == 3 + 7 + 4
    assert p.samples["/src/a.c:10"] == 400 and p.samples["c.c:5"] == 30
    assert p.runtime_ns == (10 + 9 + 8) * 10**8 + 10 * 10**9 + 3 * 10**9


def test_truncated_last_line_is_a_warning():
    p = profile.load(fx("truncated.coz"))
    assert len(p.runs[0].experiments) == 7
    assert p.runs[0].shutdown is None
    assert len(p.warnings) == 1 and "truncated.coz:14: last line is cut short" in p.warnings[0]


def test_cut_inside_multibyte_character(tmp_path):
    f = tmp_path / "p.coz"
    good = open(fx("throughput.coz"), "rb").read()
    f.write_bytes(good + '{"type":"warning","code":"x","message":"é'.encode()[:-1])
    p = profile.load(str(f))
    assert len(p.runs[0].experiments) == 7
    assert "last line is cut short" in p.warnings[0]


@pytest.mark.parametrize("bad, lineno, reason", [
    ('{"type":"experiment","selected":"a:1"}\n', 2, "missing field 'speedup'"),
    ('[1,2]\n', 2, "not a record: '[1,2]'"),
    ('"text"\n', 2, "not a record: '\"text\"'"),
    ('{"type":"runtime","time_ns":1} trailing\n', 2, "not valid JSON"),
    ('{"type":"experiment","selected":"a:1","speedup":2,"duration_ns":1,"progress":[]}\n', 2,
     "speedup must be a number from 0 to 1"),
    ('experiment\tselected=a:1\tspeedup=x\tduration=1\n', 2, "bad field value"),
    ('hello world\n', 2, "not a record: 'hello world'"),
    ('{"type":"startup","version":1}\n{"broken json\n', 3, "not valid JSON"),  # cut, not last
])
def test_a_malformed_record_is_skipped_with_its_file_and_line(tmp_path, bad, lineno, reason):
    f = tmp_path / "bad.coz"
    f.write_text('{"type":"startup","version":1}\n' + bad + '{"type":"runtime","time_ns":5}\n')
    p = profile.load(str(f))
    assert p.warnings == [f"{f}:{lineno}: malformed record skipped: {reason}"]
    assert p.runs[-1].runtime_ns == 5  # the rest is read


def test_a_damaged_profile_gives_the_analysis_of_the_intact_one():
    # damaged.coz is throughput.coz with a foreign line, a record cut short by a full disk
    # (the next record written on the same line), records and a progress entry of unknown
    # types (README).
    p = profile.load(fx("damaged.coz"))
    path = fx("damaged.coz")
    assert p.warnings == [
        f"{path}:3: malformed record skipped: not a record: 'Segmentation fault (core dumped)'",
        f"{path}:5: malformed record skipped: cut short, and the record written after it on the "
        "same line was read",
        f"{path}:6: 2 records of unknown type 'heartbeat' skipped (written by a newer coz?)",
        f"{path}:7: 1 progress entry of unknown kind 'histogram' skipped (written by a newer coz?)",
    ]
    intact = profile.load(fx("throughput.coz")).runs[0]
    (run,) = p.runs
    assert [(e.selected, e.speedup, [(q.name, q.delta) for q in e.progress]) for e in run.experiments] == \
        [(e.selected, e.speedup, [(q.name, q.delta) for q in e.progress]) for e in intact.experiments]
    assert (run.samples, run.runtime_ns, run.shutdown) == (intact.samples, intact.runtime_ns, intact.shutdown)


def test_unknown_types_give_one_warning_per_type(tmp_path):
    f = tmp_path / "new.coz"
    g = tmp_path / "newer.coz"
    head = open(fx("throughput.coz")).read()
    f.write_text(head + '{"type":"gpu","n":1}\n' * 3 + '{"type":"pmu","n":1}\n')
    g.write_text(head + 'gpu\tn=1\n')
    p = profile.load([str(f), str(g)])
    assert p.warnings == [f"{f}:15: 4 records of unknown type 'gpu' skipped (written by a newer coz?)",
                          f"{f}:18: 1 record of unknown type 'pmu' skipped (written by a newer coz?)"]
    assert len(p.experiments) == 14


def test_many_malformed_lines_are_counted_not_listed(tmp_path):
    f = tmp_path / "noisy.coz"
    f.write_text(open(fx("throughput.coz")).read() + "debug: tick\n" * 40)
    p = profile.load(str(f))
    assert len(p.warnings) == profile.MAX_LINE_WARNINGS + 1
    assert p.warnings[-1] == f"{f}: 35 more malformed records skipped (lines 20 to 54)"
    assert len(p.experiments) == 7


@pytest.mark.parametrize("content", [
    b"# Title\n\nSome text that is not a profile.\n",
    bytes(range(256)) * 4,
    b'{"type":"gpu","n":1}\n{"type":"gpu","n":2}\n',
    b'{"a":1}\n',
    b"hello",  # one line without a newline: not a cut-short profile
    b"\x7fELF\x02\x01\x01\x00 " + bytes(range(1, 256)) * 40,  # a binary's head: its error stays short
])
def test_a_file_that_is_not_a_profile_is_one_error(tmp_path, content):
    f = tmp_path / "README.md"
    f.write_bytes(content)
    with pytest.raises(CozError, match=r"not a profile \(line \d+: ") as ei:
        profile.load(str(f))
    assert str(ei.value).startswith(f"{f}: not a profile")
    assert len(str(ei.value)) < len(str(f)) + 150


def test_a_startup_record_cut_short_still_begins_a_run(tmp_path):
    f = tmp_path / "p.coz"
    lines = open(fx("two_builds.coz")).read().split("\n")
    lines[10] = lines[10][:50]  # the startup of the third run, cut by a full disk
    f.write_text("\n".join(lines))
    p = profile.load(str(f))
    assert [len(r.experiments) for r in p.runs] == [4, 0, 4]
    assert p.runs[2].build == (None, None)
    assert p.warnings == [f"{f}:11: malformed record skipped: not valid JSON"]


def test_point_records_of_a_skipped_legacy_experiment_are_dropped_with_it(tmp_path):
    f = tmp_path / "l.coz"
    text = open(fx("latency.legacy.coz")).read()
    first = text.index("experiment\t", text.index("experiment\t") + 1)
    end = text.index("\n", first)
    f.write_text(text[:first] + "experiment\tselected=c.c:5\tspeedup=oops" + text[end:])
    p = profile.load(str(f))
    intact = profile.load(fx("latency.legacy.coz"))
    assert len(p.experiments) == len(intact.experiments) - 1
    # the first experiment keeps only its own points
    assert len(p.experiments[0].progress) == len(intact.experiments[0].progress)
    assert len(p.warnings) == 1 and "malformed record skipped" in p.warnings[0]


def test_bytes_that_are_not_utf8_are_replaced(tmp_path):
    f = tmp_path / "p.coz"
    good = open(fx("throughput.coz"), "rb").read()
    f.write_bytes(good.replace(b"/src/b.c:20", b"/src/\xe9t\xe9.c:20"))
    p = profile.load(str(f))
    assert "/src/\ufffdt\ufffd.c:20" in p.samples
    assert p.warnings == [f"{f}:6: bytes that are not UTF-8 text were replaced (from this line on)"]


def test_newer_version_is_refused(tmp_path):
    f = tmp_path / "new.coz"
    f.write_text('{"type":"startup","version":99}\n')
    with pytest.raises(CozError, match="version 99 is newer"):
        profile.load(str(f))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CozError, match="no such profile"):
        profile.load(str(tmp_path / "nope.coz"))


def test_random_bytes_never_crash(tmp_path):
    rng = random.Random(1234)
    good = open(fx("throughput.coz"), "rb").read()
    alphabet = b'{}[]":,\t=\n0123456789abcdefghijklmnopqrstuvwxyz-_.\xff\xc3'
    for i in range(300):
        if i % 2:
            data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        else:  # mutate a valid profile in a few places
            data = bytearray(good)
            for _ in range(rng.randint(1, 5)):
                data[rng.randrange(len(data))] = rng.choice(alphabet)
            data = bytes(data)
        f = tmp_path / f"r{i}.coz"
        f.write_bytes(data)
        try:
            p = profile.load(str(f))
        except CozError as e:
            assert str(e).startswith(str(f)), str(e)
        else:
            assert isinstance(p.runs, list)


@pytest.mark.skipif(not glob.glob(os.path.join(UPSTREAM_PROFILES, "*.coz")),
                    reason="upstream coz-profiler sample profiles not installed")
@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(UPSTREAM_PROFILES, "*.coz"))))
def test_upstream_sample_profiles(path):
    p = profile.load(path)
    text = open(path).read()
    assert len(p.runs) == text.count("startup\t")
    assert len(p.experiments) == text.count("experiment\t")
    assert p.warnings == []
    assert all(e.progress for e in p.experiments)


# -- runs of several builds in one profile ------------------------------------------

def test_only_the_latest_build_of_a_file_is_kept():
    # two_builds.coz: /src/app (build aaaa...), then one process (pid 200) that ran /bin/sh
    # and exec'd a rebuilt /src/app (build bbbb...): the shell belongs to the latest build's
    # process, the first run does not.
    p = profile.load(fx("two_builds.coz"))
    assert [r.build for r in p.runs] == [("/src/app", "aaaa1111" * 5), ("/bin/sh", None),
                                         ("/src/app", "bbbb2222" * 5)]
    latest = p.latest_builds()
    assert latest.runs == p.runs[1:] and latest.left_out == p.runs[:1]
    assert latest.build_note == (
        "only the latest build of each profile is analysed; left out runs of other builds: "
        f"{fx('two_builds.coz')}: 1 of 3 runs (/src/app build-id aaaa1111aaaa) "
        "(--all-runs analyses every run)")
    assert p.left_out == [] and p.build_note is None


def _startup(pid, argv0=None, build_id=None):
    rec = {"type": "startup", "version": 1, "pid": pid}
    if argv0 is not None:
        rec["argv0"] = argv0
    if build_id is not None:
        rec["build_id"] = build_id
    return json.dumps(rec) + "\n"


@pytest.mark.parametrize("runs, kept", [
    ([(1, "/a", "x1"), (2, "/a", "x1")], [0, 1]),                # same build, appended
    ([(1, "/a", "x1"), (2, "/a", "x2")], [1]),                   # rebuilt
    ([(1, "/a", None), (2, "/a", "x2")], [0, 1]),                # older profile: argv0 alone
    ([(1, "/a", "x1"), (2, "/b", None)], [1]),                   # another program
    ([(1, "/b", None), (2, "/a", "x1"), (2, "/b", None)], [0, 1, 2]),  # /a exec'd /b, twice
    ([(1, None, None), (2, "/a", "x1")], [0, 1]),                # unknown build: kept
    ([(1, None, None), (2, None, None)], [0, 1]),                # upstream's formats
])
def test_which_runs_make_the_latest_build(tmp_path, runs, kept):
    f = tmp_path / "p.coz"
    f.write_text("".join(_startup(*r) for r in runs))
    p = profile.load(str(f))
    latest = p.latest_builds()
    assert [p.runs.index(r) for r in latest.runs] == kept
    assert (latest.build_note is None) == (len(kept) == len(runs))


def test_files_named_together_are_merged_whatever_their_builds(tmp_path):
    # with --follow-children a child that exec'd another program writes its own file
    parent, child = tmp_path / "p.coz", tmp_path / "p.7.coz"
    parent.write_text(_startup(6, "/bin/make"))
    child.write_text(_startup(7, "/usr/bin/cc1"))
    latest = profile.load([str(parent), str(child)]).latest_builds()
    assert len(latest.runs) == 2 and latest.build_note is None


def test_coz_report_says_in_one_line_that_older_builds_are_left_out(capsys):
    from cozprof import cli

    assert cli.main(["report", fx("two_builds.coz")]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == ["coz: warning: only the latest build of each profile is analysed; "
                                f"left out runs of other builds: {fx('two_builds.coz')}: 1 of 3 runs "
                                "(/src/app build-id aaaa1111aaaa) (--all-runs analyses every run)"]
    assert out.startswith("2 runs, 4 experiments") and "left out runs" not in out
    assert cli.main(["report", fx("two_builds.coz"), "--json", "-"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert len(err.splitlines()) == 1
    assert result["summary"]["runs_left_out"] == 1 and result["warnings"][0] in err
    (line,) = result["lines"]
    assert line["slope"] == pytest.approx(0.0)  # the rebuilt program's flat curve alone
    assert cli.main(["report", fx("two_builds.coz"), "--all-runs", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert err == "" and result["summary"]["runs"] == 3 and result["summary"]["runs_left_out"] == 0
    assert result["lines"][0]["slope"] > 0.1  # the old build's experiments are mixed in


def test_records_of_the_conventional_profile_waits_units_and_locks():
    prof = profile.load([os.path.join(FIXTURES, "records_v1.coz")])
    (run,) = prof.runs
    fn, line = run.experiments
    assert (fn.unit, fn.selected, fn.selected_blocked_ns) == ("function", "work", 3000)
    assert (line.unit, line.selected_blocked_ns) == ("line", 0)
    assert run.unit_samples == {"function": {"work": 20}, "callsite": {"/src/app.c:30": 22}}
    assert run.blocked == {"io": {"/src/app.c:40": 5}, "lock": {"/src/app.c:50": 2}}
    assert run.locations[1].lines == [("inl", "/src/app.h", 3), ("work", "/src/app.c", 12)]
    assert run.locations[2].lines == [("memcpy", None, 0)] and run.locations[2].build_id is None
    assert run.stacks[2].locations == [2, 1] and run.stacks[2].kind == "io" and run.stacks[2].group == "worker"
    assert run.stack_counts == {1: [12, 12000000], 2: [5, 5000000]}  # increments add up
    assert run.threads[0]["wait_ns"]["io"] == 5000000
    assert run.locks["locks"][0]["contended"] == 4
    assert run.counters["context_switches"]["voluntary"] == 3
    assert prof.warnings == []


# -- totals (sampling-only and locks-only runs) --------------------------------

def _totals(seq, pid, final, n, ns=10):
    return {"type": "totals", "seq": seq, "pid": pid, "final": final, "records": [
        {"type": "samples", "counts": {"a.c:1": n}, "out_of_scope": 1},
        {"type": "stack_counts", "counts": [[1, n, n * ns]]},
        {"type": "runtime", "time_ns": n * 1000}]}


def _so_startup(pid):
    return {"type": "startup", "version": 1, "time_ns": 1, "pid": pid, "mode": "sampling-only"}


def _write_records(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def test_totals_of_highest_seq_count_once_for_the_run_of_their_pid(tmp_path):
    # A killed run's checkpoint appended after its final totals (a crash
    # between the two writes), and a second run: each run gets its own, the
    # highest seq only.
    path = tmp_path / "p.coz"
    _write_records(path, [_so_startup(11), _totals(7, 11, True, 70), _totals(6, 11, False, 60),
                  _so_startup(12), _totals(2, 12, False, 20), _totals(1, 11, False, 10)])
    p = profile.load(str(path))
    assert p.warnings == []
    first, second = p.runs
    assert first.samples == {"a.c:1": 70} and first.stack_counts == {1: [70, 700]}
    assert first.runtime_ns == 70000 and first.out_of_scope == 1
    assert first.totals["final"] is True
    assert second.samples == {"a.c:1": 20} and second.totals["final"] is False


def test_the_checkpoint_beside_a_profile_is_read_with_it(tmp_path):
    # A run still going (or killed with its launcher): its profile holds
    # definitions, its checkpoint the totals so far.
    path = tmp_path / "p.coz"
    _write_records(path, [_so_startup(5)])
    _write_records(str(path) + ".checkpoint", [_totals(3, 5, False, 30)])
    run = profile.load(str(path)).runs[0]
    assert run.samples == {"a.c:1": 30} and run.totals["seq"] == 3
    # Once the final totals are in the profile, a checkpoint left by an
    # interrupted removal changes nothing.
    with open(path, "a") as f:
        f.write(json.dumps(_totals(4, 5, True, 40)) + "\n")
    run = profile.load(str(path)).runs[0]
    assert run.samples == {"a.c:1": 40}


def test_totals_of_another_process_or_malformed_are_skipped_with_a_warning(tmp_path):
    path = tmp_path / "p.coz"
    bad = _totals(2, 5, True, 1)
    bad["records"].append({"type": "experiment"})
    _write_records(path, [_so_startup(5), _totals(1, 99, True, 10), bad])
    p = profile.load(str(path))
    assert p.runs[0].samples == {}
    assert any("process 99" in w for w in p.warnings), p.warnings
    assert any("samples, stack_counts, locks and runtime records only" in w for w in p.warnings), p.warnings
    _write_records(str(path) + ".checkpoint", ["not json"])
    assert any("checkpoint skipped" in w for w in profile.load(str(path)).warnings)


def test_a_file_named_twice_is_read_once(tmp_path):
    twice = profile.load([fx("throughput.coz"), fx("throughput.coz")])
    once = profile.load(fx("throughput.coz"))
    assert len(twice.runs) == len(once.runs) and len(twice.experiments) == len(once.experiments)
    assert twice.paths == [fx("throughput.coz")]
    assert twice.warnings[0] == f"{fx('throughput.coz')} is {fx('throughput.coz')}, named before: read once"
    link = tmp_path / "again.coz"
    os.symlink(fx("throughput.coz"), link)
    other = profile.load([fx("throughput.coz"), str(link)])
    assert len(other.experiments) == len(once.experiments)
    assert other.warnings[0].startswith(f"{link} is {fx('throughput.coz')}")


def test_a_device_is_refused_not_read_without_end():
    # /dev/zero was read until memory ran out (7 GB within seconds).
    with pytest.raises(CozError, match=r"/dev/zero is a device, not a profile"):
        profile.load("/dev/zero")
