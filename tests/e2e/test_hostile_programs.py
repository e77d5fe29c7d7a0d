"""Real programs behave under `coz run` exactly as without it: same standard
output, same exit status, same standard error but for the profiler's own
"coz: " lines (warnings about binaries without debug information)."""

import os
import re
import shutil
import stat
import subprocess

import pytest

from conftest import build_program, coz_run, records
from hostile_common import FAST, assert_same_behaviour, run_both

PY_SCRIPT = r"""
import json, sys, threading, hashlib
results = {}
def work(i):
    h = hashlib.sha256()
    for k in range(20000):
        h.update(str(k * i).encode())
    results[i] = h.hexdigest()[:12]
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps(results, sort_keys=True))
print("to stderr", file=sys.stderr)
sys.exit(5)
"""

JAVA_SOURCE = r"""
public class Hostile {
    static int[] table;
    static long work(int seed) {
        long x = seed;
        for (int i = 0; i < 2_000_000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        return Math.floorMod(x, 9973);
    }
    public static void main(String[] args) throws Exception {
        // Implicit null checks: the JVM turns SIGSEGV into NullPointerException
        // with its own handler, which must keep working under the profiler.
        int npes = 0;
        for (int i = 0; i < 20000; i++) {
            try { table[i % 7] = i; } catch (NullPointerException e) { npes++; }
        }
        long[] out = new long[4];
        Thread[] ts = new Thread[4];
        for (int t = 0; t < 4; t++) {
            final int k = t;
            ts[t] = new Thread(() -> out[k] = work(k + 11));
            ts[t].start();
        }
        for (Thread t : ts) t.join();
        System.out.println("npes " + npes + " results " + java.util.Arrays.toString(out));
        System.exit(4);
    }
}
"""


def test_python3_script(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(PY_SCRIPT)
    plain, profiled = run_both(["python3", str(script)], profile=tmp_path / "p.coz")
    assert plain.returncode == 5
    assert_same_behaviour(plain, profiled)
    assert records(tmp_path / "p.coz")[0]["type"] == "startup"


def test_perl(tmp_path):
    code = 'my %h; $h{$_ % 97} += $_ for 1..200000; print join(",", map {"$_=$h{$_}"} sort {$a<=>$b} keys %h), "\\n"; warn "perl warns\\n"; exit 9'
    plain, profiled = run_both(["perl", "-e", code], profile=tmp_path / "p.coz")
    assert plain.returncode == 9
    assert_same_behaviour(plain, profiled)


def test_bash_pipeline(tmp_path):
    script = "seq 1 20000 | sort -r | awk '{s += $1 * NR} END {print s}' | tee /dev/stderr; (exit 6) | cat; exit ${PIPESTATUS[0]}"
    plain, profiled = run_both(["bash", "-c", script], profile=tmp_path / "p.coz")
    assert plain.returncode == 6
    assert_same_behaviour(plain, profiled)


def test_sort(tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("".join(f"{(i * 7919) % 10007}\n" for i in range(30000)))
    plain, profiled = run_both(["sort", "-n", str(data)], profile=tmp_path / "p.coz")
    assert_same_behaviour(plain, profiled)
    plain, profiled = run_both(["sort", str(tmp_path / "missing")], profile=tmp_path / "p.coz")
    assert plain.returncode == 2
    assert_same_behaviour(plain, profiled)


def test_git(tmp_path):
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path), "LC_ALL": "C"}
    plain, profiled = run_both(["git", "--version"], env=env, profile=tmp_path / "p.coz")
    assert_same_behaviour(plain, profiled)
    for name in ("plain", "profiled"):
        (tmp_path / name).mkdir()
    plain = subprocess.run(["git", "init", "-q", "."], cwd=tmp_path / "plain", capture_output=True,
                           env={**os.environ, **env})
    profiled = coz_run([*FAST, "-o", str(tmp_path / "p.coz")], ["git", "init", "-q", "."],
                       cwd=tmp_path / "profiled", env=env)
    assert_same_behaviour(plain, profiled)
    assert (tmp_path / "profiled" / ".git" / "HEAD").is_file()
    # git log in an empty repository fails with status 128
    plain = subprocess.run(["git", "log"], cwd=tmp_path / "plain", capture_output=True, env={**os.environ, **env})
    profiled = coz_run([*FAST, "-o", str(tmp_path / "p.coz")], ["git", "log"], cwd=tmp_path / "profiled", env=env)
    assert plain.returncode == 128
    assert_same_behaviour(plain, profiled)


