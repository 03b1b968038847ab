"""DDS must stay on loopback: every entry point that can start rclpy sets LOCALHOST.

Removing ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST from .ci/run, the Makefile's test or demo
target, scripts/demo.sh or test/conftest.py makes one of these tests fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

SETTING = "ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST"


def test_test_process_runs_with_localhost():
    assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST"
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "YOLO_OFFLINE"):
        assert os.environ.get(var) == "1", var


def test_conftest_sets_it_before_anything_imports_rclpy(repo_root):
    # A bare interpreter that loads only the conftest sees the setting.
    code = (
        "import importlib.util, os, sys; sys.modules.pop('rclpy', None); "
        f"spec = importlib.util.spec_from_file_location('c', {str(repo_root / 'test' / 'conftest.py')!r}); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        "print(os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'], 'rclpy' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "ROS_AUTOMATIC_DISCOVERY_RANGE"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["LOCALHOST", "False"]


def test_ros_env_fixture_sets_it(ros_env):
    assert ros_env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"


def test_ci_run_exports_it(repo_root):
    text = (repo_root / ".ci" / "run").read_text()
    assert re.search(rf"^export {SETTING}\s*$", text, re.M), ".ci/run must export " + SETTING
    # ... before it runs anything
    assert text.index(SETTING) < text.index("make test")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(("target", "runs"), [("test", "-m pytest"), ("demo", "scripts/demo.sh")])
def test_makefile_targets_set_it(repo_root, target, runs):
    # What make would run (-n: print only), for the line that starts the target's real work.
    out = subprocess.run(["make", "-n", "-C", str(repo_root), target], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if runs in line]
    assert lines, f"make {target} does not run {runs!r}:\n{out.stdout}"
    for line in lines:
        assert SETTING in line.split(runs)[0], f"make {target} runs {runs!r} without {SETTING}"


def test_demo_script_sets_it(repo_root):
    text = (repo_root / "scripts" / "demo.sh").read_text()
    assert 'export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"' in text
