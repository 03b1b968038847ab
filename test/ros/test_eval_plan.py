"""The evaluator's plan, attribution and realtime figures (no ROS needed)."""

from __future__ import annotations

import numpy as np
import pytest

from probench.ros.eval_plan import (
    AttributionError,
    PlanError,
    frame_plan,
    plan_groups,
    realtime_summary,
    results_for_frame,
)


def _info(image_id: int, queries: list[tuple[int, str, str]]) -> dict:
    return {"image_id": image_id, "file_name": f"{image_id}.jpg", "width": 100, "height": 80, "domain": "",
            "label_space": [{"query_id": q, "orig": o, "cat": c, "tmpl": "a photo of " + o}
                            for q, o, c in queries]}


INFOS = [
    _info(1, [(1, "red valve", "valve"), (2, "rusty pipe", "pipe"), (3, "pipe to hold", "pipe")]),
    _info(2, [(4, "the door", "door")]),
    _info(3, [(1, "red valve", "valve"), (2, "rusty pipe", "pipe"), (3, "pipe to hold", "pipe")]),
    _info(4, []),
]


def test_frames_grouped_by_prompt_set_in_first_seen_order() -> None:
    groups, empty = plan_groups(INFOS, "cat")
    assert [g.texts for g in groups] == [("valve", "pipe"), ("door",)]
    assert [fp.image_id for fp in groups[0].frames] == [1, 3]
    assert groups[0].prompt_message == "valve;pipe"
    assert groups[0].frames[0].groups == [[1], [2, 3]]  # shared text answers both queries
    assert [fp.image_id for fp in empty] == [4]
    # under orig the texts differ, so the same frames form a 3-prompt group
    groups, _ = plan_groups(INFOS, "orig", done=[1])
    assert [g.texts for g in groups] == [("the door",), ("red valve", "rusty pipe", "pipe to hold")]
    assert [fp.image_id for fp in groups[1].frames] == [3]  # image 1 already done: resumed


def test_shared_prompt_text_is_credited_to_each_query() -> None:
    fp = frame_plan("cat", INFOS[0], 0)
    xyxy = np.array([[10.0, 10.0, 30.0, 40.0], [0.0, 0.0, 5.0, 5.0]])
    results = results_for_frame(fp, xyxy, np.array([0.9, 0.2]), ["pipe", "valve"])
    assert sorted((r["category_id"], r["score"]) for r in results) == [(1, 0.2), (2, 0.9), (3, 0.9)]
    assert results[0]["bbox"] == [10.0, 10.0, 20.0, 30.0] and results[0]["image_id"] == 1
    with pytest.raises(AttributionError, match="door"):
        results_for_frame(fp, xyxy[:1], np.array([0.5]), ["door"])


def test_separator_in_a_prompt_is_refused() -> None:
    with pytest.raises(PlanError, match="contains ';'"):
        frame_plan("orig", _info(9, [(1, "left; right", "x")]), 0)


def test_realtime_summary() -> None:
    recs = [
        {"formulation": "orig", "image_id": 1, "sent_ns": 0, "latency_ms": 10.0, "send_interval_ms": None},
        {"formulation": "orig", "image_id": 2, "sent_ns": 33_000_000, "latency_ms": 50.0,
         "send_interval_ms": 33.0},
        {"formulation": "orig", "image_id": 3, "sent_ns": 67_000_000, "latency_ms": None,
         "send_interval_ms": 34.0},
        # image 3 resent after a resume: the last record wins
        {"formulation": "orig", "image_id": 3, "sent_ns": 90_000_000, "latency_ms": 20.0,
         "send_interval_ms": 33.5},
        {"formulation": "cat", "image_id": 1, "sent_ns": 100_000_000, "latency_ms": None,
         "send_interval_ms": None},
    ]
    rt = realtime_summary(recs, budget_ms=33.3, rate_hz=30.0, mode="camera-rate")
    assert (rt["frames_sent"], rt["frames_received"], rt["frames_missed"]) == (4, 3, 1)
    assert rt["within_budget"] == 0.5  # 10 and 20 ms of 4 sent frames
    assert rt["latency_ms"]["max"] == 50.0 and rt["latency_ms"]["p50"] == 20.0
    assert rt["jitter_ms"]["max"] == pytest.approx(0.3333, abs=1e-3)  # |33.0 - 33.333|
    assert rt["budget_ms"] == 33.3 and rt["rate_hz"] == 30.0 and rt["mode"] == "camera-rate"
    empty = realtime_summary([], budget_ms=33.3, rate_hz=30.0, mode="as-fast-as-answered")
    assert empty["frames_sent"] == 0 and empty["within_budget"] is None and empty["latency_ms"]["p50"] is None


def test_prefetch_keeps_order_bounds_memory_and_passes_errors() -> None:
    import time

    from probench.ros.eval_run import prefetch

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
