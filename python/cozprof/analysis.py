"""Causal analysis of parsed profiles: one causal curve per (line, progress point).

`analyze(profile)` returns exactly the object specified in
`docs/analysis-format.md`; `docs/analysis.md` explains every formula used here.
"""

import zlib

import numpy as np

from . import profile as profile_mod
from .errors import CozError

SCHEMA = 1
DEFAULT_MIN_POINTS = 3        # distinct speedups, 0 included, a curve needs
FIXED_SPEEDUP_MIN_POINTS = 2  # runs with --fixed-speedup measure 0 and one speedup only
DEFAULT_BOOTSTRAP = 400       # bootstrap resamples per (line, progress point)
CI_LEVEL = 0.95
PREDICT_AT = (0.25, 0.5, 1.0)
DRIFT_MIN_BASELINES = 6       # 0% experiments of a line in one run before drift is corrected
DRIFT_NEIGHBOURS = 2          # 0% experiments nearest in time that give the local baseline


def analyze_files(paths, all_runs=False, **opts):
    """Parse profile files and analyze them (what `coz report`, `coz plot` and the
    viewer call). Unless `all_runs`, each file contributes only the runs of its
    latest build (`profile.Profile.latest_builds`)."""
    prof = profile_mod.load(paths)
    if not all_runs:
        prof = prof.latest_builds()
    return analyze(prof, **opts)


def analyze(profile, phase_correction=True, progress_point=None, min_points=DEFAULT_MIN_POINTS,
            bootstrap=DEFAULT_BOOTSTRAP, seed=0):
    """Analyze a `profile.Profile`; returns the docs/analysis-format.md object."""
    if min_points < 2:
        raise CozError(f"--min-points must be at least 2, not {min_points}",
                       hint="a slope needs the 0% point and at least one other speedup")

    usable, partial = _usable_experiments(profile)
    points = _progress_points(usable)
    if progress_point is not None and progress_point not in points:
        known = ", ".join(sorted(points)) or "none"
        raise CozError(f"no progress point named {progress_point!r} in the profile",
                       hint=f"progress points seen: {known}")

    samples = profile.samples
    runtime_ns = profile.runtime_ns
    groups, line_exps = _group(usable, progress_point)

    factors = {}
    for line, exps in line_exps.items():
        if not phase_correction:
            factors[line] = 1.0
            continue
        # s and T come from the runs where the line was sampled or selected, so that
        # merging profiles of other programs does not dilute the line's share.
        runs = [r for r in profile.runs if line in r.samples]
        runs += [r for r in {id(e.run): e.run for e in exps if e.run is not None}.values()
                 if line not in r.samples]
        factors[line] = _phase_factor(exps, sum(r.samples.get(line, 0) for r in runs),
                                      sum(r.runtime_ns for r in runs))

    lines, omitted = [], []
    for (line, point), by_speedup in groups.items():
        kind = points[point]["kind"]
        fixed = all(e.run is not None and e.run.fixed_speedup is not None
                    for exps in by_speedup.values() for e in exps)
        needed = min(min_points, FIXED_SPEEDUP_MIN_POINTS) if fixed else min_points
        result = _curve(line, point, kind, by_speedup, factors[line], needed, bootstrap, seed)
        if "reason" in result:
            omitted.append(result)
        else:
            lines.append(result)

    lines.sort(key=lambda r: (-r["impact"], r["line"], r["progress_point"]))
    omitted.sort(key=lambda r: (r["line"], r["progress_point"]))

    stats = profile.shutdown_stats()
    warnings = list(profile.warnings) + profile.runtime_warnings()
    if getattr(profile, "build_note", None):
        warnings.insert(0, profile.build_note)
    if partial["negative"]:
        warnings.append(f"{partial['negative']} experiments without a positive effective "
                        "duration were left out (the delay inserted exceeded the wall time)")
    if stats["lost_records"]:
        warnings.append(f"the kernel lost {stats['lost_records']} sample records; "
                        "results may be less precise (try a longer --sample-period)")
    if stats["dropped_samples"]:
        warnings.append(f"{stats['dropped_samples']} samples were dropped because a thread's "
                        "buffer was full")

    return {
        "schema": SCHEMA,
        "profiles": list(profile.paths),
        "phase_correction": bool(phase_correction),
        "progress_points": [
            {"name": name, "kind": p["kind"], "experiments": p["experiments"]}
            for name, p in sorted(points.items())
        ],
        "lines": lines,
        "omitted": omitted,
        "summary": {
            "runs": len(profile.runs),
            "experiments": len(usable) + partial["excluded"] + partial["negative"],
            "partial_experiments": partial["total"],
            "lost_records": stats["lost_records"],
            "dropped_samples": stats["dropped_samples"],
            "runtime_ns": runtime_ns,
            "runs_left_out": len(getattr(profile, "left_out", ())),
        },
        "warnings": warnings,
        "diagnosis": None if lines else _diagnosis(profile, usable, partial, points, omitted,
                                                    samples, min_points),
    }


