"""The one detection type that flows from models to nodes, caches and scoring.

Modelled on supervision's ``Detections``: plain validated numpy arrays, so no
transformers/ultralytics object ever leaks out of :mod:`probench.models`. Adapters build
it with their ``from_*`` helpers; everything downstream only sees this.

Conventions (documented once, used everywhere):
- ``xyxy``: float64 ``(N, 4)`` boxes in **pixels of the original image**, ``x1 <= x2``,
  ``y1 <= y2``, clipped to the image; a box built with the image size has a positive
  width and height (degenerate boxes are dropped at clipping, :meth:`Detections.from_arrays`).
- ``scores``: float64 ``(N,)`` in ``[0, 1]``.
- ``prompt_index``: int64 ``(N,)``: index into the prompt list the detector was called with.
- ``masks``: optional bool ``(N, H, W)`` for segmentation-capable models.
- ``tracker_id``: optional int64 ``(N,)``, as supervision's: each detection's track id
  (the grounding node's tracker), ``-1`` for a detection without one (a track the tracker
  has not confirmed yet); None when nothing was tracked. Every hand-off carries it here,
  never beside the detections.
- ``timings_ms``: per-stage wall time of the call that produced it
  (``text`` when the prompt set had to be made ready, ``preprocess``, ``forward``,
  ``postprocess``; ``total`` is their sum).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import numpy as np
import numpy.typing as npt

STAGES = ("text", "preprocess", "forward", "postprocess")
MAX_PER_PROMPT = 100  # COCO maxDets: the detector contract's cap on boxes per prompt (docs/DESIGN.md)


class CocoResult(TypedDict):
    """One record of a COCO results file (the prediction cache)."""

    image_id: int
    category_id: int
    bbox: list[float]  # x, y, w, h in pixels
    score: float
    track_id: NotRequired[int]  # a tracked detection's track id (sequence runs: the temporal metrics)


def top_per_prompt(scores: npt.ArrayLike, labels: npt.ArrayLike, k: int = MAX_PER_PROMPT) -> np.ndarray:
    """Indices of the kept boxes, highest score first (ties in input order): at most ``k``
    per label (prompt index)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    lab = np.asarray(labels, dtype=np.int64).reshape(-1)
    order = np.argsort(-s, kind="stable")
    grouped = order[np.argsort(lab[order], kind="stable")]  # by label, each in score order
    g = lab[grouped]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, np.int64)
    rank = np.empty(len(g), np.int64)
    rank[grouped] = np.arange(len(g)) - np.repeat(starts, np.diff(np.r_[starts, len(g)]))
    return order[rank[order] < k]


class DetectionsError(ValueError):
    """A Detections object was built from inconsistent arrays."""


SCORE_SLACK = 1e-3  # how far outside [0, 1] a raw score may be and still be clamped (float rounding)


def _check_raw(xyxy: np.ndarray, scores: np.ndarray, prompt_index: np.ndarray) -> None:
    """A :class:`DetectionsError` for a model output that clipping would hide (from_arrays)."""
    bad = ~np.isfinite(xyxy).all(axis=1) if len(xyxy) else np.zeros(0, bool)
    if bad.any():
        raise DetectionsError(f"{int(bad.sum())} of {len(xyxy)} boxes are not finite (e.g. "
                              f"{xyxy[bad][0].tolist()}): a model's output is never clipped or dropped "
                              "silently")
    if len(scores) and not np.isfinite(scores).all():
        raise DetectionsError(f"{int((~np.isfinite(scores)).sum())} of {len(scores)} scores are not finite")
    if len(scores) and (scores.min() < -SCORE_SLACK or scores.max() > 1.0 + SCORE_SLACK):
        raise DetectionsError(f"scores must lie in [0, 1], got {scores.min():g}..{scores.max():g}")
    if len(prompt_index) and prompt_index.dtype.kind not in "iub":
        values = prompt_index.astype(np.float64)
        if not np.isfinite(values).all() or not (values == np.round(values)).all():
            odd = values[~np.isfinite(values) | (values != np.round(values))][0]
            raise DetectionsError(f"prompt indices must be integers, got {odd:g}")


