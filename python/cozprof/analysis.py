"""Causal analysis of parsed profiles: one causal curve per (unit, progress point),
a unit being a line, a function or a call site.

`analyze(profile)` returns exactly the object specified in
`docs/analysis-format.md`; `docs/analysis.md` explains every formula used here.
"""

import numpy as np

from . import estimator
from . import profile as profile_mod
from . import units as units_mod
from .errors import CozError

SCHEMA = 1
DEFAULT_MIN_POINTS = 3        # distinct speedups, 0 included, a curve needs
FIXED_SPEEDUP_MIN_POINTS = 2  # runs with --fixed-speedup measure 0 and one speedup only
CI_LEVEL = estimator.CI_LEVEL
PREDICT_AT = (0.25, 0.5, 1.0)
DRIFT_MIN_BASELINES = estimator.DRIFT_MIN_BASELINES  # 0% experiments before drift is looked for
# Above this share of their runnable time spent waiting for a CPU, the program's
# threads outnumber the CPUs they get, and the report says that predictions are
# least reliable there (docs/analysis.md, "More threads than cores"). The runtime
# calls a program crowded at the same 10% (libcoz/delays.h, kSleepShareMin).
CPU_WAIT_WARN_SHARE = 0.10


def analyze_files(paths, all_runs=False, **opts):
    """Parse profile files and analyze them (what `coz report`, `coz plot` and the
    viewer call). Unless `all_runs`, each file contributes only the runs of its
    latest build (`profile.Profile.latest_builds`)."""
    prof = profile_mod.load(paths)
    if not all_runs:
        prof = prof.latest_builds()
    return analyze(prof, **opts)


def analyze(profile, phase_correction=True, progress_point=None, min_points=DEFAULT_MIN_POINTS,
            bootstrap=None, seed=None):
    """Analyze a `profile.Profile`; returns the docs/analysis-format.md object.

    The intervals are computed, not resampled: `bootstrap` and `seed` are
    accepted for older callers and have no effect."""
    if min_points < 2:
        raise CozError(f"--min-points must be at least 2, not {min_points}",
                       hint="a slope needs the 0% point and at least one other speedup")

    usable, partial, prev = _usable_experiments(profile)
    points = _progress_points(usable)
    if progress_point is not None and progress_point not in points:
        known = ", ".join(sorted(points)) or "none"
        raise CozError(f"no progress point named {progress_point!r} in the profile",
                       hint=f"progress points seen: {known}")

    samples = profile.samples
    runtime_ns = profile.runtime_ns
    groups, unit_exps = _group(usable, progress_point, prev)
    index = units_mod.UnitIndex(profile)

    factors = {}
    for key, exps in unit_exps.items():
        if not phase_correction:
            factors[key] = 1.0
            continue
        factors[key] = _phase_factor(*phase_inputs(profile, index, key, exps))

    lines, omitted = [], []
    for (unit, name, point), data in groups.items():
        kind = points[point]["kind"]
        needed = min(min_points, FIXED_SPEEDUP_MIN_POINTS) if data.fixed else min_points
        result = _curve(name, point, kind, data, factors[(unit, name)], needed)
        if "reason" in result:
            omitted.append({"unit": unit, **result})
        else:
            _describe_unit(result, unit, name, index)
            lines.append(result)
    _nest(lines, index)

    lines.sort(key=lambda r: (-r["impact"], r["line"], r["unit"], r["progress_point"]))
    omitted.sort(key=lambda r: (r["line"], r["unit"], r["progress_point"]))

    stats = profile.shutdown_stats()
    warnings = list(profile.warnings) + profile.runtime_warnings()
    if getattr(profile, "build_note", None):
        warnings.insert(0, profile.build_note)
    if partial["negative"]:
        n = partial["negative"]
        warnings.append(f"{n} experiment{'s' if n != 1 else ''} without a positive effective "
                        f"duration {'were' if n != 1 else 'was'} left out (the delay inserted "
                        "exceeded the wall time)")
    if partial["stalled"]:
        n = partial["stalled"]
        warnings.append(f"{n} experiment{'s' if n != 1 else ''} {'were' if n != 1 else 'was'} left out: "
                        "the whole process stood still during "
                        f"{'them' if n != 1 else 'it'} for 0.1 s or more (stopped with Ctrl-Z or "
                        "SIGSTOP, held by a debugger, a frozen container or a paused virtual machine), "
                        "which no speedup explains")
    if stats["abrupt_runs"]:
        warnings.append(profile_mod.abrupt_warning(stats["abrupt_runs"], stats["runs"]))
    if stats["live_runs"]:
        warnings.append(profile_mod.live_warning(stats["live_runs"], stats["runs"]))
    if stats["lost_records"]:
        warnings.append(f"the kernel lost {stats['lost_records']} sample records; "
                        "results may be less precise (try a longer --sample-period)")
    if stats["dropped_samples"]:
        warnings.append(f"{stats['dropped_samples']} samples were dropped because a thread's "
                        "buffer was full")

    threads = thread_breakdown(profile)
    waited = cpu_wait_share(threads)
    if lines and waited is not None and waited > CPU_WAIT_WARN_SHARE:
        warnings.append(f"the program's threads waited for a CPU {waited * 100:.0f}% of the time they "
                        "were runnable (more runnable threads than CPUs, or other work on them): "
                        "there virtual speedup predicts least reliably, off by several points either "
                        "way on this project's benchmarks (docs/analysis.md, \"More threads than "
                        "cores\"); check a small difference with a real change before acting on it")
    return {
        "schema": SCHEMA,
        "profiles": list(profile.paths),
        "phase_correction": bool(phase_correction),
        "progress_points": [
            {"name": name, "kind": p["kind"], "experiments": p["experiments"]}
            for name, p in sorted(points.items())
        ],
        "units": sorted({e.unit for e in usable}, key=profile_mod.UNITS.index),
        "lines": lines,
        "omitted": omitted,
        "threads": threads,
        "thread_groups": thread_groups(threads),
        "summary": {
            "runs": len(profile.runs),
            "experiments": len(usable) + partial["excluded"] + partial["negative"] + partial["stalled"],
            "partial_experiments": partial["total"],
            "stalled_experiments": partial["stalled"],
            "lost_records": stats["lost_records"],
            "dropped_samples": stats["dropped_samples"],
            "runtime_ns": runtime_ns,
            "runs_left_out": len(getattr(profile, "left_out", ())),
            "cpu_wait_share": waited,
        },
        "warnings": warnings,
        "diagnosis": None if lines else _diagnosis(profile, usable, partial, points, omitted,
                                                    samples, min_points),
    }


