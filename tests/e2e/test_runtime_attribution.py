"""Which samples earn delay: the sample handler's hit test and the profiler's
attribution follow one rule (a sample belongs to its first frame with a
line in the binary and source scopes), and a sample earns delay for the CPU
time it stands for. Known answers come from the run's own samples."""

import os
import subprocess
import sys

from conftest import (PROGRAMS, build_program, chain_times, coz_env, coz_run, line_result, measured_experiments,
                      precise_slope, records, share_bound)
from conftest import source_marker as marker

from cozprof.profile import load

CHAIN_SOURCES = [os.path.join(PROGRAMS, "chain.c"), os.path.join(PROGRAMS, "chain_work.c")]



def chain(tmp_path, flags=("-g", "-O1")):
    return build_program("chain", tmp_path, flags=flags, sources=CHAIN_SOURCES)


def sample_share(out, line, among=None, with_total=False):
    """`line`'s share of the run's samples (of those of the lines `among`, if
    given); with `with_total`, also the number of samples it is a share of."""
    counts = {}
    for r in records(out):
        if r["type"] == "samples":
            for k, n in r["counts"].items():
                counts[k] = counts.get(k, 0) + n
            counts[None] = counts.get(None, 0) + r["out_of_scope"]
    mine = sum(n for k, n in counts.items() if k and k.endswith("/" + line))
    keys = [k for k in counts if k and (among is None or any(k.endswith("/" + a) for a in among))]
    total = sum(counts[k] for k in keys) + (counts.get(None, 0) if among is None else 0)
    return (mine / total, total) if with_total else mine / total


def test_narrowed_source_scope_earns_delay_where_samples_are_attributed(tmp_path):
    # chain_work.c is out of the source scope: its samples belong to the
    # calling lines of chain.c, and must earn delay there too (they did not
    # when the hit test looked at the first frame in the binary).
    exe = chain(tmp_path, flags=("-g", "-O1", "-fno-omit-frame-pointer"))
    line = marker("chain", "CALL_A")
    shares = []

    def profile(i):
        out = tmp_path / f"s{i}.coz"
        r = coz_run(["-s", "%/chain.c", "--fixed-line", line, "--experiment-length", "50ms", "-o", str(out)],
                    [exe, "3"])
        assert r.returncode == 0, r.stderr.decode()
        sped = [x for x in measured_experiments(out) if x["speedup"] > 0]
        assert sped and all(x["selected_samples"] > 0 and x["delay_ns"] > 0 for x in sped), sped
        share, n = sample_share(out, line, among=[line, marker("chain", "CALL_B")], with_total=True)
        _, a_share = chain_times(r.stdout)  # CALL_A's share of the calls' CPU time, as the program measured it
        assert abs(share - a_share) < share_bound(a_share, n), (share, a_share, n)
        shares.append(share)
        return out

    # As many profiles as the slope needs: one alone read 0.43 against a
    # share of 0.65 on a host halving its speed beside a busy loop.
    result, paths = precise_slope(profile, line)
    share = sum(shares) / len(shares)
    assert abs(result["slope"] - share) < 0.2, (len(paths), result["slope"], share, result["points"])


def test_timer_sampler_earns_every_elapsed_period(tmp_path):
    # Where perf_event is refused, CPU timers tick at the kernel's rate (4 ms
    # at 250 Hz): one signal then stands for several 1 ms periods
    # (si_overrun), and must earn delay for all of them.
    noperf = build_program("hostile_noperf", tmp_path)
    exe = chain(tmp_path)
    line = marker("chain_work", "WORK")
    env = coz_env()

    def profile(i):
        out = tmp_path / f"t{i}.coz"
        r = subprocess.run([noperf, sys.executable, "-m", "cozprof", "run", "--fixed-line", line,
                            "--experiment-length", "50ms", "-o", str(out), "---", exe, "3"],
                           capture_output=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        assert records(out)[0]["sampler"] == "timer"
        return out

    result, paths = precise_slope(profile, line)
    share = sum(sample_share(p, line) for p in paths) / len(paths)
    assert share > 0.8, share
    assert abs(result["slope"] - share) < 0.2, (len(paths), result["slope"], share, result["points"])


def lib_threads(tmp_path):
    """lib_threads and its library, built as a distribution builds one (-O2,
    no frame pointers, no debug information): (program, library)."""
    lib = str(tmp_path / "liblib_threads.so")
    os.rename(build_program("lib_threads_lib", tmp_path,
                            flags=("-O2", "-fomit-frame-pointer", "-shared", "-fPIC")), lib)
    exe = build_program("lib_threads", tmp_path, flags=("-g", "-O2"),
                        libs=(lib, "-lpthread", f"-Wl,-rpath,{tmp_path}"))
    return exe, lib


def test_library_threads_are_charged_to_the_calling_line(tmp_path):
    # The library computes on a thread it starts itself (as liblzma's
    # compressing threads do): no frame of it is in scope, so its samples
    # were all out of scope (two thirds of the run's CPU samples). They
    # belong to the program's call that started it, CALL_LIB, both where
    # the profiler attributes them and in the handler's hit test.
    exe, lib = lib_threads(tmp_path)
    out = tmp_path / "l.coz"
    line = marker("lib_threads", "CALL_LIB")
    # Every experiment sped up: the run holds a fixed amount of work, and on
    # a loaded machine its experiments grow longer (they wait for samples of
    # the line): 8 of them, and in one run of three rounds beside a busy
    # loop all 7 whole ones drew 0%, leaving the hit test unchecked.
    r = coz_run(["--fixed-line", line, "--fixed-speedup", "50", "--experiment-length", "50ms", "-o", str(out)],
                [exe, "150"])
    assert r.returncode == 0, r.stderr.decode()
    (run,) = load([str(out)]).runs
    in_lib = charged = 0
    for sid, (n, _) in run.stack_counts.items():
        st = run.stacks[sid]
        locs = [run.locations[i] for i in st.locations]
        if st.kind != "cpu" or not locs or locs[0].object != lib:
            continue
        in_lib += n
        first = next((lc.lines[0] for lc in locs if lc.lines and lc.lines[0][1]), None)
        if first and f"{os.path.basename(first[1])}:{first[2]}" == line:
            charged += n
    total = run.out_of_scope + sum(run.samples.values())
    assert in_lib > 0.3 * total, (in_lib, total)  # the library's thread does most of the work
    assert charged >= 0.95 * in_lib, (charged, in_lib)
    assert run.out_of_scope < 0.05 * total, (run.out_of_scope, total)
    sped = [x for x in measured_experiments(out) if x["speedup"] > 0]
    assert sped and all(x["selected_samples"] > 0 and x["delay_ns"] > 0 for x in sped), sped
