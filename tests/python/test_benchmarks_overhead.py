"""benchmarks/overhead.py: the intervals that decide its targets, on rounds
whose answers are known (no program runs)."""

import os
import random
import sys

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import overhead  # noqa: E402


def rounds_of(ratios, plain=2.0, key="wall_s"):
    """One round per ratio: plain's run and ours_sampling's, `ratio` times as long."""
    return [{"plain": {key: plain}, "ours_sampling": {key: plain * r}} for r in ratios]


def row(program, ratios):
    rs = rounds_of(ratios)
    return {"program": program, "cpu_bound": True, "causal_excess_vs_upstream": None,
            "ratio": overhead.paired_ratios(rs, ["ours_sampling"]),
            "ratio_interval": overhead.paired_ratio_intervals(rs, ["plain", "ours_sampling"])}


def sampling_target(rows):
    return overhead.targets(rows, [], {})["sampling_slowdown"]


def test_the_interval_holds_the_median_and_narrows_with_rounds():
    rng = random.Random(1)
    few = [1.01 + rng.gauss(0, 0.025) for _ in range(5)]
    many = [1.01 + rng.gauss(0, 0.025) for _ in range(45)]
    for ratios in (few, many):
        lo, hi = row("p", ratios)["ratio_interval"]["ours_sampling"]
        assert lo <= sorted(ratios)[len(ratios) // 2] <= hi
    w_few = row("p", few)["ratio_interval"]["ours_sampling"]
    w_many = row("p", many)["ratio_interval"]["ours_sampling"]
    assert w_many[1] - w_many[0] < (w_few[1] - w_few[0]) / 2
    # Seeded: the same rounds give the same interval.
    assert row("p", few)["ratio_interval"] == row("p", few)["ratio_interval"]


def test_no_interval_from_fewer_than_three_rounds():
    assert row("p", [1.05, 1.06])["ratio_interval"]["ours_sampling"] is None
    t = sampling_target([row("p", [1.05, 1.06])])
    assert t["verdict"] == "missed" and t["interval"] is None  # decided by the point, as before


def test_a_noisy_worst_point_over_the_target_is_not_resolved():
    # Five rounds around x1.01 with one ratio's spread of 2.5%: the point
    # reads over x1.02, the interval holds the target.
    t = sampling_target([row("quiet", [1.00, 1.005, 1.01, 1.0, 1.003]),
                         row("noisy", [0.99, 1.06, 1.025, 1.04, 0.995])])
    assert t["program"] == "noisy" and t["worst"] > overhead.SAMPLING_SLOWDOWN_MAX and not t["met"]
    assert t["verdict"] == "not resolved" and t["across"] == ["noisy"] and t["above"] == []


def test_an_interval_wholly_above_the_target_is_a_miss_and_all_below_a_pass():
    miss = sampling_target([row("ok", [1.0, 1.01, 1.0, 1.005, 1.0]),
                            row("slow", [1.05, 1.06, 1.055, 1.07, 1.052])])
    assert miss["verdict"] == "missed" and miss["above"] == ["slow"]
    met = sampling_target([row("a", [1.0, 1.01, 1.0, 1.005, 1.0]), row("b", [0.99, 1.0, 1.01, 1.0, 0.995])])
    assert met["verdict"] == "met" and met["met"] and met["across"] == [] and met["above"] == []


def test_the_excess_interval_pairs_both_profilers_by_round():
    # Ours x1.10, upstream x1.30 in every round: the excess is 1/3 whichever
    # rounds a resample draws.
    rounds = [{"plain": {"wall_s": 2.0}, "ours_causal": {"wall_s": 2.2}, "upstream_causal": {"wall_s": 2.6}}
              for _ in range(5)]
    lo, hi = overhead.excess_interval(rounds)
    assert abs(lo - 1 / 3) < 1e-9 and abs(hi - 1 / 3) < 1e-9
