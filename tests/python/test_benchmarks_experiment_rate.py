"""benchmarks/experiment_rate.py: the ratios over rounds, their intervals and
the verdicts on issue 15's rate and width targets, on rounds whose answers
are known (no program runs)."""

import os
import sys

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import experiment_rate as er  # noqa: E402


def rounds_of(pairs):
    """One round per (ours, upstream) pair of (per_minute, width)."""
    return [{"ours": {"per_minute": o[0], "width": o[1]}, "upstream": {"per_minute": u[0], "width": u[1]}}
            for o, u in pairs]


def test_ratios_are_of_the_medians_over_rounds():
    rs = rounds_of([((400, 0.03), (100, 0.04)), ((500, 0.05), (120, 0.04)), ((450, 0.01), (110, 0.05))])
    assert er.ratio(rs, "per_minute") == 450 / 110
    assert er.ratio(rs, "width") == 0.03 / 0.04
    assert er.ratio_interval(rs[:2], "width") is None  # under 3 rounds


def test_a_wider_program_is_missed_only_when_its_interval_says_so():
    # Ours about as wide as upstream, run to run spread: not resolved.
    even = rounds_of([((400, w), (100, u)) for w, u in
                      [(0.03, 0.04), (0.05, 0.04), (0.04, 0.035), (0.035, 0.045), (0.045, 0.04)]])
    # Ours twice as wide in every round: missed.
    wide = rounds_of([((400, 2 * u), (100, u)) for u in (0.03, 0.04, 0.05, 0.035, 0.045)])
    # Ours half as wide in every round: met.
    narrow = rounds_of([((400, u / 2), (100, u)) for u in (0.03, 0.04, 0.05, 0.035, 0.045)])

    def per(rs):
        return {"ratio": er.ratio(rs, "width"), "interval": er.ratio_interval(rs, "width")}
    assert er.decide({"a": per(narrow)}, False)["verdict"] == "met"
    t = er.decide({"a": per(narrow), "b": per(even)}, False)
    assert t["verdict"] == "not resolved" and t["across"] == ["b"]
    t = er.decide({"a": per(narrow), "b": per(even), "c": per(wide)}, False)
    assert t["verdict"] == "missed" and t["wrong_side"] == ["c"]


def test_the_rate_target_wants_ratios_at_or_above_one():
    fast = rounds_of([((400 + d, 0.04), (100, 0.04)) for d in (0, 10, 20, -10, 5)])
    slow = rounds_of([((80 + d, 0.04), (100, 0.04)) for d in (0, 5, -5, 3, 1)])

    def per(rs):
        return {"ratio": er.ratio(rs, "per_minute"), "interval": er.ratio_interval(rs, "per_minute")}
    assert er.decide({"a": per(fast)}, True)["verdict"] == "met"
    t = er.decide({"a": per(fast), "b": per(slow)}, True)
    assert t["verdict"] == "missed" and t["wrong_side"] == ["b"]


def test_without_intervals_the_points_decide():
    assert er.decide({"a": {"ratio": 1.2, "interval": None}}, False)["verdict"] == "missed"
    assert er.decide({"a": {"ratio": 0.9, "interval": None}}, False)["verdict"] == "met"
    assert er.decide({"a": {"ratio": None, "interval": None}}, False)["verdict"] == "not resolved"
