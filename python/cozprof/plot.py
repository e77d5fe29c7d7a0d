"""`coz plot`: causal plots with matplotlib, one panel per top line (or one HTML page)."""

import math
import os
import shlex
import sys

from . import report
from .errors import CozError

DEFAULT_LINES = 9
FORMATS = (".png", ".svg", ".pdf")


def add_arguments(p):
    report.add_common_analysis_options(p)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="image to write: .png, .svg or .pdf")
    p.add_argument("--line", action="append", metavar="FILE:LINE",
                   help="plot this line, call site or function (repeatable; FILE:LINE matches "
                        "the end of the path, a function is named as the report names it)")
    p.add_argument("--html", metavar="FILE",
                   help="write one self-contained HTML page with every causal plot "
                        "('-': standard output)")


def _named(entry_name, wanted):
    return entry_name == wanted or entry_name.endswith("/" + wanted)


def select_lines(result, wanted=None, limit=None):
    """The LINE entries to draw: those named by `wanted` (file:line suffixes, or
    function names), top first. A line that is also a call site gives both."""
    lines = result["lines"]
    if wanted:
        chosen = []
        for w in wanted:
            match = [ln for ln in lines if _named(ln["line"], w)]
            if not match:
                known = [o for o in result["omitted"] if _named(o["line"], w)]
                why = f" (left out: {known[0]['detail']})" if known else ""
                raise CozError(f"no causal curve for line {w}{why}",
                               hint="'coz report' lists the lines that have one")
            chosen.extend(m for m in match if m not in chosen)
        lines = chosen
    return lines[:limit if limit is not None else DEFAULT_LINES]


def require_matplotlib():
    """Import matplotlib for drawing; a CozError naming the fix when it cannot be."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError as e:
        raise CozError(f"coz plot needs matplotlib to draw images, and it cannot be imported ({e})",
                       hint=f"install it: {shlex.quote(sys.executable)} -m pip install matplotlib "
                            "(on Debian: apt install python3-matplotlib); --html needs no matplotlib") from None
    return Figure


def make_figure(lines):
    """A matplotlib Figure with one causal-plot panel per entry of `lines`."""
    Figure = require_matplotlib()
    import numpy as np

    n = len(lines)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for k in range(rows * cols):
        ax = axes[k // cols][k % cols]
        if k >= n:
            ax.remove()
            continue
        ln = lines[k]
        xs = np.array([p["speedup"] for p in ln["points"]]) * 100
        ys = np.array([p["program_speedup"] for p in ln["points"]]) * 100
        lo = np.array([p["ci"][0] for p in ln["points"]]) * 100
        hi = np.array([p["ci"][1] for p in ln["points"]]) * 100
        yerr = np.vstack([np.maximum(ys - lo, 0), np.maximum(hi - ys, 0)])
        ax.errorbar(xs, ys, yerr=yerr, fmt="o", ms=4, capsize=2, color="tab:blue",
                    label="measured")
        grid = np.linspace(0, 100, 101)
        fit = (ln["intercept"] + ln["slope"] * grid / 100) * 100
        band_lo = (ln["intercept"] + np.minimum(ln["slope_ci"][0], ln["slope_ci"][1])
                   * grid / 100) * 100
        band_hi = (ln["intercept"] + np.maximum(ln["slope_ci"][0], ln["slope_ci"][1])
                   * grid / 100) * 100
        ax.fill_between(grid, band_lo, band_hi, color="tab:orange", alpha=0.2,
                        label="95% slope interval")
        ax.plot(grid, fit, color="tab:orange", lw=1.5, label="fit")
        ax.axhline(0, color="0.6", lw=0.8)
        title = panel_title(ln)
        if ln["contention"]:
            title += " (contention)"
        ax.set_title(title, fontsize=10)
        ax.set_xlim(0, 100)
        ax.set_xlabel(f"{UNIT_WORDS.get(ln.get('unit', 'line'), 'line')} speedup (%)")
        ax.set_ylabel(f"program speedup (%)\n{_short(ln['progress_point'])}", fontsize=8)
        ax.tick_params(labelsize=8)
    return fig


UNIT_WORDS = {"line": "line", "function": "function", "callsite": "call site"}


def panel_title(ln):
    """'app.c:12', 'call site app.c:30', 'function work()', with the unit's
    off-CPU category when most of its samples are waits ('app.c:46 [sleep]')."""
    unit = ln.get("unit", "line")
    if unit == "function":
        title = f"function {_short(ln['line'], 32)}"
    else:
        title = f"{os.path.basename(ln['file'])}:{ln['lineno']}"
        if unit == "callsite":
            title = "call site " + title
    category = ln.get("category")
    if category not in (None, "cpu"):
        title += f" [{category}]"
    return title


def _short(name, width=40):
    return name if len(name) <= width else "..." + name[-(width - 3):]


def run(args):
    if not args.output and not args.html:
        raise CozError("nothing to write", hint="give -o FILE.png|svg|pdf, or --html FILE.html")
    if not args.output:
        for flag, given in (("--line", args.line), ("-n", args.lines is not None)):
            if given:
                raise CozError(f"{flag} applies to -o (the image), not to --html",
                               hint=f"the page has every causal plot: drop {flag}, or add -o FILE.png")
    if args.output and os.path.splitext(args.output)[1].lower() not in FORMATS:
        raise CozError(f"cannot tell the image format of '{args.output}'",
                       hint="end the file name in .png, .svg or .pdf")
    if args.output:
        require_matplotlib()  # before the analysis, which may take a while
    result = report.analyze_args(args)
    if args.html:
        from . import html_export  # written by the viewer side; imported only when used
        html_export.write(result, args.html)
        if args.html != "-":
            print(f"coz: wrote {args.html}", file=sys.stderr)
    if args.output:
        lines = select_lines(result, args.line, args.lines)
        if not lines:
            raise CozError("no line has a causal curve to plot",
                           hint=result["diagnosis"] or "see 'coz report'")
        fig = make_figure(lines)
        try:
            fig.savefig(args.output, dpi=110)
        except OSError as e:
            raise CozError(f"cannot write {args.output}: {e.strerror}",
                           hint="choose a writable path for -o") from None
        print(f"coz: wrote {args.output} ({len(lines)} panel{'s' if len(lines) != 1 else ''})",
              file=sys.stderr)
    return 0
