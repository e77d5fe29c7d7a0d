"""`coz report`: a ranked table of lines, or the whole analysis as JSON."""

import argparse
import json
import os
import stat
import sys

from . import analysis
from .errors import CozError

DEFAULT_PROFILE = "profile.coz"


def add_common_analysis_options(p):
    """Options shared by `coz report` and `coz plot`."""
    p.add_argument("profiles", nargs="*", metavar="PROFILE",
                   help="profile files to merge (default profile.coz)")
    p.add_argument("-n", "--lines", type=_positive_int, default=None, metavar="N",
                   help="show at most N lines")
    p.add_argument("--progress-point", metavar="NAME",
                   help="only use this progress point")
    p.add_argument("--no-phase-correction", action="store_true",
                   help="do not apply the phase correction (eq. 8 of the COZ paper)")
    p.add_argument("--min-points", type=_positive_int, default=None, metavar="N",
                   help=f"distinct speedups, 0%% included, a line needs (default "
                        f"{analysis.DEFAULT_MIN_POINTS})")
    p.add_argument("--all-runs", action="store_true",
                   help="analyse every run of each profile, not only those of its latest build "
                        "(program and build-id)")


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {text!r}")
    return v


def add_arguments(p):
    add_common_analysis_options(p)
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the whole analysis as JSON to FILE ('-' or nothing: standard "
                        "output) instead of the table")
    add_conventional_arguments(p)


def analysis_options(args):
    """The keywords of analysis.analyze that the common options give."""
    return {"phase_correction": not args.no_phase_correction,
            "progress_point": args.progress_point,
            "min_points": analysis.DEFAULT_MIN_POINTS if args.min_points is None else args.min_points}


def analysis_flags_given(args):
    """The common options of the causal analysis given on the command line."""
    return [flag for flag, given in (("--progress-point", args.progress_point is not None),
                                     ("--no-phase-correction", args.no_phase_correction),
                                     ("--min-points", args.min_points is not None)) if given]


def analyze_args(args):
    """Run the analysis the common options ask for. When runs of older builds were
    left out, say so in one line on standard error (it is also the first warning)."""
    paths = args.profiles or [DEFAULT_PROFILE]
    result = analysis.analyze_files(paths, all_runs=args.all_runs, **analysis_options(args))
    if result["summary"]["runs_left_out"]:
        print(f"coz: warning: {result['warnings'][0]}", file=sys.stderr)
    return result


def _looks_like_profile(path):
    """True when writing to `path` would overwrite a profile: a .coz name, or a
    regular file that begins like one. Only a regular file is read: reading a pipe
    or a terminal named as the output (/dev/stdout, >(cmd)) would wait forever."""
    if path.endswith(".coz"):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.startswith((b'{"type":"startup"', b"startup\t"))


def run(args):
    if wants_conventional(args):
        return run_conventional(args)
    if args.json not in (None, "-") and _looks_like_profile(args.json):
        # `coz report --json other.coz` reads as "write JSON to other.coz".
        raise CozError(f"--json {args.json} would overwrite what looks like a profile",
                       hint=f"name the profiles first and the JSON file last: "
                            f"coz report {args.json} --json analysis.json")
    if args.json is not None and args.lines is not None:
        raise CozError("-n applies to the table, not to --json",
                       hint="drop -n: the JSON holds every line")
    result = analyze_args(args)
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
    printed = result["warnings"][:1] if result["summary"]["runs_left_out"] else ()
    sys.stdout.write(format_report(result, limit=args.lines, already_printed=printed))
    return 0


def _pct(v, signed=True):
    return f"{v * 100:+.1f}%" if signed else f"{v * 100:.1f}%"


# The `phase` column appears when some curve was scaled by less than this
# (eq. 8: the line ran in only part of the run, docs/analysis.md section 3).
PHASE_SHOWN = 0.95


