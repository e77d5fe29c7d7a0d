"""The unit tests pass under AddressSanitizer + UndefinedBehaviorSanitizer
(a fresh -DCOZ_ASAN=ON build; about a minute on 2 cores). The ThreadSanitizer
half takes as long again and is run by scripts/sanitizers.sh."""

import os
import subprocess

from conftest import REPO


def test_unit_tests_pass_under_asan_and_ubsan(tmp_path):
    env = dict(os.environ, COZ_SANITIZERS="ASAN")
    r = subprocess.run([os.path.join(REPO, "scripts", "sanitizers.sh"), str(tmp_path)], env=env,
                       capture_output=True, timeout=600)
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    assert r.returncode == 0, out[-6000:]
    assert "== COZ_ASAN=ON: passed" in out
    assert "[  PASSED  ]" in out and "ERROR: AddressSanitizer" not in out and "runtime error:" not in out
