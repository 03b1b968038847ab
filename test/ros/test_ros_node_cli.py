"""``probench node`` against a running grounding node (a private ROS domain): status,
prompt with its acknowledgement, the lifecycle transitions, and one-line failures."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]


def _cli(env: dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "probench", "node", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def _one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("probench node: error: "), proc.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_status_prompt_and_lifecycle(tmp_path, ros_env, requires_vision_msgs) -> None:
    domain = fresh_domain()
    env = {**ros_env, "ROS_DOMAIN_ID": str(domain)}
    node = NodeProcess(ros_env, domain, tmp_path / "node.log",
                       {"model": "test-instant", "autostart": False, "diagnostics_period": 0.5,
                        "image_reliability": "reliable"})
    peer = RosPeer(domain)
    try:
        got = json.loads(_cli(env, "status", "--json", "--timeout", "30").stdout)
        assert got["lifecycle"] == "unconfigured" and got["prompts"] == []
        diag = got["diagnostics"]
        assert diag["level"] == "WARN" and diag["values"]["model"] == "test-instant"

        out = _cli(env, "configure")
        assert out.returncode == 0 and out.stdout.strip() == "/grounding_node: unconfigured -> inactive", out
        # inactive: the node takes the prompt, but acknowledges only once active
        _one_line_error(_cli(env, "prompt", "a cup", "--timeout", "3"), "no acknowledgement")
        out = _cli(env, "activate")
        assert out.returncode == 0 and out.stdout.strip() == "/grounding_node: inactive -> active", out
        _one_line_error(_cli(env, "activate"), "refused 'activate'")

        out = _cli(env, "prompt", "a red cup; a door")
        assert out.returncode == 0 and out.stdout.strip() == "active prompts: a red cup ; a door", out
        assert peer.label_after(0, ["a red cup", "a door"], timeout=5)  # the node really took it
        out = _cli(env, "prompt", "a red cup; a door")  # the same set again: a fresh ack, not the old one
        assert out.returncode == 0, out

        text = _cli(env, "status").stdout
        assert "lifecycle    active" in text and "prompts      a red cup ; a door" in text
        assert "model        test-instant on cpu (fp32)" in text
        assert "transport    0.0% of camera frames" in text
        assert "frames_received" in text

        watch = subprocess.Popen([sys.executable, "-m", "probench", "node", "status", "--watch", "--json"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(6.0)
        watch.send_signal(signal.SIGINT)
        stdout, stderr = watch.communicate(timeout=20)
        reports = [json.loads(line) for line in stdout.splitlines()]
        assert watch.returncode == 0 and len(reports) >= 3, (stdout, stderr)  # one per diagnostics (0.5 s)
        assert all(r["lifecycle"] == "active" for r in reports)

        assert _cli(env, "deactivate").stdout.strip() == "/grounding_node: active -> inactive"
        assert _cli(env, "cleanup").stdout.strip() == "/grounding_node: inactive -> unconfigured"
        _one_line_error(_cli(env, "status", "--node", "/robot9/grounding_node", "--timeout", "2"),
                        "no grounding node /robot9/grounding_node answered", f"ROS_DOMAIN_ID={domain}")
        usage = _cli(env, "prompt", " ; ")
        assert usage.returncode == 2 and "empty" in usage.stderr
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        assert node.stop() == 0
