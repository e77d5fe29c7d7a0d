"""Make the in-tree package importable without installing it."""

import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "profiles")
UPSTREAM_PROFILES = "/usr/share/coz-profiler/viewer/profiles"
