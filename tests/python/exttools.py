"""The real tools the export tests run (docs/conventional.md, "Tools for the
tests"): found under the build's tools folder or on PATH, built with
`scripts/bootstrap.sh tools` when missing and the toolchain that builds them is
here, skipped (with the reason) only when neither the tool nor its toolchain is."""

import json
import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("COZ_BUILD_DIR", os.path.join(REPO, "build"))
TOOL_DIRS = [os.path.join(BUILD, "tools", "bin"), os.path.join(REPO, "build", "tools", "bin")]
SCHEMA = os.path.join(REPO, "tests", "tools", "node_modules", "speedscope", "dist", "release",
                      "file-format-schema.json")
TOOLCHAIN_PLACES = ("/usr/local/go/bin", os.path.expanduser("~/.cargo/bin"))


def bootstrap_tools():
    subprocess.run(["bash", os.path.join(REPO, "scripts", "bootstrap.sh"), "tools"],
                   env=dict(os.environ, COZ_BUILD_DIR=BUILD), check=False, timeout=900)


def tool(name, toolchain):
    for d in TOOL_DIRS:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found:
        return found
    chain = shutil.which(toolchain) or next(
        (os.path.join(d, toolchain) for d in TOOLCHAIN_PLACES
         if os.access(os.path.join(d, toolchain), os.X_OK)), None)
    if chain is None:
        pytest.skip(f"neither {name} nor {toolchain} (which builds it) is on this machine")
    bootstrap_tools()
    path = os.path.join(TOOL_DIRS[0], name)
    assert os.access(path, os.X_OK), f"{name} could not be built with {chain}: see scripts/bootstrap.sh tools"
    return path


def schema_validator():
    """A validator of speedscope's file-format schema, as its npm package ships it."""
    try:
        import jsonschema
    except ImportError:
        pytest.fail("jsonschema is missing: it is in the test extras (pip install -e '.[test]', "
                    "which scripts/bootstrap.sh runs)")
    if not os.path.exists(SCHEMA):
        bootstrap_tools()
    assert os.path.exists(SCHEMA), f"{SCHEMA} is missing: run scripts/bootstrap.sh tools"
    with open(SCHEMA) as f:
        return jsonschema.Draft7Validator(json.load(f))