def format_report(result, limit=None, already_printed=()):
    """The table `coz report` prints, as one string (without the warnings in
    `already_printed`, which went to standard error).

    Columns appear as the result needs them: `unit` when any curve is of a
    function or a call site (a function's row is then followed by its lines
    and the call sites that call it, indented), `progress point` when several
    points have curves, `time` (the unit's samples on and off the CPU) when
    any curve has off-CPU samples, `phase` (the phase correction's factor)
    when any curve's is under PHASE_SHOWN. `-n` limits the top-level rows."""
    out = []
    s = result["summary"]
    out.append(f"{s['runs']} run{'s' if s['runs'] != 1 else ''}, {s['experiments']} experiments "
               f"({s['partial_experiments']} partial), runtime {s['runtime_ns'] / 1e9:.2f} s; "
               f"phase correction {'on' if result['phase_correction'] else 'off'}")
    for w in result["warnings"]:
        if w not in already_printed:
            out.append(f"warning: {w}")
    lines = result["lines"]
    if result["diagnosis"]:
        out.append("")
        out.append(f"nothing to report: {result['diagnosis']}")
    rows_in_order = _nested_rows(lines)
    tops = [r for r in rows_in_order if r[1] == 0]
    if limit is not None and len(tops) > limit:
        cut = rows_in_order.index(tops[limit])
        shown = rows_in_order[:cut]
    else:
        shown = rows_in_order
    several_points = len({ln["progress_point"] for ln in lines}) > 1
    with_units = any(ln.get("unit", "line") != "line" for ln in lines)
    with_time = any(ln.get("off_cpu") for ln in lines)
    with_phase = result["phase_correction"] and any(ln.get("phase_factor", 1.0) < PHASE_SHOWN for ln in lines)
    if shown:
        header = ["#", "line", "impact", "slope [95% CI]", "@25%", "@50%", "@100%", "exps"]
        if with_phase:
            header.insert(len(header) - 1, "phase")
        if with_units:
            header[1:2] = ["unit", "name"]
        at = header.index("impact")
        if with_time:
            header.insert(at, "time")
        if several_points:
            header.insert(header.index("time") if with_time else at, "progress point")
        rank = {id(ln): i for i, ln in enumerate(lines, 1)}
        rows = []
        for ln, depth in shown:
            p = ln["predicted"]
            slope = f"{ln['slope']:+.3f} [{ln['slope_ci'][0]:+.3f}, {ln['slope_ci'][1]:+.3f}]"
            if ln["contention"]:
                slope += " contention"
            name = ("  " * depth + "- " if depth else "") + ln["line"]
            row = [str(rank[id(ln)]), name]
            if with_units:
                row.insert(1, UNIT_LABELS.get(ln.get("unit", "line"), ln.get("unit", "")))
            if several_points:
                row.append(ln["progress_point"])
            if with_time:
                row.append(time_mix(ln))
            row += [_pct(ln["impact"]), slope, _pct(p["0.25"]), _pct(p["0.5"]), _pct(p["1.0"])]
            if with_phase:
                row.append(f"x{ln.get('phase_factor', 1.0):.2f}")
            row.append(str(ln["experiments"]))
            rows.append(row)
        widths = [max(len(r[c]) for r in rows + [header]) for c in range(len(header))]
        right = {0, len(header) - 1} | {c for c, h in enumerate(header) if h.startswith(("impact", "@", "phase"))}

        def fmt(r):
            return "  ".join(r[c].rjust(widths[c]) if c in right else r[c].ljust(widths[c])
                             for c in range(len(r))).rstrip()
        out.append("")
        out.append(fmt(header))
        out.extend(fmt(r) for r in rows)
        hidden = len(tops) - (limit if limit is not None and len(tops) > limit else len(tops))
        if hidden:
            noun = ("row" if with_units else "line") + ("s" if hidden != 1 else "")
            out.append(f"({hidden} more {noun}; use -n to show more)")
    omitted = result["omitted"]
    if omitted:
        reasons = {}
        for o in omitted:
            reasons[o["reason"]] = reasons.get(o["reason"], 0) + 1
        why = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        out.append("")
        out.append(f"{len(omitted)} {'unit' if with_units else 'line'}/progress-point pairs left out: "
                   f"{why} (see 'coz report --json' for details)")
    groups = result.get("thread_groups") or []
    if groups:
        out.append("")
        out.extend(format_thread_groups(groups))
    return "\n".join(out) + "\n"


UNIT_LABELS = {"line": "line", "function": "function", "callsite": "call site"}
MIX_PARTS = 2         # categories shown in the `time` column
MIX_MIN_SHARE = 0.01  # ... each with at least this share


def time_mix(ln):
    """'cpu 62% io 38%': the unit's largest categories of samples, on and off the CPU."""
    if ln.get("on_cpu_share") is None:
        return "-"
    parts = [("cpu", ln["on_cpu_share"])] + list(ln.get("off_cpu", {}).items())
    parts = [p for p in sorted(parts, key=lambda kv: -kv[1]) if p[1] >= MIX_MIN_SHARE][:MIX_PARTS]
    return " ".join(f"{k} {v * 100:.0f}%" for k, v in parts) or "-"


