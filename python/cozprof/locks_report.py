"""`coz locks`: SyncPerf's lock and load-imbalance report (a ranked table, or
the docs/locks.md JSON)."""

import json
import math
import os
import sys

from . import locks
from . import profile as profile_mod
from .errors import CozError
from .launcher import parse_time

DEFAULT_PROFILE = "profile.coz"


def add_arguments(p):
    p.add_argument("profiles", nargs="*", metavar="PROFILE",
                   help="profile files (default profile.coz)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the report as JSON (docs/locks.md) to FILE ('-' or nothing: "
                        "standard output) instead of the table")
    p.add_argument("--frequency", default=None, metavar="N",
                   help=f"acquisitions per second from which a lock is frequent (default "
                        f"{locks.FREQUENCY:g})")
    p.add_argument("--contention", default=None, metavar="PCT",
                   help=f"share of acquisitions that found a lock taken, or of its users' time "
                        f"spent waiting for it, from which it is contended, in percent (default "
                        f"{locks.CONTENTION * 100:g}); also the try-lock failure rate reported")
    p.add_argument("--long-hold", default=None, metavar="TIME",
                   help="mean critical section from which a rare contended lock is reported "
                        "(Q1; default 100us; units ns, us, ms, s; a bare number is in us)")
    p.add_argument("--short-hold", default=None, metavar="TIME",
                   help="mean critical section under which a frequent uncontended lock is "
                        "called a few instructions (default 1us)")
    p.add_argument("--asymmetry", default=None, metavar="RATIO",
                   help=f"how many times more contended (or, for the busiest, more used) a lock "
                        f"of a call site must be than the others to report asymmetric "
                        f"contention (default {locks.ASYMMETRY:g})")
    p.add_argument("--imbalance", default=None, metavar="PCT",
                   help=f"difference of the thread groups' waiting, in percent of their "
                        f"lifetime, reported as load imbalance (default {locks.IMBALANCE * 100:g})")
    p.add_argument("--pid", default=None, metavar="PID",
                   help="report on the run of this process (default: the last run without "
                        "experiments, else the last run with counters)")
    p.add_argument("--all-runs", action="store_true",
                   help="use every run of each profile, not only those of its latest build "
                        "(program and build-id)")


def _percent(text, what):
    t = text.strip()
    if t.endswith("%"):
        t = t[:-1]
    try:
        v = float(t)
    except ValueError:
        v = -1.0
    if not 0 < v < 100:
        raise CozError(f"bad {what} {text!r}", hint="give a percentage above 0 and below 100, e.g. 10")
    return v / 100.0


def _number(text, what, above):
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > above):  # float() also reads inf, nan and 1e999
        raise CozError(f"bad {what} {text!r}", hint=f"give a finite number above {above:g}")
    return v


def thresholds_from_args(args):
    """The thresholds the options ask for; raises CozError on a bad value."""
    kw = {}
    if args.frequency is not None:
        kw["frequency"] = _number(args.frequency, "--frequency", 0)
    if args.contention is not None:
        kw["contention"] = _percent(args.contention, "--contention")
    if args.long_hold is not None:
        kw["long_hold_ns"] = parse_time(args.long_hold, "us", "--long-hold")
    if args.short_hold is not None:
        kw["short_hold_ns"] = parse_time(args.short_hold, "us", "--short-hold")
    if args.asymmetry is not None:
        kw["asymmetry"] = _number(args.asymmetry, "--asymmetry", 1)
    if args.imbalance is not None:
        kw["imbalance"] = _percent(args.imbalance, "--imbalance")
    return locks.thresholds(**kw)


def _pid(text):
    if text is None:
        return None
    if not text.isdigit():
        raise CozError(f"bad --pid {text!r}", hint="give a process id, a whole number")
    return int(text)


def causal_analysis(prof):
    """(analysis, note): the causal analysis of the profile's experiments, or
    None and why there is none."""
    if not prof.experiments:
        return None, "the profile has no experiments: no causal predictions"
    try:
        from . import analysis
    except ImportError as e:
        return None, f"the causal analysis needs {getattr(e, 'name', None) or e}: no causal predictions"
    return analysis.analyze(prof), None


def build_report(paths, th, pid=None, all_runs=False):
    prof = profile_mod.load(paths)
    selected = prof if all_runs else prof.latest_builds()
    causal, note = causal_analysis(selected)
    result = locks.analyze_locks(selected, pid=pid, th=th, causal=causal, causal_note=note)
    if selected.build_note:
        result["warnings"].insert(0, selected.build_note)
    return result


