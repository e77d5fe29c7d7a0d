"""benchmarks/figures.py: the Markdown of docs/benchmarks.md's generated figures
from a run_all.sh OUTDIR (here a synthetic one whose answers are known)."""

import json
import os
import subprocess
import sys

from conftest import REPO

FIGURES = os.path.join(REPO, "benchmarks", "figures.py")


def row(case, group, x, real, ours, before, upstream, expect="match", blind=None):
    def err(p):
        return None if p is None else abs(p - real) * 100
    return {"case": case, "group": group, "speedup": x, "real": real, "expect": expect,
            "upstream_blind": blind, "ours": ours, "before": before, "upstream": upstream,
            "err_ours_pp": err(ours), "err_before_pp": err(before), "err_upstream_pp": err(upstream)}


def figure(points):
    return {"vs_real": {"mean_abs_error_pp": sum(points) / len(points), "max_abs_error_pp": max(points),
                        "points": len(points)}}


def run(outdir):
    return subprocess.run([sys.executable, FIGURES, str(outdir)], capture_output=True, text=True)


def test_tables_give_each_profilers_mean_error_per_case_and_group(tmp_path):
    rows = [row("a.X", "cpu", 0.25, 0.20, 0.22, 0.30, 0.10),   # ours 2, before 10, upstream 10
            row("a.X", "cpu", 0.50, 0.40, 0.44, 0.40, 0.20),   # ours 4, before 0, upstream 20
            row("b.W", "offcpu", 0.50, 0.30, 0.31, None, None, blind="blind: no off-CPU samples"),
            row("c.S", "cpu", 0.50, 0.00, -0.2, None, None, expect="contention")]
    summary = {"summary": "accuracy", "rows": rows,
               "ours": figure([2, 4, 1]), "upstream": figure([10, 20]),
               "groups_ours": {"cpu": figure([2, 4]), "offcpu": figure([1])},
               "groups_upstream": {"cpu": figure([10, 20])},
               "also": {"before": {"overall": figure([10, 0]), "groups": {"cpu": figure([10, 0])},
                                   "contention": None, "libcoz": "/x/libcoz.so"}}}
    (tmp_path / "header.txt").write_text("date: 2026-11-26 02:00 UTC\ncommit: abc1234\n")
    (tmp_path / "accuracy.log").write_text("case line\na.X 12 25\n" + json.dumps(summary) + "\n")
    (tmp_path / "micro_waits.log").write_text("read +100 ns\n" + json.dumps({"summary": "micro_waits"}) + "\n")
    p = run(tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "commit: abc1234" in out
    assert "| `a.X` | cpu | 3.0 | 5.0 | 15.0 | ours |" in out
    assert "| `b.W` | offcpu | 1.0 | n/a | blind | |" in out.replace("|  |", "| |")
    assert "c.S" not in out.split("### accuracy.py output")[0]  # a contention case has no error
    assert "| cpu | 3.0 (max 4.0, 2 points) | 5.0 (max 10.0, 2 points) | 15.0 (max 20.0, 2 points) |" in out
    assert "### micro_waits.py output" in out and "read +100 ns" in out
    assert '"summary"' not in out  # the JSON lines are left out of the outputs


def test_a_directory_without_header_is_a_clear_error(tmp_path):
    p = run(tmp_path)
    assert p.returncode == 2
    assert "header.txt is missing" in p.stderr and "Traceback" not in p.stderr
