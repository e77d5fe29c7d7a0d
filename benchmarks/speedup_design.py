#!/usr/bin/env python3
"""Which share of 0% experiments and which speedups give the narrowest causal
curves for a given run time (issue 15, point 2).

Reuses the simulator of the analysis' coverage test
(tests/python/test_statistics.py: `design`, `realize`): runs of 20 to 60
experiments of one line, multiplicative noise of 2-10%, Poisson or regular
counting, the runtime's length adaptation, lines of true gain -0.5, 0, 0.25
and 2/3, half the runs with drift of the machine's speed (so the local
baselines of the drift correction matter). Every design sees the same runs
(the same seeds): the same number of experiments, i.e. the same run time,
only the speedups differ. The analysis is `cozprof.estimator.estimate`.

For each design (share of experiments at 0%, speedup levels drawn uniformly
otherwise) prints:
  width    median width of the slope's 95% interval
  rmse     root mean squared error of the slope
  cover    share of slope intervals that hold the true slope
  points   share of point intervals that hold the true program speedup
  curve    share of runs that get a curve (>= 3 distinct speedups, 0% included)
  cost     the mean speedup drawn: the delay an experiment inserts, for a
           given line, is proportional to it, and so is causal profiling's
           slowdown where the delays hold up the program
  w@cost   the width at the runtime design's cost: the width if the design
           ran as many experiments as the same total delay allows (width
           scales as 1 / sqrt(experiments), so width * sqrt(cost / cost0))
and each figure with drift and without. Last line: a JSON summary
{"summary": "speedup_design", ...}. Seeded: the same figures every time.

--delay-noise E adds what the simulator otherwise leaves out: the noise of
the delay an experiment inserts, which the runtime counts from samples of
the line (docs/analysis.md, "What the intervals miss: the delay's own
noise"). Each sped-up experiment's effective duration x = wall - D is then
recorded with an error of variance E * s * D (E in units of the initial
experiment length: 0.01 is a sampling period of 1 ms against 100 ms
experiments, what a count of Poisson hits of one period each would give),
while its visits follow the true duration. --runtime-only simulates the
runtime's design alone (seconds, not minutes). --experiments N gives every
run N experiments instead of 20 to 60 (a natural run of 45 s makes about
400).

Usage: speedup_design.py [--runs N] [--seed S] [--delay-noise E] [--runtime-only]
                         [--experiments N]
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))
from cozprof import estimator  # noqa: E402
from test_statistics import design, line_share, realize  # noqa: E402

GAINS = (0.0, 2 / 3, 0.25, -0.5)


def levels(step, low=None):
    low = step if low is None else low
    return np.round(np.arange(low, 1.0 + 1e-9, step), 2)


DESIGNS = [(zero, name, lv) for zero in (1 / 2, 1 / 3, 1 / 4) for name, lv in (
    ("5..100 by 5", levels(0.05)), ("10..100 by 10", levels(0.10)),
    ("20..100 by 20", levels(0.20)), ("25..100 by 25", levels(0.25)))]
# More experiments at 0%: cheaper in delays (issue 14's causal slowdown),
# wider per experiment (issue 15's intervals).
DESIGNS += [(zero, "5..100 by 5", levels(0.05)) for zero in (2 / 3, 3 / 4)]
# No small speedups: the delays go where the slope learns most per
# nanosecond inserted (a point's weight in the slope grows with its distance
# from the mean speedup, its cost with the speedup itself), but the curve
# below the lowest level is the fit's guess.
DESIGNS += [(zero, "25..100 by 5", levels(0.05, 0.25)) for zero in (1 / 2, 3 / 5, 2 / 3)]
DESIGNS += [(2 / 3, "50..100 by 5", levels(0.05, 0.50))]
RUNTIME_DESIGN = (1 / 2, "5..100 by 5")  # libcoz/experiment.h, choose_speedup


def cost(zero, lv):
    """The mean speedup drawn (0% included)."""
    return (1 - zero) * float(np.mean(lv))


def with_delay_noise(d, gain, s, x, noise, rng):
    """x as the runtime would record it when the delay D it subtracts was counted
    with an error of variance noise * s * D (the visits keep the true x)."""
    share = line_share(d, gain)
    delay = x * s * share / (1 - s * share)
    err = rng.standard_normal(len(x)) * np.sqrt(noise * s * delay)
    return np.maximum(x - err, 0.01 * (x + delay))


def simulate(zero, lv, runs, seed, min_points=3, delay_noise=0.0, experiments=None):
    out = []
    for k in range(runs):
        drift = k % 2 == 1
        gain = GAINS[(k // 2) % len(GAINS)]
        rng = np.random.default_rng([seed, k])
        d = design(rng, drift, zero_share=zero, levels=lv, n=experiments)
        s, x, c = realize(d, gain)
        if delay_noise:
            x = with_delay_noise(d, gain, s, x, delay_noise, np.random.default_rng([seed, k, 1]))
        est = estimator.estimate(s, x, c, drift_min_baselines=estimator.DRIFT_MIN_BASELINES)
        if est is None or len(est["speedups"]) < min_points:
            out.append({"drift": drift, "curve": False})
            continue
        lo, hi = est["slope_ci"]
        truth = gain * est["speedups"][1:]
        ci = est["ci"][1:]
        out.append({"drift": drift, "curve": True, "width": hi - lo, "err": est["slope"] - gain,
                    "cover": lo <= gain <= hi,
                    "points": ((ci[:, 0] <= truth) & (truth <= ci[:, 1])).tolist()})
    return out


def summarize(results):
    got = [r for r in results if r["curve"]]
    points = [p for r in got for p in r["points"]]
    return {"width": float(np.median([r["width"] for r in got])),
            "rmse": float(np.sqrt(np.mean([r["err"] ** 2 for r in got]))),
            "cover": float(np.mean([r["cover"] for r in got])),
            "points": float(np.mean(points)),
            "curve": len(got) / len(results)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1600, help="simulated runs per design (default 1600)")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--delay-noise", type=float, default=0.0, metavar="E",
                    help="error of each experiment's delay, variance E * s * D (default 0: none)")
    ap.add_argument("--runtime-only", action="store_true", help="only the runtime's design")
    ap.add_argument("--experiments", type=int, default=None, metavar="N",
                    help="experiments per run (default: 20 to 60, drawn)")
    opts = ap.parse_args()
    if opts.delay_noise < 0:
        ap.error("--delay-noise must be 0 or more")
    if opts.experiments is not None and opts.experiments < 4:
        ap.error("--experiments must be 4 or more")
    designs = [dd for dd in DESIGNS if not opts.runtime_only or dd[:2] == RUNTIME_DESIGN]
    print(f"# {opts.runs} simulated runs per design (half with drift), seed {opts.seed}; "
          f"the same runs for every design; delay noise {opts.delay_noise:g}; "
          f"experiments per run {opts.experiments or '20 to 60'}")
    print(f"{'0% share':>8} {'speedups':<14} {'width':>6} {'rmse':>6} {'cover':>6} {'points':>6} "
          f"{'curve':>6} {'cost':>6} {'w@cost':>6} | {'no drift: width':>15} {'rmse':>6} {'cover':>6} | "
          f"{'drift: width':>12} {'rmse':>6} {'cover':>6}")
    table = []
    cost0 = next(cost(z, lv) for z, n, lv in DESIGNS if (z, n) == RUNTIME_DESIGN)
    for zero, name, lv in designs:
        res = simulate(zero, lv, opts.runs, opts.seed, delay_noise=opts.delay_noise,
                       experiments=opts.experiments)
        a = summarize(res)
        nd = summarize([r for r in res if not r["drift"]])
        dr = summarize([r for r in res if r["drift"]])
        c = cost(zero, lv)
        a["cost"] = c
        a["width_at_cost"] = a["width"] * float(np.sqrt(c / cost0))
        print(f"{zero:>8.2f} {name:<14} {a['width']:>6.3f} {a['rmse']:>6.3f} {a['cover']:>6.3f} "
              f"{a['points']:>6.3f} {a['curve']:>6.3f} {c:>6.3f} {a['width_at_cost']:>6.3f} | "
              f"{nd['width']:>15.3f} {nd['rmse']:>6.3f} {nd['cover']:>6.3f} | "
              f"{dr['width']:>12.3f} {dr['rmse']:>6.3f} {dr['cover']:>6.3f}")
        sys.stdout.flush()
        table.append({"zero_share": round(zero, 4), "speedups": name, **a,
                      "no_drift": nd, "drift": dr})
    print(json.dumps({"summary": "speedup_design", "runs": opts.runs, "seed": opts.seed,
                      "delay_noise": opts.delay_noise, "experiments": opts.experiments, "designs": table}))


if __name__ == "__main__":
    main()