# -- selection and grouping ------------------------------------------------

def _usable_experiments(profile):
    """The experiments a curve can use, and how many were left out why; each
    usable one's `seq` maps, in the third value, to the speedup of the
    experiment that ran before it in its run (the carry-over)."""
    usable = []
    partial = {"total": 0, "excluded": 0, "negative": 0, "stalled": 0}
    prev = {}
    for run in profile.runs:
        e2e = run.end_to_end
        for i, e in enumerate(run.experiments):
            if i:
                prev[e.seq] = run.experiments[i - 1].speedup
            if e.duration_ns <= 0:
                partial["negative"] += 1
                continue
            if e.stalled_ns:
                partial["stalled"] += 1
                continue
            if e.partial:
                partial["total"] += 1
                if not e2e:
                    partial["excluded"] += 1
                    continue
            usable.append(e)
    return usable, partial, prev


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


class _CurveData:
    """The experiments of one (line, progress point), as columns: reading order
    (`Experiment.seq`), speedup, x and c (see `_curve`)."""

    __slots__ = ("seq", "s", "x", "c", "prev", "missing", "fixed")

    def __init__(self):
        self.seq, self.s, self.x, self.c, self.prev = [], [], [], [], []
        self.missing = False   # a latency entry without an in-flight count
        self.fixed = True      # every experiment from a --fixed-speedup run

    def add(self, e, p, prev=None):
        self.seq.append(e.seq)
        self.s.append(e.speedup)
        self.prev.append(float("nan") if prev is None else prev)
        if p.kind == profile_mod.THROUGHPUT:
            self.x.append(e.duration_ns)
            self.c.append(p.delta)
        else:
            # Little's law: latency = in flight / arrival rate = 2 * sum(difference * d) / sum(a)
            if p.difference is None or p.difference < 0:
                self.missing = True  # upstream's old records, or a negative count
            self.x.append(2.0 * (p.difference or 0) * e.duration_ns)
            self.c.append(p.arrivals + p.departures)
        if e.run is None or e.run.fixed_speedup is None:
            self.fixed = False

    def arrays(self):
        """(s, x, c, s_prev) as arrays in the order the experiments ran."""
        s = np.array(self.s, dtype=float)
        x = np.array(self.x, dtype=float)
        c = np.array(self.c, dtype=float)
        prev = np.array(self.prev, dtype=float)
        seq = np.array(self.seq)
        if len(seq) > 1 and not (np.diff(seq) > 0).all():
            order = np.argsort(seq, kind="stable")
            s, x, c, prev = s[order], x[order], c[order], prev[order]
        return s, x, c, prev


