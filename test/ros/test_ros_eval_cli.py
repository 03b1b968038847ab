"""`probench eval` and `evaluator_node` refuse bad input in one line, before any waiting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.exited_node import ExitedNode
from helpers.grounding_harness import fresh_domain
from probench.ros.eval_command import child_environment


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


@pytest.mark.parametrize(("flags", "why"), [
    (["--parity"], "--parity needs --dataset"),
    (["--parity", "--dataset", "nowhere"], "--dataset nowhere: no such folder"),
    (["--parity", "--dataset", ".", "--mode", "camera-rate"], "replays as fast as answered"),
    (["--find-max-rate", "--parity", "--dataset", "."], "two different runs"),
    (["--max-missed", "0.1"], "--max-missed is for --find-max-rate"),
    (["--find-max-rate", "--max-missed", "1.5"], "--max-missed must lie in [0, 1]"),
    (["--budget-ms", "0"], "--budget-ms must be positive"),
])
def test_new_flags_are_checked_in_one_line(repo_root: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str], flags: list[str],
                                           why: str) -> None:
    from probench.cli import main

    bag = str(repo_root / "bags" / "probench-sample")
    rc = main(["eval", "--model", "test-instant", "--bag", bag, "--out", str(tmp_path / "r"), *flags])
    err = capsys.readouterr().err
    assert rc == 2 and why in err and _one_line(err), err
    assert not (tmp_path / "r").exists()


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


def test_out_that_is_a_file_is_one_line(repo_root: Path, tmp_path: Path, ros_env: dict) -> None:
    (tmp_path / "afile").write_text("x")
    bag = str(repo_root / "bags" / "probench-sample")
    r = _eval(ros_env, "--model", "test-instant", "--bag", bag, "--out", str(tmp_path / "afile"))
    assert r.returncode == 2 and "exists and is not a folder" in r.stderr and _one_line(r.stderr), r.stderr
    assert (tmp_path / "afile").read_text() == "x"


def _existing_ros_run(repo_root: Path, out: Path) -> None:
    """A run folder as the evaluator leaves it, for test-slow-5ms in camera-rate mode."""
    from probench.bags.reader import ProbenchBag
    from probench.cache.identity import open_run
    from probench.realtime.eval_run import ros_identity
    from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS

    bag = repo_root / "bags" / "probench-sample"
    grounding = {**GROUNDING_PARAMS.defaults(), "model": "test-slow-5ms", "score_threshold": 0.0,
                 "max_detections": 10000, "image_reliability": "reliable"}
    with ProbenchBag(bag) as b:
        identity = ros_identity(EVALUATOR_PARAMS.defaults(), grounding, b.dataset.summary(), bag=str(bag),
                                compressed=b.compressed)
    open_run(out, identity, formulations=["orig"]).finish()  # an earlier run, ended (its lock released)


@pytest.mark.ros
@pytest.mark.usefixtures("requires_vision_msgs")
def test_a_run_folder_of_another_experiment_is_refused_before_any_node_starts(
        repo_root: Path, tmp_path: Path, ros_env: dict) -> None:
    bag = str(repo_root / "bags" / "probench-sample")
    out = tmp_path / "run"
    _existing_ros_run(repo_root, out)
    before = (out / "run.json").read_text()
    r = _eval(ros_env, "--model", "test-instant", "--bag", bag, "--out", str(out))
    assert r.returncode == 1 and _one_line(r.stderr), r.stderr
    assert "model.name='test-slow-5ms'" in r.stderr and "--overwrite" in r.stderr
    assert "ROS_DOMAIN_ID" not in r.stderr  # refused before the graph was started
    r = _eval(ros_env, "--model", "test-slow-5ms", "--bag", bag, "--out", str(out), "--mode",
              "as-fast-as-answered")
    assert r.returncode == 1 and "settings.mode='camera-rate'" in r.stderr and _one_line(r.stderr), r.stderr
    assert (out / "run.json").read_text() == before  # nothing written
    r = _eval(ros_env, "--model", "test-instant", "--bag", bag, "--out", str(out), "--formulations", "orig",
              "--mode", "as-fast-as-answered", "--overwrite", "--domain-id", str(fresh_domain()))
    assert r.returncode == 0, r.stderr[-3000:]
    info = json.loads((out / "run.json").read_text())
    assert info["model"]["name"] == "test-instant" and info["status"] == "complete" and "resumed" not in info


def test_an_unreadable_run_json_after_the_run_is_one_line_naming_it(
        repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from probench.cli import main
    from probench.ros import node_processes

    out = tmp_path / "run"

    class FinishedNode(ExitedNode):
        """The evaluator's result record says complete, but it left a torn run.json."""

        def evaluate(self, result_file: Path) -> None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "run.json").write_text('{"status": "compl')
            result_file.write_text('{"status": "complete"}')

    monkeypatch.setattr(node_processes.subprocess, "Popen", FinishedNode)  # no ROS graph: the nodes are fakes
    bag = str(repo_root / "bags" / "probench-sample")
    rc = main(["eval", "--model", "test-instant", "--bag", bag, "--out", str(out), "--domain-id", "7"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("probench eval: error: ") and str(out / "run.json") in err[-1]
    assert len(err) == 2 and "ROS_DOMAIN_ID=7" in err[0]  # the start line, then the one-line error


def test_resolved_parameters_follow_rcl_wildcards(tmp_path: Path) -> None:
    from probench.ros.graph import resolved_parameters

    params = tmp_path / "p.yaml"
    params.write_text(
        "/**:\n  ros__parameters: {model: a, device: cpu}\n"
        "/**/grounding_node:\n  ros__parameters: {model: b}\n"
        "/other_node:\n  ros__parameters: {model: c}\n"
        "/*/grounding_node:\n  ros__parameters: {device: cuda}\n"  # one namespace token: not ours
    )
    desc = {"name": "grounding_node", "namespace": "", "parameters": [str(params), {"precision": "fp16"}]}
    assert resolved_parameters(desc) == {"model": "b", "device": "cpu", "precision": "fp16"}
    assert resolved_parameters({**desc, "namespace": "/robot"})["device"] == "cuda"


def test_summary_states_both_pcr_readings_and_why_they_are_null() -> None:
    from probench.cache.records import MetricsRecord, RunRecord
    from probench.ros.cli_eval import summary_table

    info = RunRecord.model_validate({"model": {"name": "tiny-owlv2", "random_weights": True},
                                     "ros": {"mode": "camera-rate", "rate_hz": 30.0}})
    scored = {"by_formulation": {"orig": {"map50": 0.5, "map75": 0.25, "map50_95": 0.3}},
              "pcr50": 0.75, "pcr50_top1": 0.25, "plc": 0.5, "plc_top1": 0.125, "n_targets": 4,
              "pcr_single_formulation_targets": 1, "pcr_null_reason": None}
    text = summary_table(MetricsRecord.model_validate(scored), info)
    assert "PCR@.5 any-of-100 0.7500  top-1 0.2500  (targets 4, single-formulation 1)" in text
    assert "PLC    any-of-100 0.5000  top-1 0.1250" in text and "null" not in text
    null = {**scored, "pcr50": None, "pcr50_top1": None, "pcr_null_reason": "only one formulation was run"}
    null_text = summary_table(MetricsRecord.model_validate(null), info)
    assert "PCR/PLC null: only one formulation was run" in null_text
