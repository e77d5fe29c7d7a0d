"""benchmarks/speedup_design.py: the delay's noise it can add, and its options."""

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import speedup_design  # noqa: E402
from test_statistics import design, line_share, realize  # noqa: E402


def test_the_delay_noise_has_the_variance_asked_for_and_spares_the_baselines():
    rng = np.random.default_rng(7)
    d = design(rng, False, n=60)
    gain = 0.25
    s, x, c = realize(d, gain)
    share = line_share(d, gain)
    delay = x * s * share / (1 - s * share)
    draws = np.array([speedup_design.with_delay_noise(d, gain, s, x, 0.01, np.random.default_rng(k))
                      for k in range(4000)])
    base = s == 0
    assert (draws[:, base] == x[base]).all()          # no delay, no error
    sped = ~base & (delay > 0)
    want = 0.01 * s[sped] * delay[sped]
    got = draws[:, sped].var(axis=0)
    keep = x[sped] > 6 * np.sqrt(want)                # where the floor at 1% of wall never bites
    assert keep.sum() >= 5
    assert np.allclose(got[keep], want[keep], rtol=0.15)
    assert np.allclose(draws[:, sped].mean(axis=0)[keep], x[sped][keep], atol=0.0, rtol=0.02)


def _run(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "speedup_design.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_runtime_only_with_delay_noise_prints_one_design_and_says_so():
    out = _run("--runtime-only", "--runs", "60", "--delay-noise", "0.03", "--experiments", "30")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["delay_noise"] == 0.03 and summary["experiments"] == 30
    assert [(d["zero_share"], d["speedups"]) for d in summary["designs"]] == [(0.5, "5..100 by 5")]
    assert "cover" in summary["designs"][0]["no_drift"]
    # the same runs without the error are narrower: the error reaches the intervals
    quiet = json.loads(_run("--runtime-only", "--runs", "60", "--experiments", "30").stdout.strip().splitlines()[-1])
    assert quiet["designs"][0]["width"] < summary["designs"][0]["width"]


def test_bad_options_are_refused_with_a_message():
    for args in (["--delay-noise", "-1"], ["--experiments", "2"]):
        out = _run("--runtime-only", "--runs", "4", *args)
        assert out.returncode == 2
        assert "must be" in out.stderr and "Traceback" not in out.stderr