def _group(experiments, only_point, prev=None):
    """(unit, selected, point) -> _CurveData, and (unit, selected) -> [Experiment].
    An experiment is measured by its first entry for a point; `prev`: seq ->
    the speedup of the experiment before it (_usable_experiments)."""
    groups = {}
    unit_exps = {}
    for e in experiments:
        unit_exps.setdefault((e.unit, e.selected), []).append(e)
        seen = None
        for p in e.progress:
            name = p.name
            if only_point is not None and name != only_point:
                continue
            if seen is not None:
                if name in seen:
                    continue
                seen.add(name)
            elif len(e.progress) > 1:
                seen = {name}
            key = (e.unit, e.selected, name)
            data = groups.get(key)
            if data is None:
                data = groups[key] = _CurveData()
            data.add(e, p, prev.get(e.seq) if prev else None)
    return groups, unit_exps


def phase_inputs(profile, index, key, exps):
    """(t_obs, s_obs, s, T) of eq. 8 for the unit `key` = (unit, name) measured by
    the experiments `exps` (docs/analysis.md, section 3).

    Samples are on- and off-CPU: s_obs counts the unit's CPU samples in its
    experiments plus its waits sped up in them (`selected_blocked_ns`) in
    sampling periods; s counts its CPU samples plus its blocked samples of the
    categories each run could speed up (`blocked_scope`). s and T come from the
    runs where the unit was sampled or selected, so that merging profiles of
    other programs does not dilute its share.

    Both densities are taken where the program ran as it does unprofiled: the
    unit's 0% experiments (t_obs their wall time), and the plain intervals of
    the runs (Run.plain: no experiment in them inserted a delay). Over
    effective time, a unit's own speedups would raise its density while
    measured, and every other unit's would raise it over the run less, so the
    factor would fall below 1 on a program without phases. Profiles without
    plain intervals or 0% experiments (upstream's formats, fixed speedups)
    keep eq. 8 over effective time."""
    unit, name = key
    runs = {id(e.run): e.run for e in exps if e.run is not None}
    samples = [(r, index.phase_samples(r, unit, name)) for r in profile.runs]
    involved = [(r, n) for r, n in samples if n or id(r) in runs]
    base = [e for e in exps if e.speedup == 0 and e.wall_ns and e.run is not None]
    plain_runs = [r for r, _ in involved if r.plain.ns > 0]
    if base and plain_runs:
        t_obs = sum(e.wall_ns for e in base)
        s_obs = sum(_observed_samples(e) for e in base)
        s = sum(index.phase_samples(r, unit, name, plain=True) for r in plain_runs)
        T = sum(r.plain.ns for r in plain_runs)
        if s_obs > 0:
            return t_obs, s_obs, s, T
    s = sum(n for _, n in involved)
    T = sum(r.runtime_ns for r, _ in involved)
    t_obs = sum(e.duration_ns for e in exps)
    s_obs = sum(_observed_samples(e) for e in exps)
    return t_obs, s_obs, s, T


def _observed_samples(e):
    """The unit's samples in experiment e: its CPU samples, and its waits sped
    up in it in sampling periods."""
    return e.selected_samples + (e.selected_blocked_ns / units_mod.sample_period_ns(e.run)
                                 if e.run is not None else 0.0)


def _phase_factor(t_obs, s_obs, line_samples, runtime_ns):
    """Eq. 8 of the COZ paper: (t_obs / s_obs) * (s / T), at most 1."""
    if t_obs <= 0 or s_obs <= 0 or line_samples <= 0 or runtime_ns <= 0:
        return 1.0
    return min(1.0, (t_obs / s_obs) * (line_samples / runtime_ns))


# -- what a unit is: its time on and off the CPU, and its nesting -------------------