def run(args):
    if args.json not in (None, "-") and args.json.endswith(".coz"):
        raise CozError(f"--json {args.json} would overwrite what looks like a profile",
                       hint=f"name the profiles first and the JSON file last: "
                            f"coz locks {args.json} --json locks.json")
    th = thresholds_from_args(args)
    result = build_report(args.profiles or [DEFAULT_PROFILE], th, pid=_pid(args.pid),
                          all_runs=args.all_runs)
    if args.json is not None:
        text = json.dumps(result, indent=1, allow_nan=False) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
            return 0
        try:
            with open(args.json, "w") as f:
                f.write(text)
        except OSError as e:
            raise CozError(f"cannot write {args.json}: {e.strerror}",
                           hint="choose a writable path, or '--json -' for standard output") from None
        print(f"coz: wrote {args.json}", file=sys.stderr)
        return 0
    sys.stdout.write(format_report(result))
    return 0


# -- the table ------------------------------------------------------------------

def fmt_time(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def fmt_rate(v):
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:.1f}{unit}/s"
    return f"{v:.1f}/s" if v < 10 else f"{v:.0f}/s"


def fmt_pct(v, signed=False):
    return f"{v * 100:+.1f}%" if signed else f"{v * 100:.1f}%"


def short_path(line):
    """`path:line` with the path relative to the working directory when it is
    below it."""
    if not line:
        return "?"
    path, sep, tail = line.rpartition(":")
    if not sep:
        return line
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    return f"{rel if not rel.startswith('..') else path}:{tail}"


def _lock_name(e):
    name = f"{e['kind']} {short_path(e['site']) if e['site'] else hex(e['address'] or 0)}"
    if e["folded_objects"]:
        name += f" ({e['objects']} objects and more)"
    elif e["objects"] != 1:
        name += f" ({e['objects']} objects)"
    return name


def _causal_text(c):
    if c is None:
        return "-"
    return f"{short_path(c['line'])} {fmt_pct(c['predicted']['0.5'], True)}"


def _table(header, rows, right):
    widths = [max(len(r[c]) for r in rows + [header]) for c in range(len(header))]

    def fmt(r):
        return "  ".join(r[c].rjust(widths[c]) if c in right else r[c].ljust(widths[c])
                         for c in range(len(r))).rstrip()
    return [fmt(header)] + [fmt(r) for r in rows]


def format_report(result):
    """The text `coz locks` prints, as one string."""
    out = []
    r, th = result["run"], result["thresholds"]
    prog = os.path.basename(r["argv0"]) if r["argv0"] else "?"
    out.append(f"locks of {prog} (pid {r['pid']}, {r['mode']} run, {r['elapsed_ns'] / 1e9:.2f} s) "
               f"in {r['path']}; thresholds: {th['frequency']:g} acquisitions/s, "
               f"{th['contention']:.0%} contention, long critical sections "
               f"{fmt_time(th['long_hold_ns'])}, short {fmt_time(th['short_hold_ns'])}")
    if result["other_runs"]:
        pids = ", ".join(str(o["pid"]) for o in result["other_runs"][:5])
        more = len(result["other_runs"]) - 5
        out.append(f"note: {len(result['other_runs'])} other runs have counters (pids {pids}"
                   f"{f' and {more} more' if more > 0 else ''}); --pid chooses one")
    for w in result["warnings"]:
        out.append(f"warning: {w}")
    c = result["causal"]
    if not c["available"] and c["note"]:
        out.append(f"note: {c['note']}")
    by_key = {e["key"]: e for e in result["locks"]}
    lock_findings = [f for f in result["findings"] if f["lock"] is not None]
    if lock_findings:
        header = ["#", "category", "quadrant", "lock", "acq/s", "contention", "waiting",
                  "waited (mean)", "hold", "threads", "causal @50%"]
        rows = []
        for f in lock_findings:
            e = by_key[f["lock"]]
            g = e["figures"]
            contention = fmt_pct(g["contention"])
            category = f["category"]
            if f["basis"] == "trylock":
                category += " (try-lock)"
                contention = f"{fmt_pct(g['trylock_failure_rate'])} fail"
            rows.append([str(f["rank"]), category, f["quadrant"] or "-", _lock_name(e),
                         fmt_rate(g["frequency"]), contention, fmt_pct(g["waiting_share"]),
                         f"{fmt_time(g['wait_ns'])} ({fmt_time(g['mean_wait_ns'])})",
                         fmt_time(g["mean_hold_ns"]), str(e["threads"]),
                         _causal_text(f["best_causal"])])
        out.append("")
        out.extend(_table(header, rows, right={0, 4, 5, 6, 7, 8, 9}))
        for f in lock_findings:
            e = by_key[f["lock"]]
            out.append("")
            out.append(f"{f['rank']}. {f['category']}: {_lock_name(e)}: {f['reason']}")
            if e["asymmetry"] is not None and f["category"] == "asymmetric-contention":
                a = e["asymmetry"]
                lo, hi = a["acquisitions_range"]
                line = f"   acquisitions per object {lo} to {hi}"
                if a["measure"] != "traffic":
                    line += (f"; the hottest is contended {a['hottest']['contention']:.2%}, the "
                             f"coolest {a['coolest']['contention']:.2%} ({a['measure']})")
                out.append(line)
            if len(e["members_by_quadrant"]) > 0:
                counts = ", ".join(f"{q}: {n}" for q, n in sorted(e["members_by_quadrant"].items()))
                out.append(f"   objects by quadrant: {counts}")
            out.append(f"   fix: {f['suggestion']}")
            for s in e["critical_sections"][:3]:
                out.append("   " + _section_text(s))
    imb = result["load_imbalance"]
    if imb["groups"]:
        out.append("")
        if imb["imbalanced"]:
            f = next(f for f in result["findings"] if f["category"] == "load-imbalance")
            out.append(f"{f['rank']}. load-imbalance: {f['reason']} (waiting shares "
                       f"{fmt_pct(imb['spread'])} apart, more than {th['imbalance']:.0%})")
            if imb["suggested"] and all(s["threads"] == s["suggested"] for s in imb["suggested"]):
                out.append("   the threads are already shared out as suggested")
            out.append(f"   fix: {f['suggestion']}")
        else:
            spread = "" if imb["spread"] is None else \
                f"waiting shares within {fmt_pct(imb['spread'])} of each other"
            out.append(f"thread groups: no load imbalance{': ' + spread if spread else ''}")
        sugg = {s["group"]: s for s in imb["suggested"] or ()}
        header = ["group", "threads", "computing", "cpu", "waiting (share)", "suggested"]
        rows = []
        for g in imb["groups"]:
            s = sugg.get(g["group"])
            rows.append([g["group"], str(g["threads"]), fmt_time(g["computing_ns"]),
                         fmt_time(g["cpu_ns"]),
                         f"{fmt_time(g['sync_wait_ns'])} ({fmt_pct(g['waiting_share'])})",
                         f"{s['share']:.2f} -> {s['suggested']}" if s else "-"])
        out.extend("   " + ln for ln in _table(header, rows, right={1, 2, 3, 4}))
        if imb["slowest"] is not None:
            line = (f"   slowest group {imb['slowest']}: hottest line "
                    f"{short_path(imb['hottest_line']) + ' (' + fmt_time(imb['hottest_line_ns']) + ')' if imb['hottest_line'] else 'unknown (no stacks in the profile)'}")
            if imb["causal"]:
                line += (f"; causal: {fmt_pct(imb['causal']['predicted']['0.5'], True)} at 50% "
                         f"line speedup")
            out.append(line)
    if result.get("joins"):
        out.append("")
        out.extend(_joins_text(result["joins"]))
    if result["other_synchronization"]:
        n = len(result["other_synchronization"])
        waited = sum(e["figures"]["wait_ns"] for e in result["other_synchronization"])
        out.append("")
        out.append(f"{n} condition variables, barriers, semaphores or futexes waited "
                   f"{fmt_time(waited)} in all (listed by 'coz locks --json')")
    if result["diagnosis"]:
        out.append("")
        out.append(f"nothing to report: {result['diagnosis']}")
    return "\n".join(out) + "\n"