def _tracker_ids(values: npt.ArrayLike, n: int) -> np.ndarray:
    """``values`` as the int64 ``(n,)`` track ids, or a :class:`DetectionsError`."""
    raw = np.asarray(values).reshape(-1)
    if len(raw) != n:
        raise DetectionsError(f"length mismatch: {n} boxes, {len(raw)} track ids")
    if n and raw.dtype.kind not in "iub":
        as_float = raw.astype(np.float64)
        if not np.isfinite(as_float).all() or not (as_float == np.round(as_float)).all():
            raise DetectionsError("track ids must be integers")
    ids = raw.astype(np.int64)
    if n and ids.min() < -1:
        raise DetectionsError(f"track ids must be >= 0, or -1 for none; got {int(ids.min())}")
    return ids


@dataclass(frozen=True)
class Detections:
    xyxy: np.ndarray
    scores: np.ndarray
    prompt_index: np.ndarray
    masks: np.ndarray | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    tracker_id: np.ndarray | None = None

    def __post_init__(self) -> None:
        xyxy = np.asarray(self.xyxy, dtype=np.float64).reshape(-1, 4)
        scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)
        prompt_index = np.asarray(self.prompt_index, dtype=np.int64).reshape(-1)
        n = len(xyxy)
        if len(scores) != n or len(prompt_index) != n:
            raise DetectionsError(
                f"length mismatch: {n} boxes, {len(scores)} scores, {len(prompt_index)} prompt indices"
            )
        if not np.all(np.isfinite(xyxy)) or not np.all(np.isfinite(scores)):
            raise DetectionsError("boxes and scores must be finite")
        if n and (np.any(xyxy[:, 2] < xyxy[:, 0]) or np.any(xyxy[:, 3] < xyxy[:, 1])):
            raise DetectionsError("boxes must be x1 <= x2 and y1 <= y2")
        if n and (scores.min() < 0.0 or scores.max() > 1.0):
            raise DetectionsError("scores must lie in [0, 1]")
        if n and prompt_index.min() < 0:
            raise DetectionsError("prompt indices must be >= 0")
        masks = self.masks
        if masks is not None:
            masks = np.asarray(masks, dtype=bool)
            if masks.ndim != 3 or len(masks) != n:
                raise DetectionsError(f"masks must be (N, H, W) with N={n}, got {masks.shape}")
        object.__setattr__(self, "xyxy", xyxy)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "prompt_index", prompt_index)
        object.__setattr__(self, "masks", masks)
        if self.tracker_id is not None:
            object.__setattr__(self, "tracker_id", _tracker_ids(self.tracker_id, n))
        timings = {k: float(v) for k, v in self.timings_ms.items()}
        if timings and "total" not in timings:
            timings["total"] = sum(timings.get(s, 0.0) for s in STAGES)
        object.__setattr__(self, "timings_ms", timings)

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def empty(cls, timings_ms: dict[str, float] | None = None) -> Detections:
        return cls(np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=np.int64), None, timings_ms or {})

    @classmethod
    def from_arrays(
        cls,
        xyxy: npt.ArrayLike,
        scores: npt.ArrayLike,
        prompt_index: npt.ArrayLike,
        *,
        image_size: tuple[int, int] | None = None,
        masks: np.ndarray | None = None,
        timings_ms: dict[str, float] | None = None,
    ) -> Detections:
        """Build from raw arrays (numpy or torch via ``np.asarray``), clamping scores into
        [0, 1] (from at most :data:`SCORE_SLACK` outside it: float rounding). With
        ``image_size=(height, width)`` boxes are clipped to the image, and a box left with
        zero width or height (e.g. one wholly outside the image, clipped to a line on its
        border) is dropped with its score, prompt index and mask: no consumer can use it, and
        nothing else about which boxes are kept changes.

        A model's output is validated first, never repaired: a NaN or infinite box or score,
        a score further outside [0, 1] or a prompt index that is not an integer raises
        :class:`DetectionsError` (the frame fails, named by its caller), instead of being
        clipped to the border, emptied or truncated."""
        xyxy = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4).copy()
        _check_raw(xyxy, np.asarray(scores, dtype=np.float64).reshape(-1),
                   np.asarray(prompt_index).reshape(-1))
        if image_size is not None:
            h, w = image_size
            xyxy[:, [0, 2]] = xyxy[:, [0, 2]].clip(0, w)
            xyxy[:, [1, 3]] = xyxy[:, [1, 3]].clip(0, h)
        # Some heads emit boxes with swapped corners after clipping: order them.
        x1 = np.minimum(xyxy[:, 0], xyxy[:, 2])
        x2 = np.maximum(xyxy[:, 0], xyxy[:, 2])
        y1 = np.minimum(xyxy[:, 1], xyxy[:, 3])
        y2 = np.maximum(xyxy[:, 1], xyxy[:, 3])
        xyxy = np.stack([x1, y1, x2, y2], axis=1)
        scores = np.clip(np.asarray(scores, dtype=np.float64).reshape(-1), 0.0, 1.0)
        prompt_index = np.asarray(prompt_index).reshape(-1)
        if image_size is not None:
            keep = (x2 > x1) & (y2 > y1)
            same_length = len(scores) == len(keep) == len(prompt_index)
            # wrong lengths are left to the constructor, which names them (DetectionsError)
            if not keep.all() and same_length and (masks is None or len(masks) == len(keep)):
                xyxy, scores, prompt_index = xyxy[keep], scores[keep], prompt_index[keep]
                if masks is not None:
                    masks = np.asarray(masks)[keep]
        return cls(xyxy, scores, prompt_index, masks, timings_ms or {})

    # -- views ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.scores)

    @property
    def xywh(self) -> np.ndarray:
        out = self.xyxy.copy()
        out[:, 2:] -= out[:, :2]
        return out

    def filter(self, keep: np.ndarray) -> Detections:
        """A subset (boolean mask or index array), timings kept."""
        masks = None if self.masks is None else self.masks[keep]
        tracker_id = None if self.tracker_id is None else self.tracker_id[keep]
        return Detections(self.xyxy[keep], self.scores[keep], self.prompt_index[keep], masks, self.timings_ms,
                          tracker_id)

    def with_tracker_id(self, tracker_id: npt.ArrayLike | None) -> Detections:
        """The same detections with their track ids (validated: one per detection, -1 for
        none) or without (None)."""
        return self._replace(tracker_id=None if tracker_id is None else _tracker_ids(tracker_id, len(self)))

    def without_masks(self) -> Detections:
        """The same detections without their masks."""
        return self._replace(masks=None)

    def with_timing(self, stage: str, ms: float) -> Detections:
        """The same detections with one stage's time set (``total`` recomputed). On every
        ``detect()``: the arrays are shared, not validated again (they were when built)."""
        timings = {k: v for k, v in self.timings_ms.items() if k != "total"}
        timings[stage] = float(ms)
        timings["total"] = sum(timings.get(s, 0.0) for s in STAGES)
        return self._replace(timings_ms=timings)

    def _replace(self, **changed: object) -> Detections:
        """A copy with ``changed`` fields, already checked by the caller: the arrays are
        shared, not validated again (they were when built; on every ``detect()``)."""
        out = object.__new__(Detections)
        for name in ("xyxy", "scores", "prompt_index", "masks", "timings_ms", "tracker_id"):
            # a frozen dataclass, built without __post_init__
            object.__setattr__(out, name, changed[name] if name in changed else getattr(self, name))
        return out

    def above(self, threshold: float) -> Detections:
        return self.filter(self.scores >= threshold)

    def to_coco(self, image_id: int, category_ids: Sequence[int]) -> list[CocoResult]:
        """COCO result records; ``category_ids[i]`` is the query id of prompt ``i``. A tracked
        detection's record carries its ``track_id`` (none for -1: no identity)."""
        out: list[CocoResult] = []
        ids = self.tracker_id.tolist() if self.tracker_id is not None else [-1] * len(self)
        for box, score, pi, tid in zip(self.xywh, self.scores, self.prompt_index, ids, strict=True):
            rec: CocoResult = {
                "image_id": int(image_id),
                "category_id": int(category_ids[int(pi)]),
                "bbox": [round(float(v), 3) for v in box],
                "score": round(float(score), 6),
            }
            if tid >= 0:
                rec["track_id"] = tid
            out.append(rec)
        return out
