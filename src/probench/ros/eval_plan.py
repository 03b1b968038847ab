"""What the evaluator node does, without ROS: the replay plan, attribution, realtime figures.

Plan ("epochs", docs/DESIGN.md): for each formulation, the bag's frames are grouped by
identical prompt set (the distinct prompt texts of their label space, in query-id order);
each group is one prompt hand-over followed by a stream of its frames. Attribution: a
Detection2DArray is credited to the frame whose (fresh, unique) stamp it carries, and each
detection's class_id (a prompt text) to every query of that frame with that text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from probench.errors import CheckFailed
from probench.stats import summarize
from probench.vocabulary import AttributionError, detections_to_results, unique_prompts


class PlanError(CheckFailed):
    """A bag's frames cannot be replayed under the evaluator's prompt protocol."""


@dataclass
class FramePlan:
    """One frame under one formulation: what to send and how to read the answer."""

    formulation: str
    image_id: int
    index: int  # position of the frame in the bag (its BagFrame lives in the node's list)
    texts: tuple[str, ...]  # distinct prompt texts, the prompt set the node is given
    groups: list[list[int]]  # groups[i]: the query ids answered by texts[i]


@dataclass
class Group:
    """An epoch: frames of one formulation sharing a prompt set."""

    formulation: str
    texts: tuple[str, ...]
    frames: list[FramePlan] = field(default_factory=list)

    @property
    def prompt_message(self) -> str:
        return ";".join(self.texts)


def frame_plan(formulation: str, info: Mapping, index: int) -> FramePlan:
    qids = [int(q["query_id"]) for q in info["label_space"]]
    prompts = [str(q[formulation]) for q in info["label_space"]]
    texts, groups = unique_prompts(qids, prompts)
    for t in texts:
        # The prompt topic is ';'-separated (CONTRACTS §5): such a text cannot be sent intact.
        if ";" in t:
            raise PlanError(
                f"image {info['image_id']}: the {formulation} prompt {t!r} contains ';', which the "
                "grounding node's prompt topic uses as separator"
            )
    return FramePlan(formulation, int(info["image_id"]), index, tuple(texts), groups)


def plan_groups(
    infos: Sequence[Mapping], formulation: str, done: Iterable[int] = ()
) -> tuple[list[Group], list[FramePlan]]:
    """Groups of the frames still to do (in order of first appearance), and the frames
    with an empty label space (nothing to ask: recorded with no detections)."""
    done = set(done)
    groups: dict[tuple[str, ...], Group] = {}
    empty: list[FramePlan] = []
    for index, info in enumerate(infos):
        if int(info["image_id"]) in done:
            continue
        fp = frame_plan(formulation, info, index)
        if not fp.texts:
            empty.append(fp)
            continue
        groups.setdefault(fp.texts, Group(formulation, fp.texts)).frames.append(fp)
    return list(groups.values()), empty


def results_for_frame(
    fp: FramePlan, xyxy: np.ndarray, scores: np.ndarray, class_ids: Sequence[str]
) -> list[dict]:
    """COCO results of one answered frame, each box credited to every query of its text."""
    from probench.detections import Detections

    index = {t: i for i, t in enumerate(fp.texts)}
    unknown = sorted({c for c in class_ids if c not in index})
    if unknown:
        raise AttributionError(f"class_id(s) {unknown!r} are not in the frame's prompt set")
    pidx = np.array([index[c] for c in class_ids], dtype=np.int64)
    # Boxes came through the message as center/size: rebuild without re-clipping them.
    dets = Detections.from_arrays(xyxy, scores, pidx)
    return detections_to_results(dets, fp.image_id, fp.groups)


# -- realtime figures ------------------------------------------------------------------
def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {k: None if v is None else round(v, 4) for k, v in summarize(values).items()}


def realtime_summary(
    records: Iterable[Mapping], *, budget_ms: float, rate_hz: float, mode: str
) -> dict:
    """CONTRACTS §3 ``realtime`` from the per-frame records.

    - ``within_budget``: fraction of SENT frames answered within ``budget_ms`` of their
      stamp (a missed frame is not within budget).
    - ``latency_ms``: stamp-to-detection-arrival of the answered frames.
    - ``jitter_ms``: |actual send interval - intended interval| between consecutive frames of
      a group (the replay clock's accuracy); intended = 1/rate in camera-rate mode, the
      run's mean interval in as-fast-as-answered mode (which has no fixed period).
    """
    latest: dict[tuple[str, int], Mapping] = {}
    for r in records:  # a frame re-sent after a resume: its last record counts
        latest[(str(r["formulation"]), int(r["image_id"]))] = r
    recs = [r for r in latest.values() if r.get("sent_ns") is not None]
    lat = [float(r["latency_ms"]) for r in recs if r.get("latency_ms") is not None]
    intervals = [float(r["send_interval_ms"]) for r in recs if r.get("send_interval_ms") is not None]
    if mode == "camera-rate":
        intended = 1000.0 / rate_hz
    else:
        intended = float(np.mean(intervals)) if intervals else math.nan
    jitter = [abs(i - intended) for i in intervals] if intervals else []
    sent = len(recs)
    received = len(lat)
    within = sum(1 for v in lat if v <= budget_ms)
    span_ns = [int(r["sent_ns"]) for r in recs]
    return {
        "budget_ms": float(budget_ms),
        "rate_hz": float(rate_hz),
        "mode": mode,
        "frames_sent": sent,
        "frames_received": received,
        "frames_missed": sent - received,
        "within_budget": round(within / sent, 6) if sent else None,
        "latency_ms": _stats(lat),
        "jitter_ms": _stats(jitter),
        "jitter_of": "send interval vs intended interval",
        "achieved_send_rate_hz": (
            round(1000.0 / float(np.mean(intervals)), 3) if intervals and np.mean(intervals) > 0 else None
        ),
        "stray_messages": 0,
        "n_intervals": len(intervals),
        "span_s": round((max(span_ns) - min(span_ns)) / 1e9, 3) if span_ns else 0.0,
    }