def test_java_version(tmp_path):
    plain, profiled = run_both(["java", "-version"], profile=tmp_path / "p.coz")
    assert plain.returncode == 0
    assert_same_behaviour(plain, profiled)


def test_java_program(tmp_path):
    assert shutil.which("javac"), "javac is missing: install default-jdk-headless"
    (tmp_path / "Hostile.java").write_text(JAVA_SOURCE)
    subprocess.run(["javac", "Hostile.java"], cwd=tmp_path, check=True)
    cmd = ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", str(tmp_path), "Hostile"]
    plain, profiled = run_both(cmd, profile=tmp_path / "p.coz")
    assert plain.returncode == 4 and b"npes 20000" in plain.stdout
    assert_same_behaviour(plain, profiled)


def _go():
    """The Go toolchain, as scripts/bootstrap.sh looks for it (it installs none)."""
    return shutil.which("go") or next((g for g in ["/usr/local/go/bin/go"] if os.access(g, os.X_OK)), None)


@pytest.mark.skipif(_go() is None, reason="no Go toolchain (scripts/bootstrap.sh installs none; "
                                          "the C program small_stacks tests the same handler)")
def test_a_go_program(tmp_path):
    # A Go program built with cgo: four goroutines and a sync.Mutex. It
    # crashed at its first samples (the sample handler ran on a goroutine's
    # 2 KiB stack); a --progress line after mu.Lock() counted nothing (its
    # breakpoint sat on the return from the mutex's slow path); and Go's
    # exit by the system call itself was called a SIGKILL.
    src = os.path.join(os.path.dirname(__file__), "programs", "go_mutex")
    exe = tmp_path / "go_mutex"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "1"}
    subprocess.run([_go(), "build", "-o", str(exe), "."], cwd=src, env=env, check=True, timeout=300)
    with open(os.path.join(src, "main.go")) as f:
        line = next(i for i, text in enumerate(f, 1) if text.rstrip().endswith("// PASS"))
    point = f"main.go:{line}"
    out = tmp_path / "g.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms", "-p", point], [str(exe), "2000"])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    passes = int(re.search(rb"go_mutex passes=(\d+)", r.stdout).group(1))
    exps = [x for x in records(out) if x["type"] == "experiment"]
    assert len(exps) >= 5
    counted = sum(p["delta"] for x in exps for p in x["progress"] if p["name"] == point)
    # Experiments cover most of the run (not its start, cool-offs, the end).
    assert 0.5 * passes < counted <= passes, (counted, passes)
    assert b"(it exited with status 0 by the exit system call itself" in r.stderr, r.stderr
    # Ended through C's exit(): the final records are written.
    out2 = tmp_path / "c.coz"
    r = coz_run(["-o", str(out2), "--experiment-length", "100ms", "-p", point], [str(exe), "500", "cexit"])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert b"final records" not in r.stderr, r.stderr
    recs = records(out2)
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit"
    assert any(t["type"] == "thread" for t in recs)


def test_node(tmp_path):
    code = ("let s = 0; for (let i = 0; i < 3e6; i++) s = (s * 31 + i) % 1000003;"
            "console.log('sum', s); console.error('node stderr'); process.exitCode = 3;")
    plain, profiled = run_both(["node", "-e", code], profile=tmp_path / "p.coz")
    assert plain.returncode == 3
    assert_same_behaviour(plain, profiled)


