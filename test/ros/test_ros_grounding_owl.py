"""grounding_node with a real model architecture (tiny-owlv2, random weights): the image's
header comes back on the detections, class_ids follow the prompt set acknowledged by LabelInfo."""

from __future__ import annotations

import pytest

from helpers.grounding_harness import NodeProcess, RosPeer, class_ids, fresh_domain, image

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(240)]


def test_tiny_owlv2_header_and_prompt_change(tmp_path, ros_env, requires_vision_msgs) -> None:
    domain = fresh_domain()
    node = NodeProcess(ros_env, domain, tmp_path / "node.log", {
        "model": "tiny-owlv2", "score_threshold": 0.0, "prompts": ["a cat", "a dog"],
        "max_detections": 20, "image_reliability": "reliable",
    })
    peer = RosPeer(domain)
    try:
        peer.wait_ready(node, timeout=150)  # torch + transformers import and model build
        assert peer.label_after(0, ["a cat", "a dog"], timeout=60), node.output()[-2000:]
        header = peer.header(1700000000, 123456789, "camera_optical")
        peer.send_image(image(64, 80), header)
        ans = peer.answer(1700000000, 123456789, timeout=60)
        assert ans is not None, node.output()[-2000:]
        assert ans.header == header and all(d.header == header for d in ans.detections)
        ids = class_ids(ans)
        assert 0 < len(ids) <= 20 and set(ids) <= {"a cat", "a dog"}
        scores = [d.results[0].hypothesis.score for d in ans.detections]
        assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)

        n = len(peer.labels)
        peer.send_prompt("a red backpack")
        assert peer.label_after(n, ["a red backpack"], timeout=60)
        peer.send_image(image(64, 80, seed=5), peer.header(1700000001))
        ans = peer.answer(1700000001, timeout=60)
        assert ans is not None and class_ids(ans) and set(class_ids(ans)) == {"a red backpack"}
    finally:
        peer.close()
        node.stop()
    assert "Traceback" not in node.output()
