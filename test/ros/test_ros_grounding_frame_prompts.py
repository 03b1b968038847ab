"""Per-frame prompt sets bound by stamp (issue 9): a LabelInfo on ``frame_prompts`` stamped
like a frame gives that frame its prompt set; other frames get the operator's prompts (and,
while stamped sets are in use, none at all when there are no operator prompts: an empty
answer would read as "nothing found"); the detector's LRU text cache makes repeated sets free
(counted in /diagnostics)."""

from __future__ import annotations

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, class_ids, fresh_domain, image

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]

SET_A = ["the door", "a chair"]
SET_B = ["a red cup"]


@pytest.fixture(scope="module")
def graph(tmp_path_factory, ros_env, requires_vision_msgs):
    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path_factory.mktemp("fp") / "node.log", {
        "model": "test-instant", "score_threshold": 0.0, "image_reliability": "reliable",
        "diagnostics_period": 0.2, "frame_prompts_wait": 0.3,
    })
    peer = RosPeer(domain)
    try:
        peer.wait_ready(node)
        assert peer.spin_until(lambda: peer.pub_frame_prompts.get_subscription_count() > 0, 30)
        yield node, peer
    finally:
        peer.close()
        node.stop()


def _frame(t: RosPeer, sec: int, texts: list[str] | None, timeout: float = 10.0) -> list[str] | None:
    header = t.header(sec)
    if texts is not None:
        assert t.send_frame_prompts(texts, header)
    t.send_image(image(seed=sec % 7), header)
    ans = t.answer(sec, timeout=timeout)
    return None if ans is None else sorted(class_ids(ans))


def test_each_frame_is_answered_with_its_own_set_and_others_with_the_operators(graph) -> None:
    node, t = graph
    assert _frame(t, 1001, SET_A) == sorted(SET_A)
    assert _frame(t, 1002, SET_B) == SET_B
    # stamped sets in use, no set for this frame and no operator prompts: no answer at all
    assert _frame(t, 1003, None, timeout=2.0) is None
    n_labels = len(t.labels)
    t.send_prompt("an operator lamp")
    assert t.label_after(n_labels, ["an operator lamp"]), node.output()[-2000:]
    assert _frame(t, 1004, None) == ["an operator lamp"]  # no set for it: the operator's prompts
    assert _frame(t, 1005, SET_A) == sorted(SET_A)  # its own set wins over the operator's
    n_labels = len(t.labels)
    t.spin_for(0.3)
    assert len(t.labels) == n_labels  # stamped sets are not operator prompt changes: no LabelInfo ack
    vals = t.last_diag_values()
    assert int(vals["frames_bound"]) >= 3 and int(vals["frames_unbound"]) >= 1  # frame 1003 at least
    assert vals["prompts"] == "an operator lamp"
    assert "Traceback" not in node.output()


def test_repeated_sets_cost_no_text_encoder_call(graph) -> None:
    _, t = graph
    _frame(t, 2001, SET_A)
    _frame(t, 2002, SET_B)
    t.spin_for(0.5)  # a fresh /diagnostics after both sets were seen
    before = t.last_diag_values()
    for k in range(6):  # alternating known sets: every one is a cache hit
        _frame(t, 2003 + k, SET_A if k % 2 == 0 else SET_B)
    t.spin_for(0.5)
    after = t.last_diag_values()
    assert int(after["text_encoder_calls"]) == int(before["text_encoder_calls"])
    assert int(after["text_cache_hits"]) >= int(before["text_cache_hits"]) + 6
    assert int(after["text_cache_misses"]) == int(before["text_cache_misses"])
    _frame(t, 2100, ["a brand new prompt"])  # the counter does move for a new set
    t.spin_for(0.5)
    assert int(t.last_diag_values()["text_encoder_calls"]) == int(after["text_encoder_calls"]) + 1