def _nested_rows(lines):
    """[(curve, depth)]: curves by impact; a function's curve is followed by the
    curves it `contains` and those it is `called_from` (same progress point),
    which are not repeated at the top."""
    by_key = {(ln.get("unit", "line"), ln["line"], ln["progress_point"]): ln for ln in lines}
    placed = set()
    children = {}
    for ln in lines:
        if ln.get("unit") != "function":
            continue
        kids = [by_key.get(("line", n, ln["progress_point"])) for n in ln.get("contains", ())]
        kids += [by_key.get(("callsite", n, ln["progress_point"])) for n in ln.get("called_from", ())]
        kids = [k for k in kids if k is not None and id(k) not in placed and k is not ln]
        placed.update(id(k) for k in kids)
        children[id(ln)] = kids
    rank = {id(ln): i for i, ln in enumerate(lines)}
    out = []
    for ln in lines:
        if id(ln) in placed:
            continue
        out.append((ln, 0))
        for k in sorted(children.get(id(ln), ()), key=lambda k: rank[id(k)]):
            out.append((k, 1))
    return out


CALL_KINDS = ("io", "lock", "sleep", "sync")  # wait categories timed around interposed calls
CALLS_PAST_OFF = 0.05  # calls' time beyond `off` (share of the wall time) that is pointed out


def format_thread_groups(groups):
    """bperf's breakdown per thread group: wall time, and the share of it on the
    CPU, in each wait category, off the CPU of the threads' own accord (`off`,
    from the switch records; `-` without them), and unaccounted (`rest`:
    mostly the profiler's own pauses). A last line names the groups whose
    calls took much more time than they spent off the CPU."""
    from .profile import WAIT_KINDS

    header = ["thread group", "threads", "wall", "cpu", *WAIT_KINDS, "off", "rest"]
    rows = []
    past = []
    for g in groups:
        wall = g["wall_ns"]

        def share(v):
            return f"{v / wall * 100:.0f}%" if wall and v is not None else "-"
        off = g.get("off_cpu_ns")
        rows.append([g["group"] or "?", str(g["threads"]), f"{wall / 1e9:.2f}s", share(g["cpu_ns"]),
                     *(share(g["wait_ns"][k]) for k in WAIT_KINDS), share(off), share(g["rest_ns"])])
        calls = sum(g["wait_ns"][k] for k in CALL_KINDS)
        if off is not None and wall and calls - off > CALLS_PAST_OFF * wall:
            past.append(f"{g['group'] or '?'} (calls {share(calls)}, off {share(off)})")
    widths = [max(len(r[c]) for r in rows + [header]) for c in range(len(header))]
    lines = ["where the threads' time went (share of their wall time):"]
    for r in [header] + rows:
        lines.append("  ".join(r[c].ljust(widths[c]) if c == 0 else r[c].rjust(widths[c])
                               for c in range(len(r))).rstrip())
    if past:
        lines.append("io, lock, sleep and sync are the time inside those calls, off the time off the CPU: "
                     f"in {', '.join(past)} the rest of the calls' time was the kernel's work for them "
                     "(in cpu) or preemption during them (in sched)")
    return lines


# -- the conventional profile: --top, --list, --stat (where the time goes) ---------

def add_conventional_arguments(p):
    """Options of the conventional views. They read the stacks and counters of
    the profile, not the experiments (docs/commands.md, "Where the time goes")."""
    g = p.add_argument_group("where the time goes (the conventional profile)")
    g.add_argument("--top", action="store_true",
                   help="flat, flat%%, sum%%, cum, cum%% per function (pprof -top); "
                        "-n N rows (default 30)")
    g.add_argument("--list", dest="list_pattern", metavar="REGEX", default=None,
                   help="source of the functions matching REGEX with per-line flat, cum and "
                        "causal impact (pprof -list)")
    g.add_argument("--stat", action="store_true",
                   help="perf stat-style counters of each run")
    g.add_argument("--by", choices=("function", "line"), default=None,
                   help="--top rows: per function (default) or per source line")
    g.add_argument("--kind", default=None, metavar="KINDS",
                   help="samples counted: cpu (default), off (every wait), all, or a list of "
                        "cpu,io,lock,sleep,sync,sched,other")
    g.add_argument("--value", choices=("time", "samples"), default=None,
                   help="show the time samples stand for (default) or sample counts")
    g.add_argument("--sort", choices=("flat", "cum"), default=None,
                   help="order of --top rows (default flat)")


