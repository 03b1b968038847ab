"""Hostile parameter values on a live grounding node, through SetParameters (what `ros2
param set` does): a prompt_profile of 100,000 nested `[`, linked to /dev/zero or a FIFO,
`prompts` with ESC sequences, diagnostics_period 1e-9. Each is refused with a one-line
reason; the node stays active, answers the next frame, and its peak memory stays small."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, class_ids, fresh_domain, image
from helpers.hostile import PEAK_LIMIT_MB, nested_json

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM")


def test_hostile_parameter_values_never_kill_the_node(
    tmp_path: Path, ros_env: dict[str, str], requires_vision_msgs: None
) -> None:
    from lifecycle_msgs.srv import GetState
    from rcl_interfaces.msg import Parameter as ParamMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path / "node.log", {
        "model": "test-instant", "score_threshold": 0.0, "prompts": ["a cup"],
        "image_reliability": "reliable",
    })
    t = RosPeer(domain)
    try:
        t.wait_ready(node)
        cli = t.node.create_client(SetParameters, "/grounding_node/set_parameters")
        assert cli.wait_for_service(timeout_sec=10)

        def set_param(name: str, value: ParameterValue) -> object:
            fut = cli.call_async(SetParameters.Request(parameters=[ParamMsg(name=name, value=value)]))
            t.spin_until(fut.done, 30)
            assert fut.done(), f"set {name}: no answer (node died?)\n{node.output()[-3000:]}"
            return fut.result().results[0]

        def text(v: str) -> ParameterValue:
            return ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=v)

        deep = tmp_path / "deep.json"
        deep.write_text(nested_json(100_000))
        zero = tmp_path / "zero.json"
        zero.symlink_to("/dev/zero")
        fifo = tmp_path / "fifo.json"
        os.mkfifo(fifo)
        for path, why in ((deep, "nested deeper than 1024 levels"), (zero, "not a regular file"),
                          (fifo, "not a regular file")):
            r = set_param("prompt_profile", text(str(path)))
            assert not r.successful and why in r.reason and "\n" not in r.reason, r.reason
        r = set_param("prompts", ParameterValue(type=ParameterType.PARAMETER_STRING_ARRAY,
                                                string_array_value=["\x1b[2J\x1b[31mcup"]))
        assert not r.successful and "control character U+001B" in r.reason, r.reason
        r = set_param("diagnostics_period", ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                           double_value=1e-9))
        assert not r.successful and "diagnostics_period" in r.reason and "0.01" in r.reason, r.reason

        assert node.proc.poll() is None, node.output()[-3000:]  # still running ...
        get_state = t.node.create_client(GetState, "/grounding_node/get_state")
        assert get_state.wait_for_service(timeout_sec=10)
        fut = get_state.call_async(GetState.Request())
        t.spin_until(fut.done, 10)
        assert fut.result().current_state.label == "active"  # ... and active
        t.send_image(image(), t.header(7))
        ans = t.answer(7)
        assert ans is not None and class_ids(ans) == ["a cup"]  # the previous prompts kept
        assert _peak_mb(node.pid) < PEAK_LIMIT_MB
    finally:
        t.close()
        node.stop()
