"""The one parser: both formats, merging, truncation, and robustness."""

import glob
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


@pytest.mark.parametrize("bad, lineno", [
    ('{"type":"experiment","selected":"a:1"}\n', 2),           # missing fields
    ('{"type":"bogus"}\n', 2),                                   # unknown record
    ('[1,2]\n', 2),                                              # not an object
    ('{"type":"experiment","selected":"a:1","speedup":2,"duration_ns":1,"progress":[]}\n', 2),
    ('experiment\tselected=a:1\tspeedup=x\tduration=1\n', 2),
    ('hello world\n', 2),
    ('{"type":"startup","version":1}\n{"broken json\n', 3),      # cut, but not the last line
])
def test_malformed_line_names_file_and_line(tmp_path, bad, lineno):
    f = tmp_path / "bad.coz"
    f.write_text('{"type":"startup","version":1}\n' + bad + '{"type":"runtime","time_ns":5}\n')
    with pytest.raises(CozError) as ei:
        profile.load(str(f))
    assert f"bad.coz:{lineno}: malformed record" in str(ei.value)


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
