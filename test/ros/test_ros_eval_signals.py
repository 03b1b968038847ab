"""`probench eval` never leaves its nodes behind: Ctrl-C stops the graph (exit 130, resumable),
and if `probench eval` itself is killed its children follow (no orphaned nodes). A node
signalled on its own exits 0 (a clean stop), yet `probench eval` still reports the
interrupted evaluation and exits non-zero."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.grounding_harness import fresh_domain, tiny_eval_bag

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.usefixtures("requires_vision_msgs")]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _start(tmp_path: Path, env: dict, run: str) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / run
    cmd = [sys.executable, "-m", "probench", "eval", "--model", "test-slow-100ms",
           "--bag", str(tmp_path / "bag"), "--out", str(out), "--formulations", "orig",
           "--mode", "as-fast-as-answered",
           "--domain-id", str(fresh_domain())]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    log = out / "predictions" / "orig.partial.jsonl"
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if log.exists() and log.read_bytes().count(b"\n") >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    return proc, out


def test_ctrl_c_stops_the_graph_and_the_run_resumes(tmp_path: Path, ros_env: dict) -> None:
    tiny_eval_bag(tmp_path, ros_env)
    proc, out = _start(tmp_path, ros_env, "run")
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err
    deadline = time.monotonic() + 15
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group_alive(proc.pid), "a node outlived probench eval"
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    assert not (out / "predictions" / "orig.json").exists()


def test_killed_probench_eval_takes_its_nodes_along(tmp_path: Path, ros_env: dict) -> None:
    tiny_eval_bag(tmp_path, ros_env)
    proc, _ = _start(tmp_path, ros_env, "run")
    proc.kill()  # only probench eval itself: its children get SIGTERM from the kernel
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 20
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _group_alive(proc.pid)
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)  # clean up before failing
    assert not alive, "nodes were orphaned when probench eval died"


def _children(pid: int) -> dict[str, int]:
    """Executable name -> pid of the direct children of ``pid``."""
    out = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        cmd = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        names = [Path(part.decode()).name for part in cmd[:2]]
        for name in ("grounding_node", "evaluator_node"):
            if name in names:
                out[name] = int(child)
    return out


def test_a_signalled_evaluator_exits_0_and_probench_eval_reports_the_interruption(
        tmp_path: Path, ros_env: dict) -> None:
    tiny_eval_bag(tmp_path, ros_env)
    proc, out = _start(tmp_path, ros_env, "run")
    os.kill(_children(proc.pid)["evaluator_node"], signal.SIGTERM)  # not the group: only the node
    _, err = proc.communicate(timeout=60)
    assert "evaluator_node: stopped (SIGTERM) before the run finished" in err
    assert "Traceback" not in err
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted before it finished (status: interrupted)" in err
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
