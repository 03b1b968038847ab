"""`probench eval` and `evaluator_node` refuse bad input in one line, before any waiting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from grounding_harness import fresh_domain

from probench.ros.cli_eval import child_environment


def _run(cmd: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def _eval(env: dict, *args: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "probench", "eval", *args], env)


def _one_line(text: str) -> bool:
    return text.strip().count("\n") == 0 and "Traceback" not in text


def test_bad_bag_model_and_flags(repo_root: Path, tmp_path: Path, ros_env: dict) -> None:
    bag = str(repo_root / "bags" / "probench-sample")
    out = str(tmp_path / "r")
    r = _eval(ros_env, "--model", "test-instant", "--bag", str(tmp_path / "nope"), "--out", out)
    assert r.returncode == 1 and "no such bag" in r.stderr and _one_line(r.stderr)
    (tmp_path / "notabag").mkdir()
    r = _eval(ros_env, "--model", "test-instant", "--bag", str(tmp_path / "notabag"), "--out", out)
    assert r.returncode == 1 and "not a readable rosbag2" in r.stderr and _one_line(r.stderr)
    r = _eval(ros_env, "--model", "no-such-model", "--bag", bag, "--out", str(tmp_path / "r"))
    assert r.returncode == 2 and "unknown model" in r.stderr and _one_line(r.stderr)
    r = _eval(ros_env, "--model", "test-instant", "--bag", bag, "--out", str(tmp_path / "r"), "--rate", "0")
    assert r.returncode == 2 and "--rate must be positive" in r.stderr
    r = _eval(ros_env, "--model", "test-instant", "--bag", bag, "--out", str(tmp_path / "r"),
              "--formulations", "orig,nope")
    assert r.returncode == 2 and "formulations" in r.stderr and _one_line(r.stderr)
    assert not (tmp_path / "r").exists()  # nothing started, nothing written


@pytest.mark.ros
@pytest.mark.usefixtures("requires_vision_msgs")
def test_evaluator_node_bad_parameters(repo_root: Path, tmp_path: Path, ros_env: dict) -> None:
    env = {**ros_env, "ROS_DOMAIN_ID": str(fresh_domain())}
    exe = str(Path(sys.executable).parent / "evaluator_node")
    bag = str(repo_root / "bags" / "probench-sample")
    out = f"out:={tmp_path / 'r'}"
    r = _run([exe, "--ros-args", "-p", f"bag:={bag}", "-p", out, "-p", "mode:=fast"], env)
    assert r.returncode == 2 and "mode must be one of" in r.stderr, r.stderr
    r = _run([exe, "--ros-args", "-p", f"bag:={bag}", "-p", out, "-p", "rate_hz:=30"], env)
    assert r.returncode == 2 and "bad parameter" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = _run([exe, "--ros-args", "-p", f"out:={tmp_path / 'r'}"], env)
    assert r.returncode == 2 and "'bag' is required" in r.stderr
    r = _run([exe, "--ros-args", "-p", f"bag:={tmp_path}", "-p", f"out:={tmp_path / 'r'}"], env)
    assert r.returncode == 1 and "not a readable rosbag2" in r.stderr
    assert "Traceback" not in r.stderr


def test_child_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROS_AUTOMATIC_DISCOVERY_RANGE", raising=False)
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    env = child_environment()
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"  # DDS stays on loopback
    assert 1 <= int(env["ROS_DOMAIN_ID"]) <= 101  # a random domain: no crosstalk
    assert child_environment(42)["ROS_DOMAIN_ID"] == "42"
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")  # on a robot the user chooses
    monkeypatch.setenv("ROS_DOMAIN_ID", "7")
    env = child_environment()
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET" and env["ROS_DOMAIN_ID"] == "7"