def _describe_unit(result, unit, name, index):
    """Add the unit's kind, its samples on and off the CPU, and where it lies."""
    cpu, off = index.mix(unit, name)
    total = cpu + sum(off.values())
    result["unit"] = unit
    if unit == profile_mod.FUNCTION:
        path, low = index.function_lines(name)
        base, qualified = units_mod.split_function_name(name)
        result["file"] = qualified or path or ""
        result["lineno"] = low
        result["function"] = None
    else:
        result["function"] = index.function_of(name)
    result["calls"] = index.callees(name) if unit == profile_mod.CALLSITE else []
    result["contains"] = []
    result["called_from"] = []
    result["samples"] = total
    result["on_cpu_share"] = cpu / total if total else None
    result["off_cpu"] = {k: off[k] / total for k in profile_mod.WAIT_KINDS if off.get(k)} \
        if total else {}
    if total:
        shares = [("cpu", cpu)] + [(k, off.get(k, 0)) for k in profile_mod.WAIT_KINDS]
        result["category"] = max(shares, key=lambda kv: kv[1])[0]
    else:
        result["category"] = None


def _nest(lines, index):
    """A function's curve lists the line curves that lie in it and the call-site
    curves that call it (same progress point), highest impact first."""
    funcs = {(r["line"], r["progress_point"]): r for r in lines
             if r["unit"] == profile_mod.FUNCTION}
    if not funcs:
        return
    ranked = sorted(lines, key=lambda r: (-r["impact"], r["line"]))
    for r in ranked:
        point = r["progress_point"]
        if r["unit"] == profile_mod.LINE and r["function"] is not None:
            f = funcs.get((r["function"], point))
            if f is not None:
                f["contains"].append(r["line"])
        elif r["unit"] == profile_mod.CALLSITE:
            for callee in r["calls"]:
                f = funcs.get((callee, point))
                if f is not None and r["line"] not in f["called_from"]:
                    f["called_from"].append(r["line"])


# -- where each thread's time went (bperf's breakdown) -------------------------------

def thread_breakdown(profile):
    """One entry per `thread` record: wall time split into CPU, each wait
    category, and the rest (docs/analysis-format.md, THREAD)."""
    out = []
    for i, run in enumerate(profile.runs):
        for t in run.threads:
            start, end = t.get("start_ns"), t.get("end_ns")
            wall = end - start if isinstance(start, int) and isinstance(end, int) and end > start else 0
            cpu = t.get("cpu_clock_ns")
            if isinstance(cpu, int):
                # The thread's clock also ran through the pauses that held its CPU
                # (virtual speedup's, in a program whose threads wait for one): the
                # profiler's time, not the program's. The sampled cpu_ns leaves
                # them out already.
                cpu -= _count(t.get("paused_cpu_ns"))
            else:
                cpu = _count(t.get("cpu_ns"))
            # The main thread's clock counts from the process's start, before its
            # record's start_ns (the loader, constructors): a short program's read
            # over 100% of its wall time.
            cpu = max(0, min(cpu, wall))
            waits = t.get("wait_ns") if isinstance(t.get("wait_ns"), dict) else {}
            wait_ns = {k: _count(waits.get(k)) for k in profile_mod.WAIT_KINDS}
            # Off the CPU of its own accord, from its switch records (absent
            # without them). The waits are the time inside the calls, which
            # also holds the kernel's CPU time for them and preemptions in
            # them: with this figure, the rest is what neither the CPU, nor a
            # preemption, nor the program's own time off the CPU accounts for.
            off = t.get("off_cpu_ns")
            if isinstance(off, int) and not isinstance(off, bool) and off >= 0:
                off = min(off, wall)
                rest = wall - cpu - wait_ns["sched"] - off
            else:
                off = None
                rest = wall - cpu - sum(wait_ns.values())
            out.append({"run": i, "tid": t["tid"], "thread": str(t.get("thread", "")),
                        "group": str(t.get("group", "")), "wall_ns": wall, "cpu_ns": cpu,
                        "wait_ns": wait_ns, "off_cpu_ns": off,
                        "paused_ns": min(_count(t.get("paused_ns")), wall), "rest_ns": max(0, rest)})
    return out


def cpu_wait_share(threads):
    """Of the time the threads were runnable (on the CPU, or preempted waiting for
    one), the share they waited: their `sched` time over it, summed over every
    thread; None without thread records (or time)."""
    cpu = sum(t["cpu_ns"] for t in threads)
    sched = sum(t["wait_ns"]["sched"] for t in threads)
    return sched / (cpu + sched) if cpu + sched > 0 else None


