"""Code of a library the program dlclose()s is named in the conventional
profile: the profiler thread symbolizes stacks at each flush, after the
library (and the dependency that leaves with it) is gone; the runtime's
dlclose keeps a copy of what each call unloads (libcoz/loaded_objects.h)."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, coz_run

# A plugin that spins, then calls the library it depends on, which spins too;
# the program loads the plugin, runs it, unloads it (and so its dependency),
# then spins in its own code. Distinctive constants: each name is one source's.
# The stacks are flushed (symbolized) as the profiler starts, then each
# second on: the program's own 0.1 s first keeps the first flush before the
# dlopen, and the libraries are gone by the next one (on a quiet machine; a
# slow one that flushes while they are loaded names them either way).
def spin_source(function, factor):
    """C source of `unsigned long FUNCTION(double seconds)`, which spins that
    much CPU time (its clock read every 20000 steps)."""
    return r"""
#include <time.h>
static double cpu_s(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9; }
unsigned long %s(double seconds) {
  volatile unsigned long x = 0;
  double end = cpu_s() + seconds;
  while (cpu_s() < end)
    for (int i = 0; i < 20000; i++) x = x * %d + i;
  return x;
}
""" % (function, factor)


DEP = spin_source("unloaded_dep_6173", 6173)

PLUGIN = r"""
#include <time.h>
unsigned long unloaded_dep_6173(double seconds);
static double cpu_s(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9; }
unsigned long unloaded_plugin_6151(double seconds) {
  volatile unsigned long x = 0;
  double end = cpu_s() + seconds / 2;
  while (cpu_s() < end)
    for (int i = 0; i < 20000; i++) x = x * 6151 + i;
  return x ^ unloaded_dep_6173(seconds / 2);
}
"""

MAIN = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
static double cpu_s(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) unsigned long main_spin_6163(double seconds) {
  volatile unsigned long x = 0;
  double end = cpu_s() + seconds;
  while (cpu_s() < end)
    for (int i = 0; i < 20000; i++) x = x * 6163 + i;
  return x;
}
int main(int argc, char** argv) {
  if (argc < 3) return 2;
  unsigned long b = main_spin_6163(0.1);
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  unsigned long (*plugin)(double) = (unsigned long (*)(double))dlsym(h, "unloaded_plugin_6151");
  if (!plugin) return 1;
  unsigned long a = plugin(0.4);
  if (dlclose(h) != 0) { fprintf(stderr, "dlclose: %s\n", dlerror()); return 1; }
  int gone = !dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD) && !dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD);
  b ^= main_spin_6163(0.3);
  printf("unloaded %s %lu\n", gone ? "both" : "not both", (a ^ b) & 1);
  return 0;
}
"""


