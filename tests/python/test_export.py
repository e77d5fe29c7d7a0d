"""coz export: pprof's protobuf, folded stacks and speedscope JSON, each read
back by a decoder of its own here and by the real tool (pprof built from its Go
module, inferno's flamegraph, speedscope's schema) — see docs/conventional.md."""

import gzip
import json
import os
import re
import subprocess

import pytest

import exttools
from conftest import FIXTURES
from cozprof import cli, conventional as conv, export, profile
from stackgen import ProfileWriter, random_profile

V1 = os.path.join(FIXTURES, "records_v1.coz")


def load(path):
    return profile.load([str(path)])


# -- a protobuf reader of its own (wire format only) ---------------------------------------

def _varint(data, i):
    v = shift = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def fields(data):
    """{field number: [int or bytes, ...]} of one message."""
    out = {}
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(data, i)
        elif wt == 2:
            n, i = _varint(data, i)
            v = bytes(data[i:i + n])
            i += n
        else:
            raise AssertionError(f"unexpected wire type {wt}")
        out.setdefault(num, []).append(v)
    return out


def packed(b):
    vals, i = [], 0
    while i < len(b):
        v, i = _varint(b, i)
        vals.append(v)
    return vals


def decode_pprof(raw):
    p = fields(gzip.decompress(raw))
    strings = [s.decode() for s in p[6]]
    st = lambda m, f: strings[m.get(f, [0])[0]]   # noqa: E731
    functions = {}
    for b in p[5]:
        m = fields(b)
        functions[m[1][0]] = (st(m, 2), st(m, 4))
    locations = {}
    for b in p[4]:
        m = fields(b)
        lines = []
        for lb in m.get(4, []):
            ln = fields(lb)
            lines.append((functions[ln[1][0]], ln.get(2, [0])[0]))
        locations[m[1][0]] = {"mapping": m.get(2, [0])[0], "address": m.get(3, [0])[0], "lines": lines}
    mappings = {}
    for b in p[3]:
        m = fields(b)
        mappings[m[1][0]] = {"start": m.get(2, [0])[0], "limit": m.get(3, [0])[0],
                             "file": st(m, 5), "build_id": st(m, 6),
                             "flags": [m.get(k, [0])[0] for k in (7, 8, 9, 10)]}
    samples = []
    for b in p[2]:
        m = fields(b)
        labels = {}
        for lb in m.get(3, []):
            lab = fields(lb)
            labels[strings[lab[1][0]]] = strings[lab[2][0]] if 2 in lab else lab[3][0]
        locs = [x for chunk in m.get(1, []) for x in packed(chunk)]
        vals = [x for chunk in m[2] for x in packed(chunk)]
        samples.append({"locations": locs, "values": vals, "labels": labels})
    types = [(st(fields(b), 1), st(fields(b), 2)) for b in p[1]]
    return {"strings": strings, "types": types, "functions": functions, "locations": locations,
            "mappings": mappings, "samples": samples, "period": p.get(12, [0])[0],
            "default_type": strings[p[14][0]], "period_type": (st(fields(p[11][0]), 1), st(fields(p[11][0]), 2))}


def test_pprof_message_of_records_v1():
    d = decode_pprof(export.pprof_bytes(load(V1), conv.parse_kinds("all")))
    assert d["strings"][0] == ""
    assert d["types"] == [("samples", "count"), ("wall", "nanoseconds")]
    assert d["default_type"] == "wall" and d["period_type"] == ("cpu", "nanoseconds")
    assert d["period"] == 1_000_000
    by_kind = {s["labels"]["kind"]: s for s in d["samples"]}
    cpu, io = by_kind["cpu"], by_kind["io"]
    assert cpu["values"] == [12, 12_000_000] and io["values"] == [5, 5_000_000]
    assert cpu["labels"] == {"thread": "app", "group": "main", "kind": "cpu", "tid": 7, "pid": 7}
    assert io["labels"]["tid"] == 8 and io["labels"]["group"] == "worker"
    # Leaf first; the inlined function first in its location's lines.
    leaf = d["locations"][io["locations"][0]]
    assert leaf["lines"] == [(("memcpy", ""), 0)]
    caller = d["locations"][io["locations"][1]]
    assert caller["lines"] == [(("inl", "/src/app.h"), 3), (("work", "/src/app.c"), 12)]
    assert caller["address"] == 4198400
    m = d["mappings"][caller["mapping"]]
    assert (m["file"], m["build_id"]) == ("/bin/app", "ab12")
    assert m["start"] <= caller["address"] < m["limit"]
    assert m["flags"] == [1, 1, 1, 1]
    assert d["mappings"][leaf["mapping"]]["flags"] == [1, 0, 0, 0]
    # The program's mapping comes first, whatever was met first: pprof takes
    # mapping[0] for the main binary ("File:", "Build ID:").
    # (The I/O sample alone: its first frame is libc's memcpy.)
    for kinds in ("all", "io"):
        d2 = decode_pprof(export.pprof_bytes(load(V1), conv.parse_kinds(kinds)))
        assert [m["file"] for m in d2["mappings"].values()][0] == "/bin/app", d2["mappings"]
    d = decode_pprof(export.pprof_bytes(load(V1)))
    assert d["types"] == [("samples", "count"), ("cpu", "nanoseconds")]
    assert [s["values"] for s in d["samples"]] == [[12, 12_000_000]]
    assert export.pprof_bytes(load(V1)) == export.pprof_bytes(load(V1))   # reproducible