def wants_conventional(args):
    """A view of the conventional profile is asked (or one of its options, which
    `_conventional_options` then refuses alone)."""
    # (`is not None`, not truth: `--list ''` lists every function.)
    return any(getattr(args, name, None) not in (None, False) for name in
               ("top", "list_pattern", "stat", "by", "kind", "value", "sort"))


def _conventional_options(args):
    """Validate the options of the views; returns (kinds, value)."""
    from . import conventional

    for name, flag in (("by", "--by"), ("sort", "--sort")):
        if getattr(args, name) is not None and not args.top:
            raise CozError(f"{flag} applies to --top",
                           hint=f"coz report --top {flag} {getattr(args, name)}")
    listing = args.list_pattern is not None
    if (args.kind is not None or args.value is not None) and not (args.top or listing):
        flag = "--kind" if args.kind is not None else "--value"
        raise CozError(f"{flag} applies to --top and --list",
                       hint="add --top (functions by time) or --list REGEX (a function's source)")
    if args.json is not None and (listing or (args.top and args.stat)):
        raise CozError("--json writes one view: --top or --stat alone",
                       hint="coz report --top --json out.json, or coz report --stat --json -")
    if args.lines is not None and args.top and args.json is not None:
        raise CozError("-n applies to the --top table, not to --json", hint="drop -n: the JSON holds every row")
    if args.lines is not None and not args.top:
        raise CozError("-n applies to the causal table and --top, not to --list or --stat",
                       hint="drop -n, or add --top (its rows)")
    given = analysis_flags_given(args)
    if given and not listing:
        raise CozError(f"{given[0]} applies to the causal table and --list, not to --top or --stat",
                       hint=f"drop {given[0]}, or add --list REGEX (its causal column)")
    kinds = conventional.parse_kinds(args.kind) if args.kind is not None else conventional.DEFAULT_KINDS
    return kinds, args.value or "time"


def load_for_views(args):
    """The profiles named (default profile.coz), latest builds only unless
    --all-runs; the note about left-out runs goes to standard error."""
    from . import profile as profile_mod

    prof = profile_mod.load(args.profiles or [DEFAULT_PROFILE])
    if not args.all_runs:
        prof = prof.latest_builds()
        if prof.build_note:
            print(f"coz: warning: {prof.build_note}", file=sys.stderr)
    for w in prof.warnings:
        print(f"coz: warning: {w}", file=sys.stderr)
    return prof


def run_conventional(args):
    from . import conventional, stat, views

    kinds, value = _conventional_options(args)
    prof = load_for_views(args)
    parts = []
    if args.stat:
        stat.require_counters(prof)
        if args.json is not None:
            return _write_json(args.json, {"runs": [s for s in map(stat.run_stat, prof.runs) if s]})
        parts.append(stat.format_stat(prof))
    if args.top or args.list_pattern is not None:
        conventional.require_stacks(prof)
    if args.top:
        table = conventional.aggregate(prof, by=args.by or "function", kinds=kinds)
        if args.json is not None:
            rows = table.sorted(args.sort or "flat", value)
            return _write_json(args.json, {
                "by": table.by, "kinds": sorted(kinds), "total_samples": table.total,
                "total_ns": table.total_ns, "rows": [r.as_dict() for r in rows]})
        parts.append(views.format_top(prof, table, limit=args.lines, sort=args.sort or "flat",
                                      value=value))
    if args.list_pattern is not None:
        causal = {}
        if prof.experiments:
            from . import analysis

            result = analysis.analyze(prof, **analysis_options(args))
            causal = views.causal_by_line(result)
        parts.append(views.format_list(prof, args.list_pattern, kinds, value=value, causal=causal))
    sys.stdout.write("\n".join(parts))
    return 0


def _write_json(dest, data):
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    if dest == "-":
        sys.stdout.write(text)
        return 0
    if _looks_like_profile(dest):
        raise CozError(f"--json {dest} would overwrite what looks like a profile",
                       hint=f"name the profiles first and the JSON file last: "
                            f"coz report {dest} --top --json top.json")
    try:
        with open(dest, "w") as f:
            f.write(text)
    except OSError as e:
        raise CozError(f"cannot write {dest}: {e.strerror}",
                       hint="choose a writable path, or '--json -' for standard output") from None
    print(f"coz: wrote {dest}", file=sys.stderr)
    return 0
