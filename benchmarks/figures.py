#!/usr/bin/env python3
"""The generated parts of docs/benchmarks.md's "Latest figures", from ONE
run_all.sh invocation's OUTDIR.

Prints Markdown: the invocation (header.txt), the mean error of each
accuracy case for every profiler that ran (ours, the `--also` builds,
upstream) with the lower one named, and each script's output without its
JSON summary line, in a block of its own. The targets table and the prose
around it are written by hand from these figures: which targets are met is
a judgement the docs explain.

Usage: figures.py OUTDIR
"""

import json
import os
import sys

# The scripts of run_all.sh, in its order: (log name, heading).
LOGS = ["accuracy", "overhead", "micro_waits", "locks", "experiment_rate", "parse_bench",
        "conventional_bench", "real_xz"]


def summary_of(path):
    """The last line of a log that is a JSON summary, or None."""
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def text_of(path):
    with open(path, errors="replace") as f:
        return "\n".join(line for line in f.read().splitlines() if not line.startswith("{"))


def case_table(acc):
    """Markdown rows: mean |error| against real per case and profiler."""
    who = ["ours", *acc.get("also", {}), "upstream"]
    cases = {}
    for r in acc["rows"]:
        if r["expect"] != "match":
            continue
        c = cases.setdefault(r["case"], {"group": r["group"], "errs": {w: [] for w in who},
                                         "upstream_blind": r.get("upstream_blind")})
        for w in who:
            e = r.get(f"err_{w}_pp")
            if e is not None:
                c["errs"][w].append(e)
    out = ["| case | group | " + " | ".join(f"{w}: mean error (pp)" for w in who)
           + " | lower of ours and upstream |",
           "| --- | --- | " + " | ".join("---" for _ in who) + " | --- |"]
    for name, c in cases.items():
        means = {w: (sum(v) / len(v) if v else None) for w, v in c["errs"].items()}
        cells = []
        for w in who:
            if means[w] is not None:
                cells.append(f"{means[w]:.1f}")
            elif w == "upstream" and c["upstream_blind"]:
                cells.append(c["upstream_blind"].split(":")[0])
            else:
                cells.append("n/a")
        o, u = means["ours"], means["upstream"]
        lower = "" if o is None or u is None else (
            "tie" if abs(o - u) < 0.05 else ("ours" if o < u else "upstream"))
        out.append(f"| `{name}` | {c['group']} | " + " | ".join(cells) + f" | {lower} |")
    return "\n".join(out)


def group_table(acc):
    who = ["ours", *acc.get("also", {}), "upstream"]
    groups = {"ours": acc.get("groups_ours") or {}, "upstream": acc.get("groups_upstream") or {}}
    overall = {"ours": acc.get("ours"), "upstream": acc.get("upstream")}
    for n, a in acc.get("also", {}).items():
        groups[n] = a["groups"]
        overall[n] = a["overall"]
    names = sorted({g for w in who for g in groups[w]})

    def cell(fig):
        f = (fig or {}).get("vs_real") or {}
        if not f.get("points"):
            return "n/a"
        return f"{f['mean_abs_error_pp']:.1f} (max {f['max_abs_error_pp']:.1f}, {f['points']} points)"
    out = ["| cases | " + " | ".join(who) + " |", "| --- | " + " | ".join("---" for _ in who) + " |"]
    for g in names:
        out.append(f"| {g} | " + " | ".join(cell(groups[w].get(g)) for w in who) + " |")
    out.append("| all | " + " | ".join(cell(overall[w]) for w in who) + " |")
    return "\n".join(out)


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: figures.py OUTDIR (the directory run_all.sh wrote)", file=sys.stderr)
        return 2
    out = argv[0]
    header = os.path.join(out, "header.txt")
    if not os.path.isfile(header):
        print(f"figures.py: {header} is missing: is {out} a run_all.sh OUTDIR?", file=sys.stderr)
        return 2
    with open(header) as f:
        print("The invocation (`header.txt`: machine, commit, the commands and how long each took):")
        print("\n```\n" + f.read().rstrip() + "\n```\n")
    acc_log = os.path.join(out, "accuracy.log")
    acc = summary_of(acc_log) if os.path.isfile(acc_log) else None
    if acc and acc.get("summary") == "accuracy":
        print("Mean error against real, by group of cases (percentage points):\n")
        print(group_table(acc) + "\n")
        print("Mean error of each case over its points (25, 50, 75%), against real:\n")
        print(case_table(acc) + "\n")
    for name in LOGS:
        path = os.path.join(out, name + ".log")
        if not os.path.isfile(path):
            continue
        print(f"### {name}.py output\n\n```\n{text_of(path).rstrip()}\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
