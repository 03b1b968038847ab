"""`probench eval --prompt-policy P --mode as-fast-as-answered` through the real ROS 2 graph
gives the predictions `probench infer --prompt-policy P` gives, and under `template` the
policy formulation scores as tmpl (docs/PROMPTING.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.grounding_harness import fresh_domain

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.usefixtures("requires_vision_msgs")]


def _json(path: Path) -> object:
    return json.loads(path.read_text())


def _same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        key = ("image_id", "category_id", "score")
        assert [x[k] for k in key] == [y[k] for k in key]
        np.testing.assert_allclose(x["bbox"], y["bbox"], atol=2e-3)  # center/size round trip


def test_eval_with_a_policy_equals_infer(repo_root: Path, tmp_path: Path, ros_env: dict) -> None:
    ros, off = tmp_path / "ros", tmp_path / "off"
    r = subprocess.run(
        [sys.executable, "-m", "probench", "eval", "--domain-id", str(fresh_domain()), "--model",
         "test-instant", "--bag", str(repo_root / "bags" / "probench-sample"), "--out", str(ros),
         "--formulations", "orig,tmpl", "--mode", "as-fast-as-answered", "--prompt-policy", "template"],
        env=ros_env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    o = subprocess.run(
        [sys.executable, "-m", "probench", "infer", "--model", "test-instant", "--dataset",
         str(repo_root / "datasets" / "probench-sample"), "--out", str(off), "--formulations", "orig,tmpl",
         "--prompt-policy", "template", "--no-progress"],
        env=ros_env, capture_output=True, text=True, timeout=120)
    assert o.returncode == 0, o.stderr
    for f in ("orig", "tmpl", "policy"):
        _same(_json(ros / "predictions" / f"{f}.json"), _json(off / "predictions" / f"{f}.json"))
    _same(_json(ros / "predictions" / "policy.json"), _json(ros / "predictions" / "tmpl.json"))
    m = _json(ros / "metrics.json")
    assert isinstance(m, dict)
    assert m["by_formulation"]["policy"]["map50"] == m["by_formulation"]["tmpl"]["map50"]
    assert m["realtime"]["frames_missed"] == 0 and m["realtime"]["misattributed"] == 0
    info = _json(ros / "run.json")
    assert isinstance(info, dict) and info["settings"]["prompt_policy"]["name"] == "template"
    assert info["formulations"] == ["orig", "tmpl", "policy"]
    assert "| policy |" in r.stdout


def test_eval_refuses_a_bad_profile_before_any_node_starts(repo_root: Path, tmp_path: Path,
                                                            ros_env: dict) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "probench", "eval", "--model", "test-instant", "--bag",
         str(repo_root / "bags" / "probench-sample"), "--out", str(tmp_path / "r"), "--prompt-policy", "best",
         "--profile", str(tmp_path / "none.json")],
        env=ros_env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no such file" in r.stderr and r.stderr.strip().count("\n") == 0
    assert not (tmp_path / "r").exists()
