"""Per-frame prompt sets bound by stamp (issue 9): a LabelInfo on ``frame_prompts`` stamped
like a frame gives that frame its prompt set; other frames keep the operator's prompts; the
detector's LRU text cache makes repeated sets free (counted in /diagnostics)."""

from __future__ import annotations

import pytest
from grounding_harness import NodeProcess, RosPeer, class_ids, fresh_domain, image

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]

SET_A = ["the door", "a chair"]
SET_B = ["a red cup"]


@pytest.fixture(scope="module")
def graph(tmp_path_factory, ros_env, requires_vision_msgs):
    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path_factory.mktemp("fp") / "node.log", {
        "model": "test-instant", "score_threshold": 0.0, "prompts": ["an operator lamp"],
        "image_reliability": "reliable", "diagnostics_period": 0.2,
    })
    peer = RosPeer(domain)
    try:
        peer.wait_ready(node)
        assert peer.spin_until(lambda: peer.pub_frame_prompts.get_subscription_count() > 0, 30)
        assert peer.label_after(0, ["an operator lamp"]), node.output()
        yield node, peer
    finally:
        peer.close()
        node.stop()


def _frame(t: RosPeer, sec: int, texts: list[str] | None) -> list[str]:
    header = t.header(sec)
    if texts is not None:
        assert t.send_frame_prompts(texts, header)
    t.send_image(image(seed=sec % 7), header)
    ans = t.answer(sec)
    assert ans is not None, f"no answer for frame {sec}"
    return sorted(class_ids(ans))


def test_each_frame_is_answered_with_its_own_set_and_others_with_the_operators(graph) -> None:
    node, t = graph
    n_labels = len(t.labels)
    assert _frame(t, 1001, SET_A) == sorted(SET_A)
    assert _frame(t, 1002, SET_B) == SET_B
    assert _frame(t, 1003, None) == ["an operator lamp"]  # no set for it: live prompting unchanged
    assert _frame(t, 1004, SET_A) == sorted(SET_A)
    t.spin_for(0.3)
    assert len(t.labels) == n_labels  # stamped sets are not operator prompt changes: no LabelInfo ack
    vals = t.last_diag_values()
    assert int(vals["frames_bound"]) >= 3 and vals["prompts"] == "an operator lamp"
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
