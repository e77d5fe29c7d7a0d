"""Libraries loaded with dlopen are profiled when they match the binary scope."""

import os

from conftest import build_program, records
from hostile_common import assert_same_behaviour, run_both


def test_dlopened_library_is_profiled(tmp_path):
    lib = build_program("hostile_dlib", tmp_path, flags=("-g", "-O1", "-shared", "-fPIC"), libs=())
    exe = build_program("hostile_dlopen", tmp_path, libs=("-ldl",))
    plain, profiled = run_both([exe, lib], coz_args=["-b", "%hostile_dlib%"], profile=tmp_path / "p.coz")
    assert plain.returncode == 0 and plain.stdout.startswith(b"library result")
    assert_same_behaviour(plain, profiled)
    recs = records(tmp_path / "p.coz")
    sampled = {}
    for r in recs:
        if r["type"] == "samples":
            for line, n in r["counts"].items():
                sampled[line] = sampled.get(line, 0) + n
    lib_lines = {line: n for line, n in sampled.items() if "/hostile_dlib.c:" in line}
    assert sum(lib_lines.values()) >= 50, sampled
    # nothing outside the scope: the main program's own lines are not profiled
    assert all("/hostile_dlib.c:" in line for line in sampled), sampled
    selected = {r["selected"] for r in recs if r["type"] == "experiment"}
    assert selected and all("/hostile_dlib.c:" in s for s in selected)


def test_plugin_found_through_the_programs_runpath(tmp_path):
    # dlopen("libplug.so") searches the RUNPATH of the object that called it:
    # the program's own $ORIGIN/plug, not the profiler's.
    plug = tmp_path / "plug"
    plug.mkdir()
    lib = plug / "libhostile_plug.so"
    os.rename(build_program("hostile_dlib", plug, flags=("-g", "-O1", "-shared", "-fPIC"), libs=()), lib)
    exe = build_program("hostile_dlopen", tmp_path, libs=("-ldl", "-Wl,-rpath,$ORIGIN/plug", "-Wl,--enable-new-dtags"))
    plain, profiled = run_both([exe, "libhostile_plug.so"], coz_args=["-b", "%hostile_plug%"],
                               profile=tmp_path / "p.coz")
    assert plain.returncode == 0 and plain.stdout.startswith(b"library result"), plain.stderr
    assert_same_behaviour(plain, profiled)
    sampled = sum(n for r in records(tmp_path / "p.coz") if r["type"] == "samples"
                  for line, n in r["counts"].items() if "/hostile_dlib.c:" in line)
    assert sampled >= 50