def _joins_text(joins):
    """Joins, per call site: calls, how many waited for a thread still running,
    and how long (the joiner waiting for other threads' work)."""
    calls = sum(e["figures"]["acquisitions"] for e in joins)
    waited = sum(e["figures"]["contended"] for e in joins)
    total = sum(e["figures"]["wait_ns"] for e in joins)
    out = [f"joins: {calls} at {len(joins)} site{'s' if len(joins) != 1 else ''}, {waited} waited for a "
           f"thread still running, {fmt_time(total)} in all"]
    header = ["join site", "calls", "waited", "total wait", "mean wait"]
    rows = [[short_path(e["site"]) if e["site"] else e["key"], str(e["figures"]["acquisitions"]),
             f"{e['figures']['contended']} ({fmt_pct(e['figures']['contention'])})",
             fmt_time(e["figures"]["wait_ns"]), fmt_time(e["figures"]["mean_wait_ns"])]
            for e in joins[:5]]
    out.extend("   " + ln for ln in _table(header, rows, right={1, 2, 3, 4}))
    if len(joins) > 5:
        out.append(f"   ... and {len(joins) - 5} more sites (listed by 'coz locks --json')")
    return out


def _section_text(s):
    if s["method"] == "unknown":
        where = f"acquired at {short_path(s['site'])} (source not found)"
    elif s["method"] == "held-samples":
        where = f"acquired at {short_path(s['site'])} ({len(s['lines'])} lines sampled while held)"
    elif s["release"]:
        first = short_path(s["site"])
        last = s["release"].rpartition(":")[2]
        where = f"critical section {first}-{last}"
    else:
        where = f"critical section {short_path(s['site'])} (one line)"
    if not s["causal"]:
        return where + ": no causal prediction for its lines"
    best = s["causal"][:2]
    return where + ": causal " + "; ".join(
        f"{short_path(c['line'])} ({c['role']}) {fmt_pct(c['predicted']['0.5'], True)} at 50%, "
        f"impact {fmt_pct(c['impact'], True)}" for c in best)