def test_pprof_sums_match_the_aggregation(tmp_path):
    w, added = random_profile(11)
    prof = load(w.write(tmp_path / "p.coz"))
    kinds = conv.parse_kinds("all")
    d = decode_pprof(export.pprof_bytes(prof, kinds))
    assert sum(s["values"][0] for s in d["samples"]) == sum(n for _, n, _, _, _ in added)
    assert sum(s["values"][1] for s in d["samples"]) == sum(ns for _, _, ns, _, _ in added)
    # Flat per function from the decoded samples = the aggregation's flat.
    flat = {}
    for s in d["samples"]:
        name = d["locations"][s["locations"][0]]["lines"][0][0][0]
        flat[name] = flat.get(name, 0) + s["values"][0]
    t = conv.aggregate(prof, "function", kinds)
    assert flat == {r.name: r.flat for r in t.rows.values() if r.flat}


# -- folded stacks ---------------------------------------------------------------------------

FOLDED_LINE = re.compile(r"^[^;\n]+(;[^;\n]+)* [0-9]+$")


def test_folded_of_records_v1(capsys):
    assert cli.main(["export", V1, "--folded", "-", "--kind", "all"]) == 0
    out = capsys.readouterr().out
    assert out == "work;inl 12\nwork;inl;memcpy 5\n"
    assert cli.main(["export", V1, "--folded", "-", "--kind", "all", "--folded-prefix",
                     "thread,kind", "--value", "time"]) == 0
    assert capsys.readouterr().out == ("thread:app/7;kind:cpu;work;inl 12000000\n"
                                       "thread:app/8;kind:io;work;inl;memcpy 5000000\n")


def test_folded_merges_threads_and_keeps_the_format(tmp_path):
    w = ProfileWriter()
    w.add(["main", "work"], 3, tid=7)
    w.add(["main", "work"], 4, tid=8, thread="w", group="worker")
    w.add(["main", "odd;name"], 2)
    prof = load(w.write(tmp_path / "p.coz"))
    text = export.folded_text(prof)
    assert text == "main;odd:name 2\nmain;work 7\n"
    w, added = random_profile(13)
    text = export.folded_text(load(w.write(tmp_path / "q.coz")), conv.parse_kinds("all"),
                              prefixes=["kind", "group", "thread"])
    lines = text.splitlines()
    assert all(FOLDED_LINE.match(ln) for ln in lines)
    assert len(set(ln.rsplit(" ", 1)[0] for ln in lines)) == len(lines)
    assert sum(int(ln.rsplit(" ", 1)[1]) for ln in lines) == sum(n for _, n, _, _, _ in added)


# -- speedscope ---------------------------------------------------------------------------------

def test_speedscope_of_records_v1():
    d = export.speedscope(load(V1), conv.parse_kinds("all"))
    names = [f["name"] for f in d["shared"]["frames"]]
    p7, p8 = d["profiles"]
    assert p7["name"] == "app (tid 7, group main)" and p8["name"] == "app (tid 8, group worker)"
    assert p7["unit"] == "nanoseconds" and p7["endValue"] == 12_000_000
    assert [[names[i] for i in s] for s in p8["samples"]] == [["work", "inl", "memcpy", "[wait: io]"]]
    assert p8["weights"] == [5_000_000]
    assert d["activeProfileIndex"] == 0
    d = export.speedscope(load(V1), value="samples")
    assert [p["weights"] for p in d["profiles"]] == [[12]] and d["profiles"][0]["unit"] == "none"


