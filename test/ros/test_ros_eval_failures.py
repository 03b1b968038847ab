"""``probench eval`` when something fails under it: a model that does not load is reported
as a failed load (never "interrupted; rerun to resume"), and a run folder made immutable
mid-run costs one line per process (no traceback), after which the run resumes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.usefixtures("requires_vision_msgs")]


def _eval(env: dict, *args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "probench", "eval", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]


def _problems(stderr: str) -> list[str]:
    """stderr without ROS's [INFO]/[WARN] log lines."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("[")]


def test_a_model_that_does_not_load_is_a_failed_load(repo_root: Path, tmp_path: Path, ros_env: dict) -> None:
    bag = str(repo_root / "bags" / "probench-sample")
    proc = _eval(ros_env, "--model", "owlv2-b", "--bag", bag, "--out", str(tmp_path / "run"))
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    assert "cannot load model 'owlv2-b'" in err and "are not on this machine" in err
    assert "interrupted" not in err and "rerun the same command" not in err, err[-3000:]
    assert _problems(err)[-1].startswith("probench eval: error: grounding_node failed (exit code 1) before "
                                         "the evaluation finished, e.g. its model did not load")


def _chattr(flag: str, *paths: Path) -> bool:
    tool = shutil.which("chattr")
    if tool is None:
        return False
    return subprocess.run([tool, flag, *map(str, paths)], capture_output=True).returncode == 0


def test_a_run_folder_made_immutable_mid_eval_costs_one_line(repo_root: Path, tmp_path: Path,
                                                            ros_env: dict) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    if not _chattr("+i", probe):
        pytest.skip("chattr +i needs root on ext2/3/4, xfs or btrfs (the immutable attribute)")
    _chattr("-i", probe)
    bag, out = str(repo_root / "bags" / "probench-sample"), tmp_path / "run"
    args = ("--model", "test-slow-300ms", "--bag", bag, "--out", str(out), "--mode", "as-fast-as-answered")
    proc = _eval(ros_env, *args)
    log = out / "predictions" / "orig.partial.jsonl"
    try:
        deadline = time.monotonic() + 90
        while not (log.is_file() and log.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _chattr("+i", out / "predictions", out)
        _, err = proc.communicate(timeout=120)
    finally:
        _chattr("-i", out / "predictions", out)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    problems = _problems(err)
    assert any(ln.startswith("evaluator_node: error: cannot write ") and "Operation not permitted" in ln
               for ln in problems), problems
    assert problems[-1].startswith("probench eval: error: evaluator_node exited with code 1"), problems
    # writable again: the same command resumes and finishes the run
    again = _eval(ros_env, *args)
    _, err = again.communicate(timeout=180)
    assert again.returncode == 0, err[-3000:]
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