# -- selection and grouping ------------------------------------------------

def _usable_experiments(profile):
    usable = []
    partial = {"total": 0, "excluded": 0, "negative": 0}
    for run in profile.runs:
        e2e = run.end_to_end
        for e in run.experiments:
            if e.duration_ns <= 0:
                partial["negative"] += 1
                continue
            if e.partial:
                partial["total"] += 1
                if not e2e:
                    partial["excluded"] += 1
                    continue
            usable.append(e)
    return usable, partial


def _progress_points(experiments):
    points = {}
    for e in experiments:
        for p in e.progress:
            entry = points.get(p.name)
            if entry is None:
                points[p.name] = {"kind": p.kind, "experiments": 1}
            else:
                entry["experiments"] += 1
    return points


def _group(experiments, only_point):
    """(line, point) -> {speedup: [Experiment]}, and line -> [Experiment]."""
    groups = {}
    line_exps = {}
    for e in experiments:
        line_exps.setdefault(e.selected, []).append(e)
        for p in e.progress:
            if only_point is not None and p.name != only_point:
                continue
            groups.setdefault((e.selected, p.name), {}).setdefault(e.speedup, []).append(e)
    return groups, line_exps


def _phase_factor(exps, line_samples, runtime_ns):
    """Eq. 8 of the COZ paper: (t_obs / s_obs) * (s / T), at most 1."""
    t_obs = sum(e.duration_ns for e in exps)
    s_obs = sum(e.selected_samples for e in exps)
    if t_obs <= 0 or s_obs <= 0 or line_samples <= 0 or runtime_ns <= 0:
        return 1.0
    return min(1.0, (t_obs / s_obs) * (line_samples / runtime_ns))


# -- one causal curve ------------------------------------------------------

def _measurements(kind, point, exps, scale=None):
    """Per-experiment arrays the period of one speedup is computed from.

    `scale` (id(experiment) -> factor) stretches an experiment's time so that
    its period is expressed at the machine speed of the whole run (drift)."""
    scale = scale or {}
    if kind == profile_mod.THROUGHPUT:
        d, k = [], []
        for e in exps:
            for p in e.progress:
                if p.name == point:
                    d.append(e.duration_ns * scale.get(id(e), 1.0))
                    k.append(p.delta)
                    break
        return np.array(d, dtype=float), np.array(k, dtype=float)
    d, a, q = [], [], []
    for e in exps:
        f = scale.get(id(e), 1.0)
        for p in e.progress:
            if p.name == point:
                d.append(e.duration_ns * f)
                a.append(p.arrivals + p.departures)
                q.append(-1.0 if p.difference is None else p.difference * e.duration_ns * f)
                break
    return np.array(d, dtype=float), np.array(a, dtype=float), np.array(q, dtype=float)


