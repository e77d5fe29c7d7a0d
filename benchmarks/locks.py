#!/usr/bin/env python3
"""SyncPerf's known-answer programs: what `coz locks` reports on each, and the
gain of the fix it points to, measured.

For each program (benchmarks/locks_*.c):

1. `coz run --locks-only` on the program as it is (the bug; `--sampling-only`
   for the pipeline, whose report needs the thread records and the stacks of
   the slowest group's hottest line), then a causal
   `coz run` on it with `--fixed-line` on the line the fix is about (so that
   every experiment measures that line; the run is `--causal-scale` times
   longer), and `coz locks` on both profiles: the counters come from the
   locks-only run, the predictions from the causal run.
2. The program's finding: the first finding `coz locks` ranks, its category
   (checked against the known answer), quadrant and figures.
3. The gain of the fix: the program run plainly (no profiler) with the bug and
   with the fix applied through its arguments, interleaved `--reps` times;
   gain = 1 - median(fixed) / median(bug), from the programs' own elapsed time.

For the load-imbalance pipeline the fix is SyncPerf's suggested assignment of
threads to stages, taken from the report; every other assignment of the same
number of threads is timed too, and the suggestion must be within 10% of the
best one found.

Prints one table, then a JSON summary line {"summary": "locks", ...}. Exit
status 1 when a program is misclassified, a run fails, or the suggestion is
more than 10% slower than the best assignment.

Usage: locks.py [--short] [--only NAME] [--reps N] [--build DIR]
                [--causal-scale N] [--no-causal]
"""

import argparse
import itertools
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import BenchError  # noqa: E402

SUGGESTION_TOLERANCE = 0.10   # the suggested assignment may be this much slower than the best

# name: expected category, quadrant (None: not a lock finding), the fix's
# arguments, the argument that sizes the run and its default, the line the
# fix is about (KEY marker): the critical section's work for contended locks,
# the lock call itself where the acquisitions are the cost (Q4), the slowest
# stage's device wait for the pipeline.
PROGRAMS = {
    "locks_granularity": {"category": "improper-granularity", "quadrant": "Q2",
                          "fix": {"stripes": 64}, "fix_text": "striped locks (stripes=64)",
                          "size": ("ops", 50000), "key": "TABLE"},
    "locks_oversync": {"category": "over-synchronization", "quadrant": "Q4",
                       "fix": {"lock": 0}, "fix_text": "no lock (lock=0)",
                       "size": ("ops", 20000000), "key": "LOCK"},
    "locks_asymmetric": {"category": "asymmetric-contention", "quadrant": "Q2",
                         "fix": {"hash": 1}, "fix_text": "even hash (hash=1)",
                         "size": ("ops", 1000000), "key": "BUCKET"},
    "locks_primitive": {"category": "improper-primitive", "quadrant": "Q4",
                        "fix": {"atomic": 1}, "fix_text": "atomic add (atomic=1)",
                        "size": ("ops", 15000000), "key": "LOCK"},
    "locks_rare": {"category": "improper-granularity", "quadrant": "Q1",
                   "fix": {"shrink": 1}, "fix_text": "work moved out (shrink=1)",
                   "size": ("rounds", 120), "key": "DERIVE"},
    "locks_imbalance": {"category": "load-imbalance", "quadrant": None,
                        "fix": None, "fix_text": "suggested threads per stage",
                        "size": ("items", 400), "key": "DEVICE3", "mode": "--sampling-only"},
}
IMBALANCE_POOLS = ("t1", "t2", "t3")
IMBALANCE_DEFAULT = (2, 2, 2)


def _cmd(binary, args, short):
    return [binary, *benchlib.args_list(args), *(["--short"] if short else [])]


def _elapsed(binary, args, short):
    return benchlib.run_plain(_cmd(binary, args, short))["elapsed_s"]


def timed(binary, variants, reps, short):
    """Median elapsed time of each variant (a dict of arguments), the runs
    interleaved so that a change of the machine's speed hits all alike."""
    times = [[] for _ in variants]
    for _ in range(reps):
        for i, args in enumerate(variants):
            times[i].append(_elapsed(binary, args, short))
    return [benchlib.median(t) for t in times]


