"""grounding_node's prompt policy over DDS (docs/PROMPTING.md): switched at run time without
dropping the prompts, class ids stay the operator's prompts, bad values are refused with the
previous policy kept, and /diagnostics says what the model gets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, class_ids, fresh_domain, image

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]

TYPED = "the red fire extinguisher mounted next to the door"


def _expected_center(text: str, rgb: np.ndarray) -> tuple[float, float]:
    """Where the scripted model (test-instant) puts its box when given ``text``."""
    from probench.models.testing import ScriptedDetector

    d = ScriptedDetector().detect(rgb, [text])
    x1, y1, x2, y2 = d.xyxy[0]
    return (x1 + x2) / 2, (y1 + y2) / 2


def _center(ans: object) -> tuple[float, float]:
    p = ans.detections[0].bbox.center.position  # type: ignore[attr-defined]
    return p.x, p.y


def test_policy_switches_at_run_time(
    tmp_path: Path, ros_env: dict[str, str], requires_vision_msgs: None
) -> None:
    from rcl_interfaces.msg import Parameter as ParamMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters, SetParameters, SetParametersAtomically

    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path / "node.log", {
        "model": "test-instant", "score_threshold": 0.0, "prompts": [TYPED],
        "image_reliability": "reliable", "diagnostics_period": 0.3,
    })
    t = RosPeer(domain)
    try:
        t.wait_ready(node)
        assert t.label_after(0, [TYPED]), node.output()
        rgb = image()
        t.send_image(rgb, t.header(1))
        ans = t.answer(1)
        assert ans is not None and class_ids(ans) == [TYPED]
        assert _center(ans) == pytest.approx(_expected_center(TYPED, rgb), abs=1e-3)  # as typed

        cli = t.node.create_client(SetParameters, "/grounding_node/set_parameters")
        atomic = t.node.create_client(SetParametersAtomically, "/grounding_node/set_parameters_atomically")
        assert cli.wait_for_service(timeout_sec=10) and atomic.wait_for_service(timeout_sec=10)

        def set_params(**values: str) -> object:
            """One parameter, or several at once (atomically: one check of them all)."""
            kind = ParameterType.PARAMETER_STRING
            params = [ParamMsg(name=k, value=ParameterValue(type=kind, string_value=v))
                      for k, v in values.items()]
            if len(params) == 1:
                fut = cli.call_async(SetParameters.Request(parameters=params))
                t.spin_until(fut.done, 10)
                return fut.result().results[0]
            fut = atomic.call_async(SetParametersAtomically.Request(parameters=params))
            t.spin_until(fut.done, 10)
            return fut.result().result

        n = len(t.labels)
        res = set_params(prompt_policy="categorical")
        assert res.successful, res.reason
        assert t.label_after(n, [TYPED]), node.output()[-2000:]  # acknowledged; the operator's prompt
        t.send_image(rgb, t.header(2))
        ans = t.answer(2)
        assert ans is not None and class_ids(ans) == [TYPED]  # class_id stays what was typed
        assert _center(ans) == pytest.approx(_expected_center("fire extinguisher", rgb), abs=1e-3)

        # bad values: one-line reasons, the categorical policy stays
        r = set_params(prompt_policy="smart")
        assert not r.successful and "as_typed" in r.reason
        r = set_params(prompt_profile=str(tmp_path / "none.json"))
        assert not r.successful and "no such file" in r.reason
        profile = tmp_path / "profile.json"
        profile.write_text(json.dumps({"probench_profile": 1, "models": {"owlv2-b": {"best": "tmpl"}}}))
        r = set_params(prompt_policy="best", prompt_profile=str(profile))
        assert not r.successful and "no entry for model 'test-instant'" in r.reason
        t.send_prompt("a cup =>")  # an empty explicit form: refused, previous prompts stay
        t.send_image(rgb, t.header(3))
        ans = t.answer(3)
        assert ans is not None and class_ids(ans) == [TYPED]
        assert _center(ans) == pytest.approx(_expected_center("fire extinguisher", rgb), abs=1e-3)

        # the explicit form wins over the derived one; class_id is the query part
        n = len(t.labels)
        t.send_prompt("the red cup by the sink => mug")
        assert t.label_after(n, ["the red cup by the sink"]), node.output()[-2000:]
        t.send_image(rgb, t.header(4))
        ans = t.answer(4)
        assert ans is not None and class_ids(ans) == ["the red cup by the sink"]
        assert _center(ans) == pytest.approx(_expected_center("mug", rgb), abs=1e-3)

        vals = t.last_diag_values()
        assert vals["prompt_policy"] == "categorical"
        assert vals["prompt_0"] == "you typed 'the red cup by the sink' -> the model gets 'mug'"
        assert int(vals["policy_rejected"]) == 3 and int(vals["prompts_as_typed_fallback"]) == 0

        get = t.node.create_client(GetParameters, "/grounding_node/get_parameters")
        fut = get.call_async(GetParameters.Request(names=["prompt_policy", "prompts"]))
        t.spin_until(fut.done, 10)
        values = fut.result().values
        assert values[0].string_value == "categorical"
        assert list(values[1].string_array_value) == ["the red cup by the sink => mug"]
    finally:
        t.close()
        node.stop()


def test_bad_policy_at_startup_is_one_line(tmp_path: Path, ros_env: dict[str, str],
                                           requires_vision_msgs: None) -> None:
    node = NodeProcess(ros_env, fresh_domain(), tmp_path / "log",
                       {"model": "test-instant", "prompt_profile": str(tmp_path / "none.json")})
    rc = node.proc.wait(timeout=60)
    node.stop()
    assert rc != 0
    assert "no such file" in node.output()
