"""A plugin model through the ROS 2 graph: `probench eval` on the sample bag with the
example plugin (examples/probench-example-plugin) on the path with its entry-point
metadata; the grounding node resolves it through the same registry as `probench infer`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.grounding_harness import fresh_domain
from helpers.plugin_env import install_example


@pytest.mark.ros
@pytest.mark.usefixtures("requires_vision_msgs")
def test_example_plugin_through_probench_eval(repo_root: Path, tmp_path: Path, ros_env: dict) -> None:
    site = install_example(tmp_path / "site")
    env = {**ros_env, "PYTHONPATH": os.pathsep.join([str(site), ros_env.get("PYTHONPATH", "")])}
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "probench", "eval", "--model", "example-colour", "--bag",
         str(repo_root / "bags" / "probench-sample"), "--out", str(out), "--formulations", "orig",
         "--mode", "as-fast-as-answered", "--domain-id", str(fresh_domain())],
        env=env, capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete"
    assert info["model"]["name"] == "example-colour" and info["model"]["family"] == "example"
    realtime = json.loads((out / "realtime.json").read_text())
    assert realtime["frames_received"] == realtime["frames_sent"] == 10 and realtime["frames_missed"] == 0
    assert json.loads((out / "predictions" / "orig.json").read_text())  # the colour prompts found pixels
