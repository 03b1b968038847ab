"""``probench node param set trace_file FIFO --reconfigure`` against a live grounding node:
the configure it asks for fails at once, naming trace_file (it stalled about 100 s before,
lifecycle and /diagnostics unanswered), the node keeps answering its lifecycle service, and a
new trace path then configures and starts with the trace header."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, fresh_domain
from helpers.node_cli import node_cli as _cli

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]


def test_a_fifo_as_trace_file_fails_configure_at_once(
    tmp_path: Path, ros_env: dict[str, str], requires_vision_msgs: None
) -> None:
    from probench.realtime.grounding_trace import TRACE_HEADER

    domain = fresh_domain()
    env = {**ros_env, "ROS_DOMAIN_ID": str(domain)}
    node = NodeProcess(
        ros_env, domain, tmp_path / "node.log", {"model": "test-instant", "prompts": ["a cup"]}
    )
    peer = RosPeer(domain)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    try:
        peer.wait_ready(node)
        # the reconfigure's own deadline (30 s) is far below the old stall: a hang fails here
        out = _cli(env, "param", "set", "trace_file", str(fifo), "--reconfigure", "--timeout", "30")
        assert out.returncode == 1 and "configure" in out.stderr, out
        assert "trace_file" in node.output() and "not a regular file" in node.output()
        status = _cli(env, "status", "--timeout", "10")  # the lifecycle and /diagnostics still answer
        assert status.returncode == 0 and "unconfigured" in status.stdout, status
        trace = tmp_path / "trace.jsonl"
        assert _cli(env, "param", "set", "trace_file", str(trace)).returncode == 0
        configured = _cli(env, "configure", "--timeout", "30")
        assert configured.returncode == 0, configured
        assert trace.read_bytes().startswith(TRACE_HEADER) and fifo.exists() and not fifo.is_file()
        assert "Traceback" not in node.output()
    finally:
        peer.close()
        assert node.stop() == 0
