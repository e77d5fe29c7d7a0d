#!/usr/bin/env python3
"""A real program profiled as a user would (issue 15, point 5): xz from
Debian's sources, compressing with more threads than cores.

pigz, the issue's example, cannot be fetched here (its source files are
missing from the reachable mirror: 404), so the program is `xz -T3`: the main
thread reads the input and writes the output, three worker threads compress
blocks (liblzma's multi-threaded encoder): four threads on 2 cores.

  1. make sure apt lists `deb-src` (adds /etc/apt/sources.list.d/
     coz-bench-src.sources, bookworm main, when `apt-cache showsrc xz-utils`
     finds no source) and `apt-get source xz-utils` into <build>/real_xz/
     (cached: the network is needed once);
  2. patch a copy: a known cost on one line of the compressor's per-chunk
     loop (liblzma's worker_encode, key COMPRESS) and one of the writer
     (xz's io_write, key WRITE), each a dependent multiply chain (bench.h's
     BENCH_SPIN) of BENCH_COMPRESS_STEPS / BENCH_WRITE_STEPS steps
     (environment variables, read once at start-up), and a progress point
     `xz.write` per output buffer written; liblzma linked statically so both
     lines are in the program's scope. Two builds: -g -O2 with the project's
     coz.h (ours), -gdwarf-3 -gstrict-dwarf -O2 with /usr/include/coz.h
     (upstream's, if present);
  3. a deterministic input: seeded pseudo-random text of words, compressed
     by `xz -z -k -f -T3 -1 --block-size=256KiB`;
  4. real curve: each line's steps really lowered by x (25/50/75%), the
     median of interleaved plain runs (1 - t_x / t_0, wall time); predicted:
     one run of ours (`coz run --fixed-line FILE:LINE --experiment-length
     100ms`) and one of upstream (`/usr/bin/coz run --fixed-line`) per line,
     both on 8 times the input (the normal run lasts about 1 s: twice it
     holds too few experiments), judged by benchlib.predict, the analysis
     accuracy.py uses.
Prints a table (line, x, real, ours, upstream, errors, usable experiments
per minute of profiled run) and a JSON summary {"summary": "real_xz", ...}
with the share of our samples that fell out of scope.

With --shared-liblzma, only: xz built against the shared liblzma.so.5 and
run with the system's (Debian's liblzma5: -O2, no frame pointers, stripped),
outside --binary-scope as a user has it; one plain `coz run` of ours and
of upstream's; prints the share of the CPU samples out of scope, in
liblzma, and the lines the library's samples were charged to (issue 15,
point 3).

Usage: real_xz.py [--short] [--build DIR] [--ours-only | --upstream-only]
                  [--only COMPRESS|WRITE] [--reps N] [--keep-profiles DIR]
                  [--shared-liblzma]
"""

import argparse
import glob
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import BenchError  # noqa: E402

