"""Libraries loaded with dlopen are profiled when they match the binary scope,
and the runtime brings no libstdc++ of its own into the program's view."""

import os
import subprocess

import pytest

from conftest import LIBCOZ, build_program, records
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


def _needs_libstdcxx(library):
    """Whether `library` names libstdc++ among its DT_NEEDED entries (readelf -d)."""
    out = subprocess.run(["readelf", "-dW", library], capture_output=True, text=True, check=True).stdout
    return "libstdc++" in out


@pytest.mark.parametrize("linked", [(), ("-lstdc++",)], ids=["c", "cxx"])
def test_the_runtime_adds_no_libstdcxx_to_the_program(tmp_path, linked):
    # libcoz.so links libstdc++ in, hidden: a C program gets none, a C++
    # program keeps its own alone (the same images mapped as without coz).
    if _needs_libstdcxx(LIBCOZ):
        pytest.skip("this libcoz.so links the shared libstdc++ (CMake found no "
                    "position-independent libstdc++.a): see libcoz/CMakeLists.txt")
    exe = build_program("maps_cxx", tmp_path, libs=("-Wl,--no-as-needed", *linked))
    plain, profiled = run_both([exe], coz_args=["--sampling-only"], profile=tmp_path / "p.coz")
    assert plain.returncode == 0
    assert plain.stdout.endswith(b"libstdc++ images: %d\n" % (1 if linked else 0)), plain.stdout
    assert_same_behaviour(plain, profiled)