@pytest.mark.parametrize("allocator", ["libjemalloc.so.2", "libtcmalloc_minimal.so.4"])
def test_beside_preloaded_allocator(tmp_path, allocator):
    lib = os.path.join("/usr/lib/x86_64-linux-gnu", allocator)
    assert os.path.exists(lib), f"{lib} is missing: install libjemalloc2 and libtcmalloc-minimal4"
    exe = build_program("hostile_alloc", tmp_path)
    env = {"LD_PRELOAD": lib}
    plain, profiled = run_both([exe], env=env, profile=tmp_path / "p.coz")
    assert plain.returncode == 0
    assert_same_behaviour(plain, profiled)
    recs = records(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown"
    assert any(r["type"] == "experiment" for r in recs)


def test_an_address_sanitizer_build(tmp_path):
    # AddressSanitizer wants its runtime first in the initial library list:
    # profiled, the program needs ASAN_OPTIONS=verify_asan_link_order=0
    # (docs/troubleshooting.md). Then LeakSanitizer, at exit, reported the
    # objects the runtime publishes to its signal handlers and never frees,
    # and the program's exit status was 1.
    exe = build_program("hostile_alloc", tmp_path, flags=("-g", "-O1", "-fsanitize=address"))
    env = {"ASAN_OPTIONS": "verify_asan_link_order=0"}
    plain, profiled = run_both([exe], env=env, profile=tmp_path / "p.coz")
    assert plain.returncode == 0, plain.stderr.decode()
    assert_same_behaviour(plain, profiled)
    recs = records(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown"
    assert any(r["type"] == "experiment" for r in recs)


def test_program_with_its_own_malloc(tmp_path):
    exe = build_program("hostile_alloc", tmp_path, flags=("-g", "-O1", "-DOWN_MALLOC"))
    plain, profiled = run_both([exe], profile=tmp_path / "p.coz")
    assert plain.returncode == 0 and b"own malloc calls" in plain.stdout
    assert_same_behaviour(plain, profiled)
    recs = records(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown"
    assert any(r["type"] == "experiment" for r in recs)


def test_program_whose_malloc_walks_the_loaded_objects(tmp_path):
    # Its malloc calls dl_iterate_phdr while holding its own lock, as a heap
    # profiler taking a backtrace does. When the runtime took the loader's
    # lock in program threads (libunwind in the sample handler) or allocated
    # under it (the profiler thread's symbolizer), 5 runs in 8 of this
    # program hung for good; the plain own-malloc program above, 1 in ~300.
    exe = build_program("hostile_alloc", tmp_path, flags=("-g", "-O1", "-DOWN_MALLOC", "-DWALK_IN_MALLOC"))
    for run in range(3):
        plain, profiled = run_both([exe], profile=tmp_path / f"p{run}.coz", timeout=30)
        assert plain.returncode == 0 and b"own malloc calls all" in plain.stdout
        assert_same_behaviour(plain, profiled)
        recs = records(tmp_path / f"p{run}.coz")
        assert recs[-1]["type"] == "shutdown"
        assert any(r["type"] == "experiment" for r in recs)


def test_static_program_is_refused_clearly(tmp_path):
    exe = build_program("hostile_alloc", tmp_path, flags=("-g", "-O1", "-static"))
    r = coz_run(FAST, [exe])
    assert r.returncode != 0
    assert b"statically linked" in r.stderr
    assert not (tmp_path / "profile.coz").exists()


def test_setuid_program_is_refused_clearly(tmp_path):
    exe = build_program("hostile_alloc", tmp_path)
    copy = tmp_path / "suid_copy"
    shutil.copy(exe, copy)
    os.chmod(copy, os.stat(copy).st_mode | stat.S_ISUID)
    r = coz_run(FAST, [str(copy)])
    assert r.returncode != 0
    assert b"setuid" in r.stderr