PACKAGE = "xz-utils"
SRC_LIST = "/etc/apt/sources.list.d/coz-bench-src.sources"
SRC_ENTRY = """Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
POINT = "xz.write"
THREADS = 3
# Steps of each known cost in a normal run (a spin step is about 1 ns): the
# compressor's per 16 KiB chunk, the writer's per 8 KiB output buffer.
STEPS = {"COMPRESS": 450000, "WRITE": 900000}
ENV = {"COMPRESS": "BENCH_COMPRESS_STEPS", "WRITE": "BENCH_WRITE_STEPS"}
INPUT_MB = 12
SHORT_INPUT_MB = 2

HEADER = r"""/* Added by benchmarks/real_xz.py: known costs of the accuracy benchmark. */
#ifndef COZ_BENCH_COST_H
#define COZ_BENCH_COST_H
#include <stdint.h>
#include <stdlib.h>
#include <coz.h>
#include "bench.h"
static long cozb_compress_steps, cozb_write_steps;
static void cozb_init(void) __attribute__((constructor));
static void cozb_init(void) {
  const char *c = getenv("BENCH_COMPRESS_STEPS"), *w = getenv("BENCH_WRITE_STEPS");
  cozb_compress_steps = c ? atol(c) : 0;
  cozb_write_steps = w ? atol(w) : 0;
}
#endif
"""
# (file, anchor, lines inserted before the anchor; the KEY line is one line)
PATCHES = [
    ("src/liblzma/common/stream_encoder_mt.c", "#include \"outqueue.h\"\n",
     "#include \"coz_bench_cost.h\"\n"),
    ("src/liblzma/common/stream_encoder_mt.c", "\t\tret = thr->block_encoder.code(\n",
     "\t\t{ uint64_t cozb_x = in_pos; BENCH_SPIN(cozb_x, cozb_compress_steps); } /* KEY:COMPRESS */\n",
     ),
    ("src/xz/file_io.c", "#include \"tuklib_open_stdxxx.h\"\n", "#include \"coz_bench_cost.h\"\n"),
    ("src/xz/file_io.c", "\tassert(size <= IO_BUFFER_SIZE);\n",
     "\t{ uint64_t cozb_x = size; BENCH_SPIN(cozb_x, cozb_write_steps); } /* KEY:WRITE */\n"
     "\tCOZ_PROGRESS_NAMED(\"" + POINT + "\");\n"),
]
CONFIGURE = ["--disable-shared", "--disable-nls", "--disable-doc", "--disable-scripts",
             "--disable-xzdec", "--disable-lzmadec", "--disable-lzmainfo", "--disable-lzma-links"]
FLAVOURS = {"ours": "-g -O2", "upstream": "-gdwarf-3 -gstrict-dwarf -O2"}


def sh(cmd, what, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise BenchError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}")
    return p.stdout


def has_source():
    p = subprocess.run(["apt-cache", "showsrc", PACKAGE], capture_output=True, text=True)
    return p.returncode == 0 and "Files:" in p.stdout


def fetch_source(cache):
    """The unpacked Debian source tree of xz-utils in `cache` (fetched once)."""
    found = sorted(d for d in glob.glob(os.path.join(cache, "xz-utils-*")) if os.path.isdir(d))
    if found:
        return found[-1]
    if not shutil.which("apt-get") or not shutil.which("dpkg-source"):
        raise BenchError("apt-get and dpkg-source (package dpkg-dev) are needed to fetch the source")
    if not has_source():
        if not os.path.exists(SRC_LIST):
            try:
                with open(SRC_LIST, "w") as f:
                    f.write(SRC_ENTRY)
            except OSError as e:
                raise BenchError(f"apt lists no deb-src and {SRC_LIST} cannot be written ({e}): "
                                 "add a deb-src entry for bookworm main as root") from None
        sh(["apt-get", "update", "-o", f"Dir::Etc::sourcelist={SRC_LIST}", "-o",
            "Dir::Etc::sourceparts=-", "-o", "APT::Get::List-Cleanup=0"], "apt-get update (deb-src)")
    os.makedirs(cache, exist_ok=True)
    sh(["apt-get", "source", PACKAGE], "apt-get source " + PACKAGE, cwd=cache)
    found = sorted(d for d in glob.glob(os.path.join(cache, "xz-utils-*")) if os.path.isdir(d))
    if not found:
        raise BenchError(f"apt-get source {PACKAGE} left no xz-utils-* directory in {cache}")
    return found[-1]


def patched_tree(src, cache):
    """A copy of `src` with the known costs; returns (tree, {key: 'FILE:LINE'})."""
    digest = hashlib.sha256((HEADER + repr(PATCHES)).encode()).hexdigest()[:12]
    tree = os.path.join(cache, "patched-" + digest)
    if not os.path.isdir(tree):
        tmp = tree + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp, symlinks=True)
        for rel, anchor, text in PATCHES:
            path = os.path.join(tmp, rel)
            with open(path) as f:
                body = f.read()
            if body.count(anchor) != 1:
                raise BenchError(f"{rel}: the patch's anchor {anchor.strip()!r} is not found once")
            with open(path, "w") as f:
                f.write(body.replace(anchor, text + anchor))
            with open(os.path.join(os.path.dirname(path), "coz_bench_cost.h"), "w") as f:
                f.write(HEADER)
        os.rename(tmp, tree)
    lines = {}
    for rel, _, text in PATCHES:
        if "KEY:" not in text:
            continue
        key = text.split("KEY:")[1].split(" ")[0]
        path = os.path.join(tree, rel)
        with open(path) as f:
            n = next(i for i, t in enumerate(f, 1) if f"/* KEY:{key} */" in t)
        lines[key] = f"{path}:{n}"
    return tree, lines


def build(tree, cache, flavour, shared=False):
    """xz built from the patched tree with the flavour's flags; its path.
    `shared`: linked against liblzma.so.5 (see shared_liblzma())."""
    out = os.path.join(cache, f"build-{os.path.basename(tree)}-{flavour}" + ("-shared" if shared else ""))
    # libtool's uninstalled program: src/xz/xz is a wrapper script that puts
    # the build's library first; .libs/xz is the program itself, without RUNPATH.
    exe = os.path.join(out, "src", "xz", ".libs" if shared else "", "xz")
    if os.path.isfile(exe):
        return exe
    coz_h = os.path.join(benchlib.REPO, "include")
    if flavour == "upstream" and os.path.isfile("/usr/include/coz.h"):
        coz_h = "/usr/include"
    cflags = f"{FLAVOURS[flavour]} -I{coz_h} -I{benchlib.HERE}"
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    print(f"# building xz ({flavour}: {cflags}) in {out}", file=sys.stderr)
    configure = [o for o in CONFIGURE if o != "--disable-shared"] + ["--disable-static"] if shared else CONFIGURE
    sh([os.path.join(tree, "configure"), *configure, "CFLAGS=" + cflags], "configure", cwd=out)
    for d in ("src/liblzma", "src/xz"):
        sh(["make", "-j2", "-C", d], "make " + d, cwd=out)
    return exe


def make_input(cache, mb):
    """`mb` MB of seeded pseudo-random text (words of a fixed vocabulary)."""
    path = os.path.join(cache, f"input-{mb}mb.txt")
    if os.path.isfile(path):
        return path
    rng = random.Random(15)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    vocab = ["".join(rng.choices(letters, weights=range(26, 0, -1), k=rng.randint(2, 9)))
             for _ in range(5000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    size = mb * 1000000
    with open(path + ".tmp", "w") as f:
        written = 0
        while written < size:
            words = rng.choices(vocab, weights=weights, k=20000)
            chunk = " ".join(words) + "\n"
            f.write(chunk)
            written += len(chunk)
    os.rename(path + ".tmp", path)
    return path


def xz_cmd(exe, path):
    return [exe, "-z", "-k", "-f", f"-T{THREADS}", "-1", "--block-size=262144", path]


def set_steps(steps):
    for key, var in ENV.items():
        os.environ[var] = str(steps[key])


def real_speedups(exe, path, key, amounts, reps):
    """({x: 1 - t_x / t_0}, noise): medians of interleaved plain runs."""
    runs = {0.0: [], **{x: [] for x in amounts}}
    for _ in range(reps):
        for x in runs:
            steps = dict(STEPS)
            steps[key] = round(STEPS[key] * (1 - x))
            set_steps(steps)
            runs[x].append(benchlib.run_plain(xz_cmd(exe, path), result=False)["elapsed_s"])
    set_steps(STEPS)
    base = benchlib.median(runs[0.0])
    noise = (max(runs[0.0]) - min(runs[0.0])) / base if reps > 1 else None
    return {x: 1 - benchlib.median(runs[x]) / base for x in amounts}, noise, base


def short_line(loc):
    """'/src/xz/file_io.c:1323' -> 'file_io.c:1323'."""
    path, n = loc.rsplit(":", 1)
    return f"{os.path.basename(path)}:{n}"


def line_counts(prof):
    """({'FILE:LINE': CPU samples charged to it, FILE a base name}, samples out
    of scope) of a loaded profile."""
    counts = {}
    for r in prof.runs:
        for loc, c in r.samples.items():
            counts[short_line(loc)] = counts.get(short_line(loc), 0) + c
    return counts, sum(r.out_of_scope for r in prof.runs)


def sample_shares(profile_path, line):
    """(share of the samples whose stack held no in-scope frame, share charged
    to `line`) in a profile of ours."""
    from cozprof import profile

    counts, oos = line_counts(profile.load([profile_path]))
    total = oos + sum(counts.values())
    return (oos / total, counts.get(short_line(line), 0) / total) if total else (None, None)


def library_samples(profile_path, library):
    """Where the CPU samples of a plain profile of ours went: {"samples": CPU
    samples, "out_of_scope": share with no in-scope frame (the runtime's own
    count), "in_library": share whose innermost frame is in `library`,
    "library_charged": {"FILE:LINE (function)": share of all samples} for those,
    the first frame with a source line, as the runtime charges them,
    "library_out_of_scope": share of all samples in the library with no such
    frame, "by_thread": {group: share of all samples} of those, "lines": the
    runtime's per-line shares}."""
    from cozprof import profile

    prof = profile.load([profile_path])
    charged, oos = line_counts(prof)
    total = oos + sum(charged.values())
    if not total:
        raise BenchError(f"{profile_path}: no CPU sample")
    in_lib, lib_charged, lib_oos, by_thread = 0, {}, 0, {}
    for r in prof.runs:
        for sid, (n, _) in r.stack_counts.items():
            st = r.stacks[sid]
            if st.kind != "cpu" or not st.locations:
                continue
            locs = [r.locations[i] for i in st.locations]
            if os.path.basename(locs[0].object or "").split(".so")[0] != library:
                continue
            in_lib += n
            first = next((lc.lines[0] for lc in locs if lc.lines and lc.lines[0][1]), None)
            if first is None:
                lib_oos += n
                by_thread[st.group or "?"] = by_thread.get(st.group or "?", 0) + n
            else:
                key = f"{os.path.basename(first[1])}:{first[2]} ({first[0]})"
                lib_charged[key] = lib_charged.get(key, 0) + n
    stack_total = sum(n for r in prof.runs for sid, (n, _) in r.stack_counts.items()
                      if r.stacks[sid].kind == "cpu")
    share = (lambda n: n / stack_total) if stack_total else (lambda n: 0.0)
    return {"samples": total, "out_of_scope": oos / total, "in_library": share(in_lib),
            "library_charged": {k: share(v) for k, v in sorted(lib_charged.items(), key=lambda kv: -kv[1])},
            "library_out_of_scope": share(lib_oos),
            "by_thread": {k: share(v) for k, v in sorted(by_thread.items(), key=lambda kv: -kv[1])},
            "lines": {k: v / total for k, v in sorted(charged.items(), key=lambda kv: -kv[1])}}


def line_shares(profile_path):
    """{"FILE:LINE": share of the in-scope samples} of a profile (upstream's
    counts no out-of-scope sample)."""
    from cozprof import profile

    counts, _ = line_counts(profile.load([profile_path]))
    total = sum(counts.values())
    return {k: v / total for k, v in sorted(counts.items(), key=lambda kv: -kv[1])} if total else {}


def shared_liblzma_mode(tree, cache, libcoz, workdir, mb, use_up):
    """--shared-liblzma: xz linked against the system's liblzma.so.5, one plain
    `coz run` of ours (and of upstream's with `use_up`); prints where the
    samples went. Returns the summary."""
    exe = build(tree, cache, "ours", shared=True)
    exe_up = build(tree, cache, "upstream", shared=True) if use_up else None
    ldd = sh(["ldd", exe], "ldd " + exe)
    lib = next((ln.split("=>")[1].split("(")[0].strip() for ln in ldd.splitlines()
                if "liblzma.so" in ln and "=>" in ln), None)
    if not lib or lib.startswith(cache):
        raise BenchError(f"{exe} does not load the system's liblzma.so.5:\n{ldd}")
    path = make_input(cache, mb)
    local = os.path.join(workdir, os.path.basename(path))
    if not os.path.exists(local):
        os.symlink(path, local)
    set_steps(STEPS)
    out = os.path.join(workdir, "shared.ours.coz")
    wall = benchlib.run_ours(xz_cmd(exe, local), libcoz, out, result=False)["wall_s"]
    res = library_samples(out, "liblzma")
    print(f"# machine: {benchlib.machine_description()}; load average {benchlib.load_average()}")
    print(f"# program: xz -T{THREADS} -1 --block-size=256KiB on {mb} MB, linked against {lib} "
          f"(Debian's package: -O2, no frame pointers, stripped), outside --binary-scope; "
          f"one plain coz run of {wall:.1f} s, {res['samples']} CPU samples")
    print(f"out of scope: {res['out_of_scope'] * 100:.1f}% of the CPU samples; "
          f"innermost frame in liblzma: {res['in_library'] * 100:.1f}%")
    for k, v in res["library_charged"].items():
        print(f"  liblzma samples charged to {k}: {v * 100:.1f}%")
    for k, v in res["by_thread"].items():
        print(f"  liblzma samples with no in-scope frame, threads of group {k}: {v * 100:.1f}%")
    for k, v in list(res["lines"].items())[:5]:
        print(f"  line {k}: {v * 100:.1f}% of the CPU samples")
    up = None
    if exe_up:
        out = os.path.join(workdir, "shared.upstream.coz")
        try:
            wall_up = benchlib.run_upstream(xz_cmd(exe_up, local), out, result=False)["wall_s"]
            up = {"wall_s": wall_up, "lines": line_shares(out)}
            print(f"# upstream: one plain coz run of {wall_up:.1f} s (its profile counts no "
                  "out-of-scope sample: shares of its in-scope samples)")
            for k, v in list(up["lines"].items())[:5]:
                print(f"  upstream line {k}: {v * 100:.1f}% of the in-scope samples")
        except BenchError as e:
            up = {"error": str(e).splitlines()[0]}
            print(f"# upstream failed: {up['error']}")
    return {"summary": "real_xz", "mode": "shared-liblzma", "library": lib, "input_mb": mb,
            "wall_s": wall, **res, "upstream": up, "errors": [], "rows": [], "failures": []}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--short", action="store_true",
                    help="smoke mode: 2 MB input, one amount (50%%), one run each")
    ap.add_argument("--build", metavar="DIR", default=None,
                    help="build directory with libcoz/libcoz.so; the source, builds and input "
                         "are cached in DIR/real_xz/ (default: the first usual build directory)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--ours-only", action="store_true")
    g.add_argument("--upstream-only", action="store_true")
    ap.add_argument("--only", action="append", choices=sorted(STEPS), help="one line (repeatable)")
    ap.add_argument("--reps", type=int, default=None, help="plain runs per point (default 3; 1 with --short)")
    ap.add_argument("--keep-profiles", metavar="DIR", help="keep the profiles in DIR")
    ap.add_argument("--shared-liblzma", action="store_true",
                    help="only say where the samples go when xz uses the system's shared liblzma "
                         "(no frame pointers, outside the scope): one plain run of each profiler")
    args = ap.parse_args(argv)
    build_dirs = [args.build] if args.build else benchlib.default_build_dirs()
    reps = args.reps or (1 if args.short else 3)
    amounts = [0.5] if args.short else [0.25, 0.5, 0.75]
    keys = args.only or ["COMPRESS", "WRITE"]
    mb = SHORT_INPUT_MB if args.short else INPUT_MB
    work_ours, work_up = (5, 1) if args.short else (8, 8)
    exp_len = "20ms" if args.short else "100ms"
    libcoz, use_ours, use_up, skipped = benchlib.profilers(
        build_dirs, not args.upstream_only, not args.ours_only, "real_xz")
    cache = os.path.join(os.path.abspath(next((d for d in build_dirs if os.path.isdir(d)), build_dirs[0])),
                         "real_xz")
    workdir = os.path.abspath(args.keep_profiles) if args.keep_profiles else benchlib.tempdir("coz-real-xz-")
    os.makedirs(workdir, exist_ok=True)
    rows, errors, failures, oos = [], [], [], {}
    try:
        src = fetch_source(cache)
    except BenchError as e:
        # Only this error may make the smoke test skip: no source, no program.
        print(f"real_xz: cannot fetch the source: {e}", file=sys.stderr)
        print(json.dumps({"summary": "real_xz", "fetch_error": str(e), "errors": [str(e)],
                          "rows": [], "failures": [], "skipped": skipped}))
        return 1
    if args.shared_liblzma:
        try:
            if not libcoz:
                raise BenchError("--shared-liblzma needs ours: " + skipped.get("ours", ""))
            summary = shared_liblzma_mode(patched_tree(src, cache)[0], cache, libcoz, workdir, mb, use_up)
        except BenchError as e:
            print(f"real_xz: {e}", file=sys.stderr)
            summary = {"summary": "real_xz", "mode": "shared-liblzma", "errors": [str(e)], "rows": [],
                       "failures": []}
        finally:
            if not args.keep_profiles:
                benchlib.cleanup(workdir)
        print(json.dumps(summary))
        return 1 if summary["errors"] else 0
    try:
        tree, lines = patched_tree(src, cache)
        exe = {f: build(tree, cache, f) for f in FLAVOURS if f == "ours" or use_up}
        inputs = {1: make_input(cache, mb), work_ours: make_input(cache, mb * work_ours),
                  work_up: make_input(cache, mb * work_up)}
        # The profiled runs write NAME.xz beside their own copy of the input.
        for w, p in list(inputs.items()):
            local = os.path.join(workdir, os.path.basename(p))
            if not os.path.exists(local):
                os.symlink(p, local)
            inputs[w] = local
    except BenchError as e:
        print(f"real_xz: {e}", file=sys.stderr)
        print(json.dumps({"summary": "real_xz", "errors": [str(e)], "rows": [], "failures": [],
                          "skipped": skipped}))
        return 1
    print(f"# machine: {benchlib.machine_description()}; load average at start {benchlib.load_average()}")
    print(f"# program: {os.path.basename(src)} xz -T{THREADS} -1 --block-size=256KiB on {mb} MB of text; "
          f"costs {STEPS} steps; real: median of {reps} interleaved plain run(s)")
    print(f"# ours: --fixed-line, --experiment-length {exp_len}, input x{work_ours}; upstream: "
          f"--fixed-line, input x{work_up}; exp/min: usable experiments of the curve per minute")
    print(f"{'line':<28} {'x%':>3} {'real%':>6} {'noise%':>6} {'ours%':>6} {'upst%':>6} "
          f"{'ours-err':>8} {'upst-err':>8} {'exp/min':>13}  notes")
    try:
        for key in keys:
            line = lines[key]
            shown = os.path.basename(line.rsplit(":", 1)[0]) + ":" + line.rsplit(":", 1)[1]
            try:
                real, noise, base = real_speedups(exe["ours"], inputs[1], key, amounts, reps)
            except BenchError as e:
                errors.append(f"{key}: {e}")
                print(f"{shown:<28} error: {str(e).splitlines()[0]}")
                continue
            preds, per_min, notes = {}, {}, [f"t0 {base:.2f} s"]
            runs = []
            if use_ours:
                runs.append(("ours", lambda out: benchlib.run_ours(
                    xz_cmd(exe["ours"], inputs[work_ours]), libcoz, out, fixed_line=line,
                    extra=["--experiment-length", exp_len], result=False)))
            if use_up:
                runs.append(("upstream", lambda out: benchlib.run_upstream(
                    xz_cmd(exe["upstream"], inputs[work_up]), out, fixed_line=line, result=False)))
            for who, run in runs:
                out = os.path.join(workdir, f"{key}.{who}.coz")
                try:
                    wall = run(out)["wall_s"]
                    preds[who], found, n = benchlib.predict(out, "line", line, POINT, amounts)
                    per_min[who] = n / (wall / 60)
                    notes += [f"{who}: " + f for f in found] + [f"{who}: run {wall:.1f} s"]
                    if who == "ours":
                        oos[key], share = sample_shares(out, line)
                        notes.append(f"ours: {oos[key] * 100:.1f}% of samples out of scope, "
                                     f"{share * 100:.1f}% on the line")
                        if not share:
                            failures.append({"line": key, "profiler": who,
                                             "error": "no sample on the line: its cost did not run"})
                        if any(preds[who].get(x) is None for x in amounts):
                            failures.append({"line": key, "profiler": who,
                                             "error": "no prediction: " + "; ".join(found)})
                except BenchError as e:
                    notes.append(f"{who} failed: " + str(e).splitlines()[0])
                    failures.append({"line": key, "profiler": who, "error": str(e).splitlines()[0]})
            for x in amounts:
                o, u = preds.get("ours", {}).get(x), preds.get("upstream", {}).get(x)

                def err(p):
                    return None if p is None else abs(p - real[x]) * 100
                row = {"line": key, "where": line, "speedup": x, "real": real[x], "noise": noise,
                       "ours": o, "upstream": u, "err_ours_pp": err(o), "err_upstream_pp": err(u),
                       "experiments_per_min": per_min, "notes": notes}
                rows.append(row)
                epm = " ".join(f"{per_min[w]:.0f}" if w in per_min else "-" for w in ("ours", "upstream"))
                print(f"{shown:<28} {int(x * 100):>3} {pct(real[x])} {pct(noise)} {pct(o)} {pct(u)} "
                      f"{fmt(err(o))} {fmt(err(u))} {epm:>13}  {'; '.join(notes)}")
                sys.stdout.flush()
    finally:
        if not args.keep_profiles:
            benchlib.cleanup(workdir)

    def mean_err(who):
        errs = [r[f"err_{who}_pp"] for r in rows if r[f"err_{who}_pp"] is not None]
        return {"mean_abs_error_pp": sum(errs) / len(errs) if errs else None, "points": len(errs)}
    summary = {"summary": "real_xz", "short": args.short, "program": os.path.basename(src),
               "threads": THREADS, "input_mb": mb, "steps": STEPS, "amounts": amounts, "reps": reps,
               "machine": benchlib.machine_description(), "load_average_end": benchlib.load_average(),
               "ours": mean_err("ours") if use_ours else None,
               "upstream": mean_err("upstream") if use_up else None,
               "out_of_scope_share_ours": oos, "fetch_error": None, "skipped": skipped, "errors": errors,
               "failures": failures, "rows": rows}
    for who in ("ours", "upstream"):
        s = summary[who]
        if s and s["points"]:
            print(f"# {who} against real: mean |error| {s['mean_abs_error_pp']:.1f} pp over {s['points']} points")
    for f in failures:
        print(f"# failure: {f['line']}: {f['profiler']}: {f['error']}")
    print(json.dumps(summary))
    return 1 if errors or (args.short and failures) else 0


def pct(v):
    return "   n/a" if v is None else f"{v * 100:6.1f}"


def fmt(v):
    return "     n/a" if v is None else f"{v:8.1f}"


if __name__ == "__main__":
    sys.exit(main())