def report(name, binary, libcoz, workdir, short, causal, scale):
    """Profile the program (locks-only, then causal) and return `coz locks`'s
    report of the two profiles."""
    from cozprof import locks_report

    spec = PROGRAMS[name]
    locks_out = os.path.join(workdir, name + ".locks.coz")
    benchlib.run_ours(_cmd(binary, {}, short), libcoz, locks_out,
                      extra=(spec.get("mode", "--locks-only"),))
    paths = [locks_out]
    if causal:
        size_arg, size = spec["size"]
        args = {} if short else {size_arg: size * scale}
        causal_out = os.path.join(workdir, name + ".causal.coz")
        benchlib.run_ours(_cmd(binary, args, short), libcoz, causal_out,
                          fixed_line=benchlib.key_line(name, spec["key"]),
                          extra=("--experiment-length", "100ms"))
        paths.append(causal_out)
    return locks_report.build_report(paths, locks_report.locks.thresholds())


def figures_text(result, finding):
    """The figures that support a finding, in a few words."""
    from cozprof.locks_report import fmt_pct, fmt_rate, fmt_time

    if finding["category"] == "load-imbalance":
        imb = result["load_imbalance"]
        shares = ", ".join(f"{g['group']} {fmt_pct(g['waiting_share'])}" for g in imb["groups"]
                           if g["group"] in imb["compared"])
        return f"waiting {shares}; suggested " + \
            "-".join(f"{s['share']:.2f}" for s in imb["suggested"])
    e = next(x for x in result["locks"] if x["key"] == finding["lock"])
    g = e["figures"]
    objects = f"{e['objects']} object{'s' if e['objects'] != 1 else ''}" + \
        (" and more" if e["folded_objects"] else "")
    text = (f"{fmt_rate(g['frequency'])}, {fmt_pct(g['contention'])} contended, "
            f"{fmt_pct(g['waiting_share'])} waiting, hold {fmt_time(g['mean_hold_ns'])}, {objects}, "
            f"{e['threads']} thread{'s' if e['threads'] != 1 else ''} max")
    if finding["category"] == "asymmetric-contention":
        a = e["asymmetry"]
        if a["measure"] == "traffic":
            text += f"; busiest takes {fmt_pct(a['hot_acquisition_share'])} of acquisitions ({a['measure']})"
        else:
            text += (f"; hottest {a['hottest']['contention']:.2%} vs coolest "
                     f"{a['coolest']['contention']:.2%} ({a['measure']})")
    return text


def causal_text(finding):
    from cozprof.locks_report import fmt_pct, short_path

    c = finding.get("best_causal")
    if not c:
        return "-"
    return f"{os.path.basename(short_path(c['line']))} {fmt_pct(c['predicted']['0.5'], True)}@50%"


def assignments(total, groups=3):
    """Every way to share `total` threads among `groups` stages, one at least each."""
    for cut in itertools.combinations(range(1, total), groups - 1):
        bounds = (0, *cut, total)
        yield tuple(bounds[i + 1] - bounds[i] for i in range(groups))


def imbalance_trial(binary, reps, short):
    """Time every assignment of the threads (the default one included); returns
    {assignment: median seconds} and the fastest assignment."""
    every = list(assignments(sum(IMBALANCE_DEFAULT)))
    medians = timed(binary, [dict(zip(IMBALANCE_POOLS, a)) for a in every], reps, short)
    table = dict(zip(every, medians))
    return table, min(table, key=table.get)