def coz(*argv):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    r = subprocess.run([sys.executable, "-m", "cozprof", *argv], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def top(tmp_path_factory, libcoz):
    d = tmp_path_factory.mktemp("unloaded")
    for name, text in (("unl_dep.c", DEP), ("unl_plugin.c", PLUGIN), ("unl_main.c", MAIN)):
        (d / name).write_text(text)

    def cc(source, output, *flags):
        subprocess.run(["cc", "-g", "-O1", str(d / source), "-o", str(d / output), *flags], check=True)
        return str(d / output)

    dep = cc("unl_dep.c", "libunl_dep_6173.so", "-shared", "-fPIC")
    plugin = cc("unl_plugin.c", "libunl_plugin_6151.so", "-shared", "-fPIC", f"-L{d}", "-l:libunl_dep_6173.so",
                "-Wl,-rpath,$ORIGIN")
    exe = cc("unl_main.c", "unl_main", "-ldl")
    out = d / "p.coz"
    # The plugin in the binary scope (its DWARF: file and line), its
    # dependency outside it (the symbol table alone).
    r = coz_run(["-o", str(out), "--sampling-only", "--sample-period", "1ms", "-b", "MAIN", "-b", "%unl_plugin%"],
                [exe, plugin, dep])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().startswith("unloaded both "), "the premise: dlclose unloads both libraries"
    data = json.loads(coz("report", "--top", "--json", "-", str(out)))
    return data, {row["name"]: row for row in data["rows"]}


def test_functions_of_unloaded_libraries_are_named(top):
    data, rows = top
    for name in ("unloaded_plugin_6151", "unloaded_dep_6173", "main_spin_6163"):
        assert name in rows, sorted(rows)
    # 0.2 s in each library, 0.4 s in the program: each library holds about
    # a quarter of the time; a tenth is far from any sampling error of ~1000 samples.
    for name in ("unloaded_plugin_6151", "unloaded_dep_6173"):
        assert rows[name]["flat_ns"] >= 0.1 * data["total_ns"], rows[name]
    assert rows["unloaded_dep_6173"]["cum"] >= rows["unloaded_dep_6173"]["flat"] > 0
    assert rows["unloaded_plugin_6151"]["cum"] > rows["unloaded_plugin_6151"]["flat"], "the dependency's caller"
    raw = [name for name in rows if name.startswith("0x") or "+0x" in name]
    assert not raw, f"frames left as raw addresses: {raw}"


def test_the_in_scope_unloaded_library_is_read_from_its_dwarf(top):
    _, rows = top
    assert (rows["unloaded_plugin_6151"]["file"] or "").endswith("/unl_plugin.c"), rows["unloaded_plugin_6151"]
    assert rows["unloaded_dep_6173"]["file"] is None, "outside the binary scope: the symbol table alone"


# Two plugins of the same code, one after the other: the second is loaded
# where the first was (the loader reuses the freed range). Lines are the
# causal profile's unit: each plugin's samples must go to its own source.
SAME_PLUGIN = spin_source("plugin_spin", 7919)

RELOAD_MAIN = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
static void* run(const char* path, void** base) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return NULL; }
  unsigned long (*spin)(double) = (unsigned long (*)(double))dlsym(h, "plugin_spin");
  Dl_info info;
  if (!spin || !dladdr((void*)spin, &info)) return NULL;
  *base = info.dli_fbase;
  spin(0.3);
  dlclose(h);
  return h;
}
int main(int argc, char** argv) {
  void *a = NULL, *b = NULL;
  if (argc < 3 || !run(argv[1], &a) || !run(argv[2], &b)) return 1;
  printf("%s\n", a == b ? "same address" : "another address");
  return 0;
}
"""


def test_a_plugin_loaded_where_an_unloaded_one_was_gets_its_own_lines(tmp_path, libcoz):
    for name, text in (("plug_a.c", SAME_PLUGIN), ("plug_b.c", SAME_PLUGIN), ("reload.c", RELOAD_MAIN)):
        (tmp_path / name).write_text(text)
    for src, out in (("plug_a.c", "libplug_a.so"), ("plug_b.c", "libplug_b.so")):
        subprocess.run(["cc", "-g", "-O1", "-shared", "-fPIC", str(tmp_path / src), "-o", str(tmp_path / out)],
                       check=True)
    subprocess.run(["cc", "-g", "-O1", str(tmp_path / "reload.c"), "-o", str(tmp_path / "reload"), "-ldl"],
                   check=True)
    out = tmp_path / "p.coz"
    r = coz_run(["-o", str(out), "--sampling-only", "--sample-period", "1ms", "-b", "MAIN", "-b", "%libplug_%"],
                [str(tmp_path / "reload"), str(tmp_path / "libplug_a.so"), str(tmp_path / "libplug_b.so")])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == "same address", "the premise: the second plugin reuses the first's range"
    counts = {}
    for rec in (json.loads(line) for line in out.read_text().splitlines()):
        for part in rec.get("records", []) if rec["type"] == "totals" else []:
            if part["type"] == "samples":
                for where, n in part["counts"].items():
                    source = os.path.basename(where.rsplit(":", 1)[0])
                    counts[source] = counts.get(source, 0) + n
    a, b = counts.get("plug_a.c", 0), counts.get("plug_b.c", 0)
    # 0.3 s of the same code each: about 300 samples each at 1 ms. Before the
    # fix every sample of the second went to the first's lines (b == 0).
    assert a >= 100 and b >= 100, counts
    assert 0.5 < b / a < 2, counts