def _drift_scales(kind, point, by_speedup):
    """Corrects for the machine changing speed during a run.

    The progress rate of an unperturbed program can drift within a run (other
    load on the host, frequency changes): pooling every 0% experiment into one
    baseline then compares sped-up experiments with a baseline measured at
    another speed. Where a run holds at least DRIFT_MIN_BASELINES 0%
    experiments of this line and point, each experiment of that run is scaled
    by P0 / b, where P0 is the pooled baseline period and b the period of the
    DRIFT_NEIGHBOURS 0% experiments nearest to it in the run's order, so that
    its program speedup is measured against the baseline of its own moment.
    The 0% experiments themselves are left as they are: they make P0. Without
    drift b is P0 up to noise, and the scale is about 1."""
    baselines = by_speedup.get(0.0, [])
    pooled = _period(kind, tuple(a.sum() for a in _measurements(kind, point, baselines)))
    if not np.isfinite(pooled) or pooled <= 0:
        return {}
    by_run = {}
    for s, exps in by_speedup.items():
        for e in exps:
            if e.run is not None:
                by_run.setdefault(id(e.run), (e.run, []))[1].append(e)
    scales = {}
    for run, exps in by_run.values():
        order = {id(e): i for i, e in enumerate(run.experiments)}
        base = [e for e in exps if e.speedup == 0.0]
        if len(base) < DRIFT_MIN_BASELINES:
            continue
        for e in exps:
            i = order.get(id(e))
            if i is None or e.speedup == 0.0:
                continue
            near = sorted(base, key=lambda b: abs(order.get(id(b), 0) - i))[:DRIFT_NEIGHBOURS]
            local = _period(kind, tuple(a.sum() for a in _measurements(kind, point, near)))
            if np.isfinite(local) and local > 0:
                scales[id(e)] = float(pooled / local)
    return scales


