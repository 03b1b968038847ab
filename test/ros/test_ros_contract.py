"""One frame, one answer: the grounding node over DDS, ``probench ground`` on a bag and the
evaluator's fake link give the same answers to the same script (explicit ``=>`` prompts, a
live policy switch, per-frame prompt sets, depth, tracking, masks): class ids, boxes,
scores, track ids, 3D centres and mask images, frame by frame. The evaluator's two links (its
DDS subscriptions on the node's topics, the fake link) build equal Answers from them, track
ids included. A caller whose handling is changed on purpose breaks the agreement (the test
can fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import contract

pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def script() -> contract.Script:
    return contract.script()


@pytest.fixture(scope="module")
def fake_link(script: contract.Script) -> contract.Answers:
    return contract.through_fake_link(script)


def _complete(answers: contract.Answers, script: contract.Script) -> None:
    """Every frame answered with every output, and the script's features really exercised."""
    assert sorted(answers.frames) == script.stamps, answers.caller
    for stamp, outputs in answers.frames.items():
        assert set(outputs) == set(contract.OUTPUTS), (answers.caller, stamp, sorted(outputs))
    classes = [{d[0] for d in answers.frames[t]["detections"]} for t in script.stamps]
    assert classes[0] == {"a red backpack on the floor", "the open door"}  # `=>` gives the operator's part
    assert classes[6] == classes[7] == {"a grey wall", "the open door"}  # the frames' own sets
    assert classes[10] == {"the open door", "a small valve you can turn"}
    ids = [d[3] for t in script.stamps for d in answers.frames[t]["detections"]]
    assert any(i for i in ids), "tracking gave no ids"
    assert all(answers.frames[t]["detections_3d"] for t in script.stamps), "a frame without 3D"


def _complete_answers(answers: contract.Answers, script: contract.Script) -> None:
    """One Answer per frame, none failed or unreadable, track ids on them."""
    assert sorted(answers.evaluator) == script.stamps, answers.caller
    assert all(len(v) == 1 and not v[0][4] and not v[0][5] for v in answers.evaluator.values())
    ids = [t for v in answers.evaluator.values() for t in (v[0][3] or ())]
    assert any(t >= 0 for t in ids), "no track id reached the evaluator"


def test_the_fake_link_exercises_every_feature(script: contract.Script, fake_link: contract.Answers) -> None:
    _complete(fake_link, script)
    _complete_answers(fake_link, script)
    # the policy switch changed what the model got: the scripted boxes follow the text it is given
    first, later = (fake_link.frames[script.stamps[i]]["detections"] for i in (2, 4))
    assert {d[2] for d in first} != {d[2] for d in later}


def test_ground_answers_as_the_fake_link(script: contract.Script, fake_link: contract.Answers,
                                         tmp_path: Path) -> None:
    ground = contract.through_ground(script, tmp_path)
    _complete(ground, script)
    assert contract.differences(fake_link, ground) == []


def test_the_node_answers_as_the_fake_link(script: contract.Script, fake_link: contract.Answers,
                                           tmp_path: Path, ros_env: dict[str, str],
                                           requires_vision_msgs: None) -> None:
    node = contract.through_node(script, ros_env, tmp_path / "node.log")
    _complete(node, script)
    assert contract.differences(fake_link, node) == []
    _complete_answers(node, script)  # the DDS link's Answers, from the node's bytes
    assert contract.answer_differences(fake_link, node) == []


def _ignore_policy_switches(link: Any) -> None:
    link.set_prompt_policy = lambda *args: None


def _no_tracking(link: Any) -> None:
    link.core.spatial.trackers = None


@pytest.mark.parametrize("tamper", [_ignore_policy_switches, _no_tracking])
def test_a_caller_changed_on_purpose_breaks_the_contract(script: contract.Script, fake_link: contract.Answers,
                                                         tamper: Any) -> None:
    changed = contract.through_fake_link(script, tamper=tamper)
    assert contract.differences(fake_link, changed) != []
    assert contract.answer_differences(fake_link, changed) != []  # the Answers' comparison can fail too
