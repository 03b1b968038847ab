"""The evaluator's plan and attribution rule (no ROS needed)."""

from __future__ import annotations

import numpy as np
import pytest

from probench.detections import Detections
from probench.realtime.eval_plan import AttributionError, frame_plan, plan_formulation, results_for_frame


def _info(image_id: int, queries: list[tuple[int, str, str]]) -> dict:
    return {
        "image_id": image_id,
        "file_name": f"{image_id}.jpg",
        "width": 100,
        "height": 80,
        "domain": "",
        "label_space": [
            {"query_id": q, "orig": o, "cat": c, "tmpl": "a photo of " + o} for q, o, c in queries
        ],
    }


FRAMES = [
    (1000, _info(1, [(1, "red valve", "valve"), (2, "rusty pipe", "pipe"), (3, "pipe to hold", "pipe")])),
    (2000, _info(2, [(4, "the door", "door")])),
    (3000, _info(3, [(1, "red valve", "valve"), (2, "rusty pipe", "pipe"), (3, "pipe to hold", "pipe")])),
    (4000, _info(4, [])),
]


def test_every_frame_keeps_its_own_prompt_set_in_bag_order() -> None:
    plan = plan_formulation(FRAMES, "cat")
    assert [fp.image_id for fp in plan.frames] == [1, 2, 3]  # no grouping: one stream, bag order
    assert [fp.texts for fp in plan.frames] == [("valve", "pipe"), ("door",), ("valve", "pipe")]
    assert plan.frames[0].groups == ((1,), (2, 3))  # a shared text answers both queries
    assert [fp.bag_time_ns for fp in plan.frames] == [1000, 2000, 3000]
    assert [fp.image_id for fp in plan.empty] == [4] and plan.already_done == 0
    resumed = plan_formulation(FRAMES, "orig", done=[1, 4])
    assert (
        [fp.image_id for fp in resumed.frames] == [2, 3] and resumed.empty == [] and resumed.already_done == 2
    )
    assert resumed.frames[1].texts == ("red valve", "rusty pipe", "pipe to hold")


def test_shared_prompt_text_is_credited_to_each_query() -> None:
    fp = frame_plan("cat", FRAMES[0][1])
    xyxy = np.array([[10.0, 10.0, 30.0, 40.0], [0.0, 0.0, 5.0, 5.0]])
    dets = Detections(xyxy, np.array([0.9, 0.2]), np.array([0, 1]))
    results = results_for_frame(fp, dets, ("pipe", "valve"))
    assert sorted((r["category_id"], r["score"]) for r in results) == [(1, 0.2), (2, 0.9), (3, 0.9)]
    assert results[0]["bbox"] == [10.0, 10.0, 20.0, 30.0] and results[0]["image_id"] == 1
    assert all("track_id" not in r for r in results)  # an untracked answer: no identity
    with pytest.raises(AttributionError, match="door"):
        results_for_frame(fp, Detections(xyxy[:1], np.array([0.5]), np.array([0])), ("door",))
    # a label no detection uses is no attribution error; a tracked box's results carry its id
    tracked = dets.with_tracker_id([4, -1])
    results = results_for_frame(fp, tracked, ("pipe", "valve", "never used"))
    assert sorted((r["category_id"], r.get("track_id")) for r in results) == [(1, None), (2, 4), (3, 4)]


def test_a_prompt_with_a_semicolon_is_sent_intact() -> None:
    # The per-frame set travels as a LabelInfo (one class_name per prompt): no separator to
    # escape any more, unlike the ';'-separated operator prompt topic.
    fp = frame_plan("orig", _info(9, [(1, "left; right", "x")]))
    assert fp.texts == ("left; right",)


def test_prefetch_keeps_order_bounds_memory_and_passes_errors() -> None:
    import time

    from probench.realtime.eval_run import prefetch

    produced = []

    def items():
        for i in range(50):
            produced.append(i)
            yield i

    it = prefetch(items(), depth=4)
    assert next(it) == 0
    time.sleep(0.2)
    assert len(produced) <= 1 + 4 + 1  # consumed + queued + the one waiting to be queued
    assert list(it) == list(range(1, 50))

    def failing():
        yield 1
        raise ValueError("corrupt frame")

    it = prefetch(failing())
    assert next(it) == 1
    with pytest.raises(ValueError, match="corrupt frame"):
        next(it)
