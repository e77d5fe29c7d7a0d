"""`coz report`: a ranked table of lines, or the whole analysis as JSON."""

import argparse
import json
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
    p.add_argument("--min-points", type=_positive_int, default=analysis.DEFAULT_MIN_POINTS,
                   metavar="N",
                   help="distinct speedups, 0%% included, a line needs (default 3)")
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


def analyze_args(args):
    """Run the analysis the common options ask for. When runs of older builds were
    left out, say so in one line on standard error (it is also the first warning)."""
    paths = args.profiles or [DEFAULT_PROFILE]
    result = analysis.analyze_files(paths, all_runs=args.all_runs,
                                    phase_correction=not args.no_phase_correction,
                                    progress_point=args.progress_point,
                                    min_points=args.min_points)
    if result["summary"]["runs_left_out"]:
        print(f"coz: warning: {result['warnings'][0]}", file=sys.stderr)
    return result


def _looks_like_profile(path):
    if path.endswith(".coz"):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.startswith((b'{"type":"startup"', b"startup\t"))


def run(args):
    if args.json not in (None, "-") and _looks_like_profile(args.json):
        # `coz report --json other.coz` reads as "write JSON to other.coz".
        raise CozError(f"--json {args.json} would overwrite what looks like a profile",
                       hint=f"name the profiles first and the JSON file last: "
                            f"coz report {args.json} --json analysis.json")
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


def format_report(result, limit=None, already_printed=()):
    """The table `coz report` prints, as one string (without the warnings in
    `already_printed`, which went to standard error)."""
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
    shown = lines if limit is None else lines[:limit]
    several_points = len({ln["progress_point"] for ln in lines}) > 1
    if shown:
        header = ["#", "line", "impact", "slope [95% CI]", "@25%", "@50%", "@100%", "exps"]
        if several_points:
            header.insert(2, "progress point")
        rows = []
        for i, ln in enumerate(shown, 1):
            p = ln["predicted"]
            slope = f"{ln['slope']:+.3f} [{ln['slope_ci'][0]:+.3f}, {ln['slope_ci'][1]:+.3f}]"
            if ln["contention"]:
                slope += " contention"
            row = [str(i), ln["line"], _pct(ln["impact"]), slope, _pct(p["0.25"]),
                   _pct(p["0.5"]), _pct(p["1.0"]), str(ln["experiments"])]
            if several_points:
                row.insert(2, ln["progress_point"])
            rows.append(row)
        widths = [max(len(r[c]) for r in rows + [header]) for c in range(len(header))]
        right = {0, len(header) - 1} | {c for c, h in enumerate(header) if h.startswith(("impact", "@"))}

        def fmt(r):
            return "  ".join(r[c].rjust(widths[c]) if c in right else r[c].ljust(widths[c])
                             for c in range(len(r))).rstrip()
        out.append("")
        out.append(fmt(header))
        out.extend(fmt(r) for r in rows)
        if len(shown) < len(lines):
            out.append(f"({len(lines) - len(shown)} more lines; use -n to show more)")
    omitted = result["omitted"]
    if omitted:
        reasons = {}
        for o in omitted:
            reasons[o["reason"]] = reasons.get(o["reason"], 0) + 1
        why = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        out.append("")
        out.append(f"{len(omitted)} line/progress-point pairs left out: {why} "
                   "(see 'coz report --json' for details)")
    return "\n".join(out) + "\n"