def _period(kind, sums):
    """Time per unit of progress (throughput) or mean latency (Little's law).

    `sums` are the per-experiment arrays summed over the last axis. Returns nan when
    the period is undefined (no progress).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == profile_mod.THROUGHPUT:
            d, k = sums
            return np.where(k > 0, d / np.where(k > 0, k, 1), np.nan)
        d, a, q = sums
        # arrival rate = (arrivals + departures) / 2 / duration
        # in flight    = duration-weighted mean of `difference`
        # latency      = in flight / arrival rate = (q / d) / (a / (2 d)) = 2 q / a
        ok = (a > 0) & (q > 0) & (d > 0)
        return np.where(ok, 2.0 * q / np.where(a > 0, a, 1), np.nan)


def _omit(line, point, reason, detail):
    return {"line": line, "progress_point": point, "reason": reason, "detail": detail}


def _curve(line, point, kind, by_speedup, factor, needed, n_boot, seed):
    speedups = sorted(by_speedup)
    if 0.0 not in by_speedup:
        return _omit(line, point, "no-baseline",
                     f"no experiment at speedup 0 among {len(speedups)} speedups")
    scales = _drift_scales(kind, point, by_speedup)
    arrays = {s: _measurements(kind, point, by_speedup[s], scales) for s in speedups}
    if kind == profile_mod.LATENCY and any((arrays[s][2] < 0).any() for s in speedups):
        return _omit(line, point, "no-in-flight-count",
                     "this profile's latency records carry no in-flight count")

    periods = {s: float(_period(kind, tuple(a.sum() for a in arrays[s]))) for s in speedups}
    if not np.isfinite(periods[0.0]) or periods[0.0] <= 0:
        return _omit(line, point, "no-progress",
                     "the progress point did not advance during the 0% experiments")
    dropped = [s for s in speedups if not np.isfinite(periods[s])]
    speedups = [s for s in speedups if np.isfinite(periods[s])]
    if len(speedups) < needed:
        detail = f"{len(speedups)} distinct speedup{'s' if len(speedups) != 1 else ''}, " \
                 f"{needed} needed"
        if dropped:
            detail += f" ({len(dropped)} more without progress)"
        return _omit(line, point, "too-few-speedups", detail)

    x = np.array(speedups)
    n = np.array([len(arrays[s][0]) for s in speedups], dtype=float)
    y = np.array([(1.0 - periods[s] / periods[0.0]) * factor for s in speedups])

    # Bootstrap: resample the experiments of each speedup, with replacement.
    rng = np.random.default_rng((zlib.crc32(f"{line}\0{point}".encode()) << 8) ^ seed)
    boot_periods = []
    for s in speedups:
        arr = arrays[s]
        m = len(arr[0])
        idx = rng.integers(0, m, size=(n_boot, m))
        boot_periods.append(_period(kind, tuple(a[idx].sum(axis=1) for a in arr)))
    boot_periods = np.array(boot_periods)                     # (speedups, B)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot_y = (1.0 - boot_periods / boot_periods[0]) * factor
    lo_q, hi_q = 100 * (1 - CI_LEVEL) / 2, 100 * (1 + CI_LEVEL) / 2

    pts = []
    for i, s in enumerate(speedups):
        col = boot_y[i][np.isfinite(boot_y[i])]
        ci = [float(np.percentile(col, lo_q)), float(np.percentile(col, hi_q))] \
            if len(col) else [float(y[i]), float(y[i])]
        pts.append({"speedup": float(s), "program_speedup": float(y[i]), "ci": ci,
                    "experiments": int(n[i])})

    slope, intercept, r2 = _wls(x, y, n)
    valid = np.isfinite(boot_y).all(axis=0)
    if valid.any():
        bs = _wls_slopes(x, boot_y[:, valid].T, n)
        slope_ci = [float(np.percentile(bs, lo_q)), float(np.percentile(bs, hi_q))]
    else:
        slope_ci = [slope, slope]

    return {
        "line": line,
        "file": line.rpartition(":")[0] if ":" in line else line,
        "lineno": _lineno(line),
        "progress_point": point,
        "kind": kind,
        "experiments": int(n.sum()),
        "points": pts,
        "slope": slope,
        "slope_ci": slope_ci,
        "intercept": intercept,
        "r2": r2,
        "impact": intercept + slope / 2.0,
        "max_speedup": float(y.max()),
        "predicted": {str(s): intercept + slope * s for s in PREDICT_AT},
        "contention": slope_ci[1] < 0,
        "phase_factor": float(factor),
    }


def _lineno(line):
    tail = line.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


def _wls(x, y, w):
    """Weighted least squares fit y = intercept + slope * x; returns (slope, intercept, r2)."""
    sw = w.sum()
    xm = (w * x).sum() / sw
    ym = (w * y).sum() / sw
    sxx = (w * (x - xm) ** 2).sum()
    slope = float((w * (x - xm) * (y - ym)).sum() / sxx) if sxx > 0 else 0.0
    intercept = float(ym - slope * xm)
    ss_tot = float((w * (y - ym) ** 2).sum())
    ss_res = float((w * (y - intercept - slope * x) ** 2).sum())
    if ss_tot > 0:
        r2 = max(0.0, 1.0 - ss_res / ss_tot)
    else:
        r2 = 1.0
    return slope, intercept, r2


def _wls_slopes(x, ys, w):
    """WLS slopes of many curves at once: ys has one row per curve."""
    sw = w.sum()
    xm = (w * x).sum() / sw
    sxx = (w * (x - xm) ** 2).sum()
    if sxx <= 0:
        return np.zeros(len(ys))
    ym = (ys * w).sum(axis=1, keepdims=True) / sw
    return ((ys - ym) * (w * (x - xm))).sum(axis=1) / sxx


# -- when nothing is usable --------------------------------------------------

def _diagnosis(profile, usable, partial, points, omitted, samples, min_points):
    if not profile.runs:
        return ("The profile holds no runs. Profile a program with "
                "'coz run --- ./program args' and report on the file it writes.")
    in_scope = sum(samples.values())
    out_of_scope = sum(r.out_of_scope for r in profile.runs)
    if not usable:
        if in_scope == 0:
            return ("No in-scope line was sampled, so no experiment could run. Build the "
                    "program with debug information (-g), and check --binary-scope "
                    f"and --source-scope ({out_of_scope} samples fell outside the scope).")
        if partial["excluded"]:
            return ("Every experiment was cut short by the end of the program: the run was "
                    "too short. Run on a bigger input, or use a shorter --experiment-length.")
        return ("No experiment finished: the run was too short. Run on a bigger input, or use "
                "a shorter --experiment-length.")
    if not any(p.delta or p.arrivals or p.departures for e in usable for p in e.progress):
        return ("No progress point was reached. Add COZ_PROGRESS (or COZ_BEGIN/COZ_END) to "
                "the code that completes a unit of work, or name a line with "
                "'coz run --progress file:line'; or use --end-to-end.")
    if omitted and all(o["reason"] == "no-baseline" for o in omitted):
        return ("No experiment at speedup 0 was recorded, so there is no baseline to compare "
                "against. Run without --fixed-speedup, or add runs with --fixed-speedup 0 to "
                "the same profile.")
    return ("The run was too short: no line got experiments at enough different speedups "
            f"({min_points} distinct, 0% included). Run longer or on a bigger input, or run "
            "several times with the same --output (runs are merged).")
