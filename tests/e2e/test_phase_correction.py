"""The phase correction (eq. 8, docs/analysis.md section 3) on real runs."""

import math

from conftest import coz_run, source_marker

from cozprof import analysis, profile, units

# How far a factor may fall under 1 by chance, in standard deviations of its
# sampling error (the line's samples in its 0% experiments and in the plain
# intervals, each a binomial share of the samples there).
SDS = 4


def test_a_program_without_phases_keeps_its_whole_curves(build, tmp_path):
    # Every round runs A then B: no phases, so the correction must leave both
    # curves as measured. Over effective time, a line's own speedups raised
    # its density while measured, and its curve fell by 5% (0.89 to 0.96
    # for A on six runs of this program, 2026-12-03). Within one 6 s run the
    # factor's own sampling error is about that size (B: 4 to 14 baselines,
    # +-0.075; quiet runs read 0.87 to 1.00), so this test checks that the
    # plain intervals are found and read, and that each factor is 1 within
    # its error; the bias itself is tested exactly on a hand-made profile
    # (tests/python/test_analysis.py).
    exe = build("phases")
    out = tmp_path / "mixed.coz"
    r = coz_run(["-o", str(out)], [exe, "6", "mixed"])
    assert r.returncode == 0, r.stderr.decode()
    prof = profile.load([str(out)])
    # The runtime writes each experiment's samples and run time before the
    # next one starts: the plain intervals (0% experiments after a 0% one)
    # are about a quarter of the run.
    plain = sum(run.plain.ns for run in prof.runs)
    assert plain > 0.1 * prof.runtime_ns, (plain, prof.runtime_ns)
    plain_samples = sum(n for run in prof.runs for n in run.plain.samples.values())
    result = analysis.analyze(prof)
    index = units.UnitIndex(prof)
    found = {}
    for which in ("LINE_A", "LINE_B"):
        line = source_marker("phases", which)
        [curve] = [ln for ln in result["lines"] if ln["line"].endswith("/" + line)]
        exps = [e for e in prof.experiments if e.selected == curve["line"] and not e.partial]
        t_obs, s_obs, s, T = analysis.phase_inputs(prof, index, ("line", curve["line"]), exps)
        assert T == plain, (which, T, plain)  # the plain intervals' footing, not effective time
        q = s / plain_samples
        sd = math.sqrt((1 - q) / s_obs + (1 - q) / s)
        found[which] = (curve["phase_factor"], sd)
    assert all(f >= 1 - SDS * sd for f, sd in found.values()), found
