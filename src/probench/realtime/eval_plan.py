"""Step 1 of the evaluator, ``plan``, and its attribution rule (no ROS needed).

Plan: for each formulation, every frame of the bag not yet in the run's cache, in bag
order, with its own prompt set: the distinct prompt texts of the frame's label space under
that formulation (query-id order; identical texts asked once). The frames are streamed one
after the other at the replay rate whatever their label spaces (docs/EVALUATION.md); a
frame with an empty label space is not sent (nothing to ask) and is recorded with no
detections.

Attribution: an answer is credited only to the frame whose (fresh, unique) stamp it
carries, and each detection's class_id must be one of that frame's prompt texts; it is then
credited to every query of the frame with that text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probench.detections import Detections
from probench.vocabulary import (
    POLICY_FORMULATION,
    AttributionError,
    CocoResult,
    detections_to_results,
    unique_prompts,
)

__all__ = ["AttributionError", "FormulationPlan", "FramePlan", "frame_plan", "plan_formulation",
           "results_for_frame"]


@dataclass(frozen=True)
class FramePlan:
    """One frame under one formulation: what to send and how to read the answer."""

    formulation: str
    image_id: int
    bag_time_ns: int  # the bag timestamp of its image message (to read it back)
    texts: tuple[str, ...]  # distinct prompt texts: the frame's own prompt set
    groups: tuple[tuple[int, ...], ...]  # groups[i]: the query ids answered by texts[i]


@dataclass
class FormulationPlan:
    """The frames of one formulation still to do."""

    formulation: str
    frames: list[FramePlan] = field(default_factory=list)  # to stream, in bag order
    empty: list[FramePlan] = field(default_factory=list)  # empty label space: nothing sent
    already_done: int = 0  # frames found in the run's cache (a resumed run)


def frame_plan(formulation: str, info: Mapping[str, Any], bag_time_ns: int = 0) -> FramePlan:
    """The frame's prompt set; under ``policy`` its orig prompts (the grounding node's prompt
    policy turns them into what the model gets, and answers under them)."""
    qids = [int(q["query_id"]) for q in info["label_space"]]
    key = "orig" if formulation == POLICY_FORMULATION else formulation
    prompts = [str(q[key]) for q in info["label_space"]]
    texts, groups = unique_prompts(qids, prompts)
    return FramePlan(formulation, int(info["image_id"]), int(bag_time_ns), tuple(texts),
                     tuple(tuple(g) for g in groups))


def plan_formulation(
    frames: Sequence[tuple[int, Mapping[str, Any]]], formulation: str, done: Iterable[int] = ()
) -> FormulationPlan:
    """The plan of one formulation from the bag's ``(bag time, frame info)`` list, leaving
    out the images in ``done`` (already in the cache)."""
    done = {int(i) for i in done}
    out = FormulationPlan(formulation)
    for bag_time, info in frames:
        if int(info["image_id"]) in done:
            out.already_done += 1
            continue
        fp = frame_plan(formulation, info, bag_time)
        (out.frames if fp.texts else out.empty).append(fp)
    return out


def results_for_frame(fp: FramePlan, detections: Detections, labels: Sequence[str]) -> list[CocoResult]:
    """COCO results of one answered frame (``detections``' prompt indices point into
    ``labels``, the answer's class ids), each box credited to every query of its text;
    :class:`AttributionError` when a class_id is not in the frame's prompt set. Each result
    of a tracked box carries its ``track_id`` (the detections' ``tracker_id``: the temporal
    metrics' identity, scoring/temporal.py)."""
    index = {t: i for i, t in enumerate(fp.texts)}
    used = sorted({int(i) for i in detections.prompt_index.tolist()})
    unknown = sorted({labels[i] for i in used if labels[i] not in index})
    if unknown:
        raise AttributionError(f"class_id(s) {unknown!r} are not in the frame's prompt set")
    to_text = np.array([index.get(label, 0) for label in labels], dtype=np.int64)
    dets = Detections(detections.xyxy, detections.scores, to_text[detections.prompt_index],
                      tracker_id=detections.tracker_id)
    return detections_to_results(dets, fp.image_id, fp.groups)
