"""Smoke test of benchmarks/: every program runs in --short mode and prints its
result line; accuracy.py and overhead.py run in --short mode and their last
line is a JSON summary they can parse themselves.

No timing is asserted. The benchmarks are taken from $COZ_BUILD_DIR (or the
usual build directories) when built there, else built standalone in a
temporary directory with `cmake -S benchmarks`.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")
sys.path.insert(0, BENCH)
import benchlib  # noqa: E402

# program -> work units done in --short mode (the "work" field of its result)
SHORT_WORK = {"two_threads": 15, "serial_chain": 50, "prodcons": 400, "pipeline": 300,
              "spin_barrier": 100, "hash_table": 200000, "latency": 150, "io_sleep": 150}
UPSTREAM = os.path.exists(benchlib.UPSTREAM_COZ)


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
    if not shutil.which("cmake"):
        pytest.skip("cmake is not installed and no built benchmarks were found")
    d = str(tmp_path_factory.mktemp("bench-build"))
    subprocess.run(["cmake", "-S", BENCH, "-B", d], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", d, "-j2"], check=True, stdout=subprocess.DEVNULL)
    return d


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


def _summary(stdout, kind):
    last = stdout.strip().splitlines()[-1]
    summary = json.loads(last)
    assert summary["summary"] == kind
    return summary


def _who_args():
    return [] if UPSTREAM else ["--ours-only"]


def test_accuracy_short(build_dir):
    if not UPSTREAM:
        print(f"upstream part skipped: {benchlib.UPSTREAM_COZ} is absent")
    cmd = [sys.executable, os.path.join(BENCH, "accuracy.py"), "--short", "--build", build_dir,
           "--only", "two_threads.A", "--only", "latency.PARSE", "--only", "spin_barrier.SPIN",
           *_who_args()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    s = _summary(p.stdout, "accuracy")
    assert s["errors"] == []
    assert {r["case"] for r in s["rows"]} == {"two_threads.A", "latency.PARSE", "spin_barrier.SPIN"}
    for r in s["rows"]:
        assert r["real"] is not None
    if benchlib.find_libcoz([build_dir]) is None:
        assert "libcoz.so" in s["skipped"]["ours"]
    if UPSTREAM:
        assert s["upstream"] is not None and "upstream" not in s["skipped"]


def test_overhead_short(build_dir, tmp_path):
    if not UPSTREAM:
        print(f"upstream part skipped: {benchlib.UPSTREAM_COZ} is absent")
    cmd = [sys.executable, os.path.join(BENCH, "overhead.py"), "--short", "--build", build_dir,
           "--only", "serial_chain", "--only", "latency", "--startup-lines", "5000",
           "--cache", str(tmp_path), *_who_args()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    s = _summary(p.stdout, "overhead")
    assert s["errors"] == []
    assert [r["program"] for r in s["programs"]] == ["serial_chain", "latency"]
    for r in s["programs"]:
        assert r["wall_s"]["plain"] > 0
        if UPSTREAM:
            assert r["wall_s"]["upstream_causal"] > 0
    assert s["startup"]["source_lines"] >= 5000
    assert s["startup"]["time_to_main_s"]["plain"] >= 0