def _count(v):
    """A record's count of nanoseconds: 0 when absent, not an integer, or negative."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def thread_groups(threads):
    """The per-thread breakdown summed per thread group, in order of first appearance."""
    groups = {}
    for t in threads:
        g = groups.get(t["group"])
        if g is None:
            g = groups[t["group"]] = {"group": t["group"], "threads": 0, "wall_ns": 0, "cpu_ns": 0,
                                      "wait_ns": {k: 0 for k in profile_mod.WAIT_KINDS},
                                      "off_cpu_ns": 0, "paused_ns": 0, "rest_ns": 0}
        g["threads"] += 1
        for k in ("wall_ns", "cpu_ns", "paused_ns", "rest_ns"):
            g[k] += t[k]
        # Known for the group only when known for each of its threads.
        off = t.get("off_cpu_ns")
        g["off_cpu_ns"] = None if off is None or g["off_cpu_ns"] is None else g["off_cpu_ns"] + off
        for k, v in t["wait_ns"].items():
            g["wait_ns"][k] += v
    return list(groups.values())


# -- one causal curve ------------------------------------------------------

def _omit(line, point, reason, detail):
    return {"line": line, "progress_point": point, "reason": reason, "detail": detail}


def _curve(line, point, kind, data, factor, needed):
    """One curve. For throughput, x is an experiment's effective duration and c the
    visits of the point; for latency, x is 2 * in-flight * duration and c arrivals
    plus departures: either way the period of a group is sum(x) / sum(c)."""
    s, x, c, s_prev = data.arrays()
    speedups = sorted(set(data.s))
    if 0.0 not in speedups:
        return _omit(line, point, "no-baseline",
                     f"no experiment at speedup 0 among {len(speedups)} speedups")
    if data.missing:
        return _omit(line, point, "no-in-flight-count",
                     "this profile's latency records carry no in-flight count")
    base = s == 0.0
    if not (c[base].sum() > 0 and x[base].sum() > 0):
        return _omit(line, point, "no-progress",
                     "the progress point did not advance during the 0% experiments")
    with_progress = [v for v in speedups if v == 0.0 or (c[s == v].sum() > 0 and x[s == v].sum() > 0)]
    dropped = len(speedups) - len(with_progress)
    if len(with_progress) < needed:
        detail = f"{len(with_progress)} distinct speedup{'s' if len(with_progress) != 1 else ''}, " \
                 f"{needed} needed"
        if dropped:
            detail += f" ({dropped} more without progress)"
        return _omit(line, point, "too-few-speedups", detail)
    keep = np.isin(s, with_progress)
    est = estimator.estimate(s[keep], x[keep], c[keep], factor=factor,
                             drift_min_baselines=DRIFT_MIN_BASELINES, s_prev=s_prev[keep])

    pts = [{"speedup": float(v), "program_speedup": float(y), "ci": [float(lo), float(hi)],
            "experiments": int(n)}
           for v, y, (lo, hi), n in zip(est["speedups"], est["y"], est["ci"], est["n"])]
    slope, intercept = est["slope"], est["intercept"]
    return {
        "line": line,
        "file": line.rpartition(":")[0] if ":" in line else line,
        "lineno": _lineno(line),
        "progress_point": point,
        "kind": kind,
        "experiments": int(est["n"].sum()),
        "points": pts,
        "slope": slope,
        "slope_ci": [float(est["slope_ci"][0]), float(est["slope_ci"][1])],
        "intercept": intercept,
        "r2": est["r2"],
        "impact": intercept + slope / 2.0,
        "max_speedup": float(est["y"].max()),
        "predicted": {str(v): intercept + slope * v for v in PREDICT_AT},
        "contention": est["slope_ci"][1] < 0,
        "phase_factor": float(factor),
        "drift_corrected": est["drift"],
        "carry_over": est["carry_over"],
    }


def _lineno(line):
    tail = line.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


# -- when nothing is usable --------------------------------------------------

def _diagnosis(profile, usable, partial, points, omitted, samples, min_points):
    if not profile.runs:
        return ("The profile holds no runs. Profile a program with "
                "'coz run --- ./program args' and report on the file it writes.")
    in_scope = sum(samples.values())
    out_of_scope = sum(r.out_of_scope for r in profile.runs)
    if not usable and not profile.experiments:
        modes = {r.mode for r in profile.runs}
        if all(r.quiet for r in profile.runs):
            # Runs that make no experiment by design: not too short, not out of scope.
            views = ("'coz report --top' (where the time went), 'coz report --list REGEX', "
                     "'coz export'" if "sampling-only" in modes else "")
            locks = "'coz locks' (synchronization)" if "locks-only" in modes else ""
            return (f"The profile's runs are {' and '.join(sorted(modes))}: they make no "
                    f"experiment, so there is no causal prediction. Read them with "
                    f"{', '.join(v for v in (views, locks) if v)}; for predictions, run without "
                    "--sampling-only or --locks-only.")
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
