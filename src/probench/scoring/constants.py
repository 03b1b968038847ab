"""The fixed parameters of the metric suite (docs/METRICS.md), as pycocotools spells them.

The float values matter: a match is decided by ``iou >= threshold``, so the thresholds are
built exactly as pycocotools builds them (``np.linspace``) to agree bit for bit.
"""

from __future__ import annotations

import numpy as np

MAX_DETS = 100  # COCO maxDets: per image per query (category)
# 101-point interpolation, as pycocotools' Params.recThrs
REC_THRS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
# the standard ten thresholds of mAP.5:.95, as pycocotools' Params.iouThrs
COCO_IOUS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
# the IoU sweep (docs/METRICS.md) (keys "0.10", ..., "0.90", "0.95")
SWEEP_IOUS = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
# COCO area ranges (inclusive at both ends, as pycocotools compares them)
AREA_RANGES: dict[str, tuple[float, float]] = {
    "all": (0.0, 1e5**2),
    "small": (0.0, 32.0**2),
    "medium": (32.0**2, 96.0**2),
    "large": (96.0**2, 1e5**2),
}
SIZES: tuple[str, ...] = ("small", "medium", "large")
PCR_IOU = 0.5


def sweep_key(t: float) -> str:
    return f"{t:.2f}"


def all_thresholds() -> np.ndarray:
    """The union of the sweep and the standard ten, exact floats, ascending."""
    return np.unique(np.concatenate([SWEEP_IOUS, COCO_IOUS]))
# the absence metrics' operating point when no PCR score threshold is asked: the grounding
# node's default score_threshold (realtime/node_spec.py), what a robot displays and acts on
ABSENCE_DEFAULT_THRESHOLD = 0.3