def measure(name, build_dirs, libcoz, workdir, args, reps, failures):
    """One program's row: what coz locks reports, and the measured gain of the
    fix. The two parts fail separately (each failure is listed)."""
    spec = PROGRAMS[name]
    row = {"program": name, "expected": spec["category"], "expected_quadrant": spec["quadrant"],
           "fix": spec["fix_text"], "errors": []}

    def fail(what, e):
        lines = str(e).splitlines()
        why = next((ln for ln in lines[1:] if ln.startswith("coz: error")), None)
        msg = f"{name}: {what}: {lines[0]}" + (f" ({why})" if why else "")
        row["errors"].append(msg)
        failures.append(msg)

    try:
        binary = benchlib.find_program(build_dirs, name)
    except BenchError as e:
        fail("not built", e)
        return row
    suggested = None
    try:
        result = report(name, binary, libcoz, workdir, args.short, not args.no_causal,
                        args.causal_scale)
        findings = result["findings"]
        if not findings:
            raise BenchError(f"coz locks reports nothing: {result['diagnosis']}")
        top = findings[0]
        row.update(category=top["category"], quadrant=top["quadrant"],
                   figures=figures_text(result, top), causal=causal_text(top))
        row["classified"] = top["category"] == spec["category"] and top["quadrant"] == spec["quadrant"]
        if not row["classified"]:
            fail("misclassified", f"reported {top['category']} {top['quadrant']}, expected "
                                  f"{spec['category']} {spec['quadrant']}")
        if name == "locks_imbalance":
            order = {s["group"]: s["suggested"] for s in result["load_imbalance"]["suggested"] or ()}
            suggested = tuple(order.get(f"stage{k}", 0) for k in (1, 2, 3))
            if sum(suggested) != sum(IMBALANCE_DEFAULT) or min(suggested) < 1:
                raise BenchError(f"no suggestion for stage1..3 in {order}")
            row["suggested"] = list(suggested)
    except BenchError as e:
        fail("coz locks", e)
    try:
        if name == "locks_imbalance":
            table, best = imbalance_trial(binary, reps, args.short)
            bug = table[IMBALANCE_DEFAULT]
            row.update(best=list(best), bug_s=bug, trial={"-".join(map(str, a)): t for a, t in table.items()})
            if suggested is not None:
                row.update(fixed_s=table[suggested], gain=1 - table[suggested] / bug,
                           suggested_vs_best=table[suggested] / table[best] - 1,
                           fix="t1={} t2={} t3={}".format(*suggested))
                if table[suggested] > (1 + SUGGESTION_TOLERANCE) * table[best]:
                    fail("suggestion", f"the suggested assignment {suggested} takes "
                                       f"{table[suggested]:.3f} s, more than "
                                       f"{SUGGESTION_TOLERANCE:.0%} over the best {best} "
                                       f"({table[best]:.3f} s)")
        else:
            bug, fixed = timed(binary, [{}, spec["fix"]], reps, args.short)
            row.update(bug_s=bug, fixed_s=fixed, gain=1 - fixed / bug)
    except BenchError as e:
        fail("timing", e)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="tiny inputs, one repetition (smoke test)")
    ap.add_argument("--only", action="append", choices=sorted(PROGRAMS), help="only this program")
    ap.add_argument("--reps", type=int, default=None, help="timed runs of each variant (default 5)")
    ap.add_argument("--build", action="append", help="build directory (repeatable)")
    ap.add_argument("--causal-scale", type=int, default=4,
                    help="the causal run does this many times the default work (default 4)")
    ap.add_argument("--no-causal", action="store_true", help="skip the causal runs")
    args = ap.parse_args(argv)
    reps = args.reps or (1 if args.short else 5)
    build_dirs = args.build or benchlib.default_build_dirs()
    libcoz = benchlib.find_libcoz(build_dirs)
    if not libcoz:
        print("locks.py: libcoz.so is not built; build the project first", file=sys.stderr)
        return 1
    rows, failures = [], []
    with tempfile.TemporaryDirectory(prefix="coz-locks-") as workdir:
        for name in args.only or PROGRAMS:
            row = measure(name, build_dirs, libcoz, workdir, args, reps, failures)
            rows.append(row)
    print_table(rows)
    print(json.dumps({"summary": "locks", "machine": benchlib.machine_description(),
                      "load_average": benchlib.load_average(), "reps": reps,
                      "rows": rows, "failures": failures}))
    return 1 if failures else 0


def print_table(rows):
    header = ["program", "reported", "Q", "figures", "fix", "bug s", "fixed s", "gain", "causal"]
    body = []
    for r in rows:
        mark = "" if r.get("classified", True) else \
            f" (expected {r['expected']} {r['expected_quadrant'] or ''})".replace(" )", ")")
        body.append([r["program"], (r.get("category") or "-") + mark, r.get("quadrant") or "-",
                     r.get("figures", "-"), r["fix"],
                     f"{r['bug_s']:.3f}" if "bug_s" in r else "-",
                     f"{r['fixed_s']:.3f}" if "fixed_s" in r else "-",
                     f"{r['gain']:+.1%}" if "gain" in r else "-", r.get("causal", "-")])
    widths = [max(len(x[c]) for x in body + [header]) for c in range(len(header))]
    for line in [header] + body:
        print("  ".join(line[c].ljust(widths[c]) for c in range(len(line))).rstrip())
    for r in rows:
        if "trial" in r:
            sugg = "-".join(map(str, r["suggested"])) if "suggested" in r else "unknown"
            vs = f", suggested vs best {r['suggested_vs_best']:+.1%}" if "suggested_vs_best" in r else ""
            print(f"\nlocks_imbalance: every assignment of {sum(IMBALANCE_DEFAULT)} threads "
                  f"(t1-t2-t3: median seconds); suggested {sugg}, best "
                  f"{'-'.join(map(str, r['best']))}{vs}")
            print("  " + "  ".join(f"{a} {t:.3f}" for a, t in sorted(r["trial"].items(), key=lambda kv: kv[1])))
    for r in rows:
        for e in r["errors"]:
            print(f"error: {e}")


if __name__ == "__main__":
    sys.exit(main())
