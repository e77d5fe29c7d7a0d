"""coz locks on real programs: SyncPerf's known-answer programs of
benchmarks/ (locks_*.c) run under `coz run --locks-only`, and the report must
put each in its category.

Sizes are the programs' --short ones or a little more (each run well under a
second plainly). The contended programs run four threads: whether they run
side by side or take turns on a busy machine's CPUs, they wait for the lock
(by rate or by time, docs/locks.md section 4), so the answer does not depend
on the machine's load. The causal join is checked on a causal run of the Q1
program with --fixed-line on its critical section.
"""

import os
import sys

import pytest

from conftest import REPO, coz_run

sys.path.insert(0, os.path.join(REPO, "python"))
from cozprof import locks, locks_report, profile  # noqa: E402

BENCH = os.path.join(REPO, "benchmarks")


@pytest.fixture(scope="module")
def bench(build):
    def _bench(name):
        return build(name, flags=("-g", "-O2", "-I", BENCH),
                     sources=[os.path.join(BENCH, name + ".c")])
    return _bench


def key_line(name, key):
    src = os.path.join(BENCH, name + ".c")
    with open(src) as f:
        for n, text in enumerate(f, 1):
            if f"/* KEY:{key} */" in text:
                return f"{src}:{n}"
    raise AssertionError(f"no KEY:{key} in {src}")


