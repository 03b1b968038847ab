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
from helpers.node_cli import node_cli as _cli
from helpers.node_cli import one_line_error as _one_line_error

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]


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
        # PROMPTING.md's explicit form: the node acknowledges the operator's part, and so waits the command
        out = _cli(env, "prompt", "red fire extinguisher by the door => fire extinguisher; a red cup; a door",
                   "--timeout", "20")
        assert out.returncode == 0, out
        want = "active prompts: red fire extinguisher by the door ; a red cup ; a door"
        assert out.stdout.strip() == want, out
        assert peer.label_after(0, ["red fire extinguisher by the door", "a red cup", "a door"], timeout=5)
        out = _cli(env, "prompt", "a red cup; a door")
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


def test_status_text_and_record() -> None:
    """The report's layout, from a view (no ROS): headline first, the transport figure with
    its hint, every diagnostics value; a node without diagnostics yet says so."""
    from probench.console.bridge import DiagnosticsView, NodeView
    from probench.ros.cli_node import status_record, status_text

    values = {"zeta": "1", "model": "owlv2-b", "device": "cuda", "precision": "fp16", "state": "active",
              "transport_loss": "0.9800", "transport_lost": "108", "transport_received": "2",
              "transport_hint": "start the camera driver with FASTDDS_DEFAULT_PROFILES_FILE=/p/fastdds.xml"}
    diag = DiagnosticsView("WARN", "98% of camera frames lost in transport", values, 0.4)
    view = NodeView(node="/grounding_node", present=True, lifecycle="active", prompts=("a cup", "a door"),
                    diagnostics=diag)
    text = status_text(view).splitlines()
    assert text[:6] == [
        "node         /grounding_node",
        "lifecycle    active",
        "model        owlv2-b on cuda (fp16)",
        "prompts      a cup ; a door",
        "transport    98.0% of camera frames lost in the last 10 s (108 lost, 2 received): start the camera "
        "driver with FASTDDS_DEFAULT_PROFILES_FILE=/p/fastdds.xml",
        "diagnostics  WARN: 98% of camera frames lost in transport (0.4 s ago)",
    ]
    keys = [line.split()[0] for line in text[6:]]
    assert keys[:4] == ["state", "model", "device", "precision"]  # the headline keys first, then the rest
    assert keys[4:] == ["zeta", "transport_loss", "transport_lost", "transport_received", "transport_hint"]
    record = json.loads(json.dumps(status_record(view)))
    assert record["diagnostics"]["values"]["transport_lost"] == "108"
    assert record["prompts"] == ["a cup", "a door"]
    bare = status_text(NodeView(node="/n", present=True, lifecycle="unconfigured"))
    assert bare.splitlines()[-1] == "diagnostics  (none received yet)" and "prompts      (none)" in bare
    chosen = DiagnosticsView("OK", "5.0 Hz", {"target": "operator track 7 lost 0.8 s"}, 0.1)
    assert "target       operator track 7 lost 0.8 s" in status_text(
        NodeView(node="/n", present=True, lifecycle="active", diagnostics=chosen)).splitlines()
    plain = NodeView(node="/n", present=True, lifecycle="active", diagnostics=diag)  # no target value
    assert not any(line.startswith("target ") for line in status_text(plain).splitlines())
    busy = status_text(NodeView(node="/n", present=True, lifecycle="unknown"))
    assert "lifecycle    unknown (no answer to get_state: busy in a transition" in busy
