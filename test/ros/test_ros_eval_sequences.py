"""`probench eval` on a sequence bag through the real ROS 2 graph: the grounding node tracks,
the prompt changes go out as operator prompts, and the prompt-change latency measured through
DDS is at least the slow model's delay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.grounding_harness import fresh_domain
from helpers.slow_colour import DELAY_S
from probench.bags.writer import write_bag
from probench.data.dataset import load_dataset
from probench.data.synthetic_sequences import write_sequence_dataset


def test_a_sequence_bag_is_replayed_at_its_own_rate(repo_root: Path) -> None:
    from probench.bags.reader import ProbenchBag
    from probench.ros.eval_command import bag_rate_hz

    with ProbenchBag(repo_root / "bags" / "probench-sequences") as bag:
        assert bag_rate_hz(bag) == 10.0
    with ProbenchBag(repo_root / "bags" / "probench-sample") as bag:
        assert bag_rate_hz(bag) == 30.0


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.usefixtures("requires_vision_msgs")
def test_sequence_bag_through_ros(repo_root: Path, tmp_path: Path, ros_env: dict) -> None:
    ds = write_sequence_dataset(tmp_path / "ds", 2, 20)
    write_bag(load_dataset(ds), tmp_path / "bag", compressed=True, rate_hz=10.0, progress=False)
    env = {**ros_env, "PYTHONPATH": os.pathsep.join([str(repo_root / "test"), ros_env.get("PYTHONPATH", "")])}
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "probench", "eval", "--model", "helpers.slow_colour:build", "--bag",
         str(tmp_path / "bag"), "--out", str(out), "--formulations", "orig",  # at the bag's 10 Hz
         "--domain-id", str(fresh_domain())],
        env=env, capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "temporal: 2 videos" in r.stdout and "continuity" in r.stdout
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete" and info["settings"]["tracking"] is True
    t = json.loads((out / "metrics.json").read_text())["temporal"]["by_formulation"]["orig"]
    assert t["identity"] == "track_id"  # the node's tracker numbered the boxes
    (pc,) = t["prompt_change"]
    assert pc["latency_ms_ros"] is not None and pc["latency_ms_ros"] >= 1000 * DELAY_S
    assert pc["ack_ms"] is not None and pc["ack_ms"] > 0
    assert t["continuity"] is not None and t["continuity"] > 0
    trace = [json.loads(line) for line in (out / "realtime_frames.jsonl").read_text().splitlines()]
    prompts = [p for p in trace if p.get("kind") == "prompt"]
    assert [p["video_id"] for p in prompts] == [1, 1, 1, 2]  # warm-up, video 1, its change, video 2