def locks_only(libcoz, tmp_path, exe, *args, name="p.coz", mode="--locks-only"):
    out = tmp_path / name
    r = coz_run([mode, "-o", str(out)], [exe, *args], cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    return str(out)


def work(tmp_path, exe, *args):
    """The `work` of the program's own result line, from a profiled run."""
    import json
    out = tmp_path / "w.coz"
    r = coz_run(["--locks-only", "-o", str(out)], [exe, *args], cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    line = [ln for ln in r.stdout.decode().splitlines() if ln.startswith('{"bench"')][-1]
    return json.loads(line)["work"], str(out)


def report(*paths):
    return locks_report.build_report(list(paths), locks.thresholds())


def the_lock(result, name, key):
    """The family whose busiest acquisition site is `key`'s critical section
    of benchmarks/<name>.c (the site is the lock call, a line or two above)."""
    src = os.path.join(BENCH, name + ".c")
    line = int(key_line(name, key).rpartition(":")[2])
    for e in result["locks"]:
        site = e["sites"][0]["site"] if e["sites"] else ""
        path, _, n = site.rpartition(":")
        if path == src and line - 4 <= int(n) <= line:
            return e
    raise AssertionError(f"no lock acquired just above {name}.c:{line}: "
                         f"{[(e['key'], [s['site'] for s in e['sites']]) for e in result['locks']]}")


def finding(result, lock):
    return [f for f in result["findings"] if f["lock"] == lock["key"]]


def test_locks_only_run_writes_counters_and_no_experiment(libcoz, tmp_path, bench):
    path = locks_only(libcoz, tmp_path, bench("locks_oversync"), "--short")
    prof = profile.load([path])
    (run,) = prof.runs
    assert run.mode == "locks-only" and run.experiments == []
    assert run.locks is not None and run.locks["elapsed_ns"] > 0
    assert {t["group"] for t in run.threads} >= {"main", "worker"}


def test_global_lock_is_improper_granularity(libcoz, tmp_path, bench):
    r = report(locks_only(libcoz, tmp_path, bench("locks_granularity"), "threads=4", "--short"))
    e = the_lock(r, "locks_granularity", "TABLE")
    assert e["objects"] == 1 and e["threads"] == 4
    assert e["figures"]["frequency"] >= locks.FREQUENCY
    # Thousands of steps per critical section: never "a few instructions".
    assert e["figures"]["mean_hold_ns"] >= locks.SHORT_HOLD_NS
    # Four threads for one lock held half of the time: whether they ran side by
    # side or took turns on a busy CPU, they wait for it (by rate or by time).
    assert locks.contended_by(e["figures"], r["thresholds"]) is not None, e["figures"]
    (f,) = finding(r, e)
    assert (f["category"], f["quadrant"], f["rank"]) == ("improper-granularity", "Q2", 1)


def test_per_thread_locks_are_over_synchronization(libcoz, tmp_path, bench):
    r = report(locks_only(libcoz, tmp_path, bench("locks_oversync"), "--short"))
    e = the_lock(r, "locks_oversync", "LOCAL")
    assert e["objects"] == 2 and e["single_thread"] and e["figures"]["contended"] == 0
    (f,) = finding(r, e)
    assert (f["category"], f["quadrant"], f["basis"]) == ("over-synchronization", "Q4", "single-thread")


def test_skewed_bucket_locks_are_asymmetric(libcoz, tmp_path, bench):
    # 250,000 operations a thread (about 0.2 s quietly), not --short's 50,000:
    # in a 40 ms run beside a busy loop the four threads could take turns in
    # whole time slices, and one run's hot lock saw 203 waits in 200,000
    # acquisitions and no waiting to speak of, so the rules rightly read Q4.
    # At this size, 6 of 6 runs beside one busy loop read asymmetric, and 8 of
    # 8 beside two had the threads waiting 44% to 60% of their time for it.
    r = report(locks_only(libcoz, tmp_path, bench("locks_asymmetric"), "threads=4", "ops=250000"))
    e = the_lock(r, "locks_asymmetric", "BUCKET")
    assert e["objects"] == 16
    # The clamped hash sends 241/256 of the keys to one bucket: the busiest.
    top = max(e["top_members"], key=lambda m: m["acquisitions"])
    assert top["acquisitions"] > 0.8 * e["figures"]["acquisitions"]
    (f,) = finding(r, e)
    assert (f["category"], f["quadrant"]) == ("asymmetric-contention", "Q2"), (e["figures"], e["top_members"])
    assert e["asymmetry"]["hottest"]["id"] == top["id"] and e["asymmetry"]["hot_objects"] == 1


def test_cell_locks_around_two_instructions_are_improper_primitive(libcoz, tmp_path, bench):
    additions, path = work(tmp_path, bench("locks_primitive"), "--short")
    r = report(path)
    e = the_lock(r, "locks_primitive", "ADD")
    # 4096 cell locks, one family: every addition is one of its acquisitions,
    # also those the runtime counted per site once its table was full; from
    # then on counted one in 64 at random, each for 64 (docs/locks.md
    # section 1): an estimate within its standard error.
    sd = e["figures"]["acquisitions_sd"]
    assert sd > 0 and abs(e["figures"]["acquisitions"] - additions) <= 5 * sd, (e["figures"], additions)
    assert e["objects"] > 1 and not e["single_thread"]
    site = e["sites"][0]["site"]
    assert [x["key"] for x in r["locks"] if any(s["site"] == site for s in x["sites"])] == [e["key"]]
    assert e["figures"]["contention"] < locks.CONTENTION
    # The sections as the report judges them: a hold timed across a
    # preemption of its holder on a busy machine, counting 64 times, once
    # read 1152 ns here (docs/locks.md section 4).
    assert e["figures"]["mean_hold_trimmed_ns"] < locks.SHORT_HOLD_NS
    (f,) = finding(r, e)
    assert (f["category"], f["quadrant"]) == ("improper-primitive", "Q4")
    assert "atomic" in f["suggestion"]


def test_rare_lock_around_long_work_is_q1_and_joined_to_the_causal_profile(libcoz, tmp_path, bench):
    exe = bench("locks_rare")
    # Long enough critical sections on any CPU (millions of steps), few rounds.
    args = ["rounds=12", "inside=2000000", "outside=700000"]
    path = locks_only(libcoz, tmp_path, exe, *args)
    derive = key_line("locks_rare", "DERIVE")
    causal = tmp_path / "causal.coz"
    # About 0.6 s for 120 rounds on the 2-CPU test machine: 10 experiments of
    # 50 ms, half of them at 0% on average, so that 1 run in about 20 had
    # fewer than 3 distinct speedups and no curve for the line (8 of 10 at 0%
    # once under `under-load`). 480 rounds: about 40 experiments.
    c = coz_run(["-o", str(causal), "--fixed-line", derive, "--experiment-length", "50ms"],
                [exe, "rounds=480", "inside=2000000", "outside=700000"], cwd=tmp_path, timeout=300)
    assert c.returncode == 0, c.stderr.decode()
    r = report(path, str(causal))
    assert r["run"]["mode"] == "locks-only"        # counters of the run without delays
    e = the_lock(r, "locks_rare", "DERIVE")
    assert e["figures"]["frequency"] < locks.FREQUENCY
    assert e["figures"]["contention"] >= locks.CONTENTION
    assert e["figures"]["mean_hold_ns"] >= locks.LONG_HOLD_NS
    (f,) = finding(r, e)
    assert (f["category"], f["quadrant"]) == ("improper-granularity", "Q1")
    # The critical section read from the source runs from the lock call to the
    # unlock, and the line the causal run measured is in it.
    (cs,) = e["critical_sections"]
    assert cs["method"] == "source" and derive in cs["lines"]
    assert cs["release"] == f"{derive.rpartition(':')[0]}:{int(derive.rpartition(':')[2]) + 1}"
    assert [j["role"] for j in cs["causal"] if j["line"] == derive] == ["inside"]
    assert f["best_causal"]["line"] == derive


def test_pipeline_with_equal_pools_is_load_imbalance(libcoz, tmp_path, bench):
    # Stage costs 2, 6 and 8 ms per item (durations, whatever the CPU; long
    # beside a busy machine's sleep overshoot), two threads each. The thread
    # records and stacks are all it needs: a sampling-only run has both.
    r = report(locks_only(libcoz, tmp_path, bench("locks_imbalance"), "items=100", "w1=2000",
                          "w2=6000", "w3=8000", mode="--sampling-only"))
    imb = r["load_imbalance"]
    assert imb["compared"] == ["stage1", "stage2", "stage3"]
    shares = {g["group"]: g["waiting_share"] for g in imb["groups"]}
    # Stage 3 never waits for the others; both others wait for it.
    assert shares["stage3"] < min(shares["stage1"], shares["stage2"]), imb["groups"]
    assert imb["imbalanced"] and imb["slowest"] == "stage3"
    # SyncPerf's suggestion: 6 threads in proportion 2:6:8 = 0.75, 2.25, 3.
    assert [s["suggested"] for s in imb["suggested"]] == [1, 2, 3], imb["suggested"]
    assert any(f["category"] == "load-imbalance" for f in r["findings"])
    # Stage 3's own work is mostly its device wait: the hottest line, not a shared helper's.
    assert imb["hottest_line"] == key_line("locks_imbalance", "DEVICE3")


def test_benchmark_script_applies_and_times_the_suggestion(libcoz, tmp_path):
    """benchmarks/locks.py --short on the pipeline: it profiles, reads the
    suggestion, times every assignment. Timings are printed, not asserted."""
    import json
    import subprocess

    env = dict(os.environ, COZ_LIBRARY=libcoz)
    p = subprocess.run([sys.executable, os.path.join(BENCH, "locks.py"), "--short", "--reps", "1",
                        "--no-causal", "--only", "locks_imbalance",
                        "--build", os.path.dirname(os.path.dirname(libcoz))],
                       capture_output=True, text=True, env=env, timeout=300)
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    (row,) = summary["rows"]
    assert row["classified"] and row["category"] == "load-imbalance", p.stdout + p.stderr
    assert row["suggested"] == [1, 2, 3]
    assert len(row["trial"]) == 10 and "2-2-2" in row["trial"] and row["fix"] == "t1=1 t2=2 t3=3"
    assert all(e.startswith("locks_imbalance: suggestion") for e in row["errors"]), row["errors"]
    assert "locks_imbalance: every assignment of 6 threads" in p.stdout