def test_speedscope_validates_against_the_shipped_schema(tmp_path):
    validator = exttools.schema_validator()
    w, added = random_profile(17)
    path = w.write(tmp_path / "p.coz")
    out = tmp_path / "p.speedscope.json"
    assert cli.main(["export", str(path), "--speedscope", str(out), "--kind", "all"]) == 0
    data = json.loads(out.read_text())
    errors = list(validator.iter_errors(data))
    assert errors == []
    assert sum(sum(p["weights"]) for p in data["profiles"]) == sum(ns for _, _, ns, _, _ in added)
    assert {p["name"].split(" ")[0] for p in data["profiles"]} == {"t7", "t8", "t9"}
    # The validator does catch a broken file (a weight that is not a number).
    data["profiles"][0]["weights"][0] = "12"
    assert list(validator.iter_errors(data))


# -- the command --------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["export", V1], "nothing to export"),
    (["export", V1, "--pprof", "a.out", "--speedscope", "a.out"], "two exports name the same file"),
    (["export", V1, "--pprof", V1], "looks like a profile"),
    (["export", V1, "--speedscope", "-"], "only --folded can write to standard output"),
    (["export", V1, "--folded", "-", "--folded-prefix", "cpu"], "unknown --folded-prefix 'cpu'"),
    (["export", os.path.join(FIXTURES, "throughput.coz"), "--folded", "-"], "has no stacks"),
    # An export with nothing in it was written and called written (empty files).
    (["export", V1, "--kind", "lock,sleep", "--folded", "-"], "no samples of the kinds asked (lock,sleep)"),
    # Options of one format given without it were ignored.
    (["export", V1, "--pprof", "a.pb.gz", "--folded-prefix", "kind"], "--folded-prefix applies to --folded"),
    (["export", V1, "--pprof", "a.pb.gz", "--value", "time"], "--value applies to --folded and --speedscope"),
])
def test_export_errors(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("coz: error: ") and message in err[0]
    assert len(err) == 2 and err[1].startswith("coz: ")


def test_folded_prefix_and_value_are_taken_beside_pprof(tmp_path, capsys):
    pb, folded = tmp_path / "p.pb.gz", tmp_path / "p.folded"
    assert cli.main(["export", V1, "--pprof", str(pb), "--folded", str(folded), "--value", "time",
                     "--folded-prefix", "kind"]) == 0
    assert folded.read_text() == "kind:cpu;work;inl 12000000\n"


def test_export_writes_every_format_at_once(tmp_path, capsys):
    outs = [tmp_path / "p.pb.gz", tmp_path / "p.folded", tmp_path / "p.json"]
    assert cli.main(["export", V1, "--pprof", str(outs[0]), "--folded", str(outs[1]),
                     "--speedscope", str(outs[2])]) == 0
    assert capsys.readouterr().err.splitlines() == [f"coz: wrote {o}" for o in outs]
    assert outs[1].read_text() == "work;inl 12\n"
    assert gzip.decompress(outs[0].read_bytes())
    assert json.loads(outs[2].read_text())["profiles"][0]["weights"] == [12_000_000]


# -- the real tools ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pprof():
    return exttools.tool("pprof", "go")


@pytest.fixture(scope="module")
def inferno():
    return exttools.tool("inferno-flamegraph", "cargo")


def _pprof_top(pprof, path, *extra):
    out = subprocess.run([pprof, "-top", "-nodecount=1000", *extra, str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {}
    for ln in out.stdout.splitlines():
        parts = ln.split()
        if len(parts) >= 6 and parts[1].endswith("%") and parts[4].endswith("%"):
            rows[" ".join(parts[5:])] = (parts[0], parts[3])
    return out.stdout, rows


def test_pprof_top_reads_the_export(tmp_path, pprof):
    w = ProfileWriter()
    w.add(["main", "work", "hot"], 60)
    w.add(["main", "work"], 30)
    w.add(["main", [("inl", "/s/w.h", 3), ("cold", "/s/w.c", 9)]], 10)
    w.add(["main", "read"], 40, kind="io")
    path = w.write(tmp_path / "p.coz")
    pb = tmp_path / "p.pb.gz"
    assert cli.main(["export", str(path), "--pprof", str(pb)]) == 0
    text, rows = _pprof_top(pprof, pb, "-sample_index=samples")
    assert "Type: samples" in text
    assert rows == {"hot": ("60", "60"), "work": ("30", "90"), "inl (inline)": ("10", "10"),
                    "cold": ("0", "10"), "main": ("0", "100")}
    text, rows = _pprof_top(pprof, pb)
    assert "Type: cpu" in text and "Showing nodes accounting for 100ms, 100% of 100ms total" in text
    assert rows["hot"] == ("60ms", "60ms") and rows["main"] == ("0", "100ms")
    # Off-CPU time: wall time, filtered by the kind label.
    assert cli.main(["export", str(path), "--pprof", str(pb), "--kind", "all"]) == 0
    text, rows = _pprof_top(pprof, pb)
    assert "Type: wall" in text and rows["main"] == ("0", "140ms") and rows["read"] == ("40ms", "40ms")
    text, rows = _pprof_top(pprof, pb, "-tagfocus=kind=io")
    assert rows == {"read": ("40ms", "40ms"), "main": ("0", "40ms")}


def test_pprof_raw_and_random_profile(tmp_path, pprof):
    w, added = random_profile(21)
    path = w.write(tmp_path / "p.coz")
    pb = tmp_path / "p.pb.gz"
    kinds = conv.parse_kinds("all")
    assert cli.main(["export", str(path), "--pprof", str(pb), "--kind", "all"]) == 0
    out = subprocess.run([pprof, "-raw", str(pb)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    raw = out.stdout
    assert "samples/count wall/nanoseconds[dflt]" in raw
    values = [tuple(int(x) for x in m.groups())
              for m in re.finditer(r"^\s+(\d+)\s+(\d+):(?: \d+)+ $", raw, re.M)]
    assert sum(v[0] for v in values) == sum(n for _, n, _, _, _ in added)
    assert sum(v[1] for v in values) == sum(ns for _, _, ns, _, _ in added)
    assert "thread:[t8]" in raw and "tid:[8]" in raw and "kind:[io]" in raw and "group:[worker]" in raw
    # pprof's flat and cum per function are ours.
    _, rows = _pprof_top(pprof, pb, "-sample_index=samples")
    t = conv.aggregate(load(path), "function", kinds)
    mine = {}
    for r in t.rows.values():
        mine[r.name] = (str(r.flat), str(r.cum))
    # pprof marks functions met inlined with " (inline)", or " (partial-inline)"
    # when they also ran as functions of their own.
    theirs = {re.sub(r" \((partial-)?inline\)$", "", k): v for k, v in rows.items()}
    assert theirs == mine


def test_pprof_list_shows_lines(tmp_path, pprof):
    src = tmp_path / "w.c"
    src.write_text("".join(f"int line{i};\n" for i in range(1, 31)))
    w = ProfileWriter()
    w.add([("main", "/s/m.c", 3), ("work", str(src), 21)], 3)
    w.add([("main", "/s/m.c", 3), ("work", str(src), 22)], 1)
    path = w.write(tmp_path / "p.coz")
    pb = tmp_path / "p.pb.gz"
    assert cli.main(["export", str(path), "--pprof", str(pb)]) == 0
    out = subprocess.run([pprof, "-list", "work", "-sample_index=samples", str(pb)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"ROUTINE ======================== work in {src}" in out.stdout
    assert re.search(r"^\s+3\s+3\s+21:int line21;$", out.stdout, re.M), out.stdout
    assert re.search(r"^\s+1\s+1\s+22:int line22;$", out.stdout, re.M), out.stdout


def test_inferno_draws_the_folded_stacks(tmp_path, inferno):
    w = ProfileWriter()
    w.add(["main", "work", "hot"], 60)
    w.add(["main", "work"], 30)
    w.add(["main", "cold"], 10)
    path = w.write(tmp_path / "p.coz")
    folded = tmp_path / "p.folded"
    assert cli.main(["export", str(path), "--folded", str(folded)]) == 0
    out = subprocess.run([inferno, str(folded)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == ""     # inferno warns about every line it cannot read
    titles = re.findall(r"<title>([^<]*)</title>", out.stdout)
    for want in ("main (100 samples, 100.00%)", "work (90 samples, 90.00%)",
                 "hot (60 samples, 60.00%)", "cold (10 samples, 10.00%)"):
        assert want in titles
    # ... and does warn on a line out of the format (the check above can fail).
    bad = tmp_path / "bad.folded"
    bad.write_text(folded.read_text() + "main;broken\n")
    out = subprocess.run([inferno, str(bad)], capture_output=True, text=True, timeout=120)
    assert "Ignored 1 line" in out.stderr
