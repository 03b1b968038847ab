"""COCO average precision from matched detections (pycocotools' ``accumulate``, vectorised
over thresholds and area ranges, one query at a time).

Per query, detections of every evaluated image are ordered by descending score, ties broken
by image id then by their rank inside the image (pycocotools concatenates images in id
order, then sorts with a stable mergesort). Precision is made monotone from the right and
read at the 101 recall points (``searchsorted(..., side="left")``); AP is their mean. A
query without non-ignored ground truth gets -1 (excluded from means, pycocotools' convention).
"""

from __future__ import annotations

import numpy as np

from probench.scoring.constants import REC_THRS

_EPS = np.spacing(1)


def average_precision(
    det_query: np.ndarray,
    det_image: np.ndarray,
    det_score: np.ndarray,
    det_order: np.ndarray,
    tp: np.ndarray,
    fp: np.ndarray,
    n_pos: np.ndarray,
) -> np.ndarray:
    """AP per (query, column): ``tp``/``fp`` are (N, C) bool per detection and column (an
    area range x IoU threshold); ``n_pos`` is (Q, C) non-ignored GT counts. Returns (Q, C)
    with -1 where ``n_pos`` is 0."""
    n_q, n_c = n_pos.shape
    ap = np.full((n_q, n_c), -1.0)
    o = np.lexsort((det_order, det_image, -det_score, det_query))
    q_sorted = det_query[o]
    bounds = np.searchsorted(q_sorted, np.arange(n_q + 1))
    n_rec = len(REC_THRS)
    for q in np.flatnonzero((n_pos > 0).any(axis=1)):
        rows = o[bounds[q] : bounds[q + 1]]
        cols = np.flatnonzero(n_pos[q] > 0)
        if len(rows) == 0:
            ap[q, cols] = 0.0
            continue
        tp_sum = np.cumsum(tp[rows][:, cols], axis=0, dtype=np.float64)
        fp_sum = np.cumsum(fp[rows][:, cols], axis=0, dtype=np.float64)
        rc = tp_sum / n_pos[q, cols]
        pr = tp_sum / (fp_sum + tp_sum + _EPS)
        pr = np.maximum.accumulate(pr[::-1], axis=0)[::-1]
        n = len(rows)
        for j, c in enumerate(cols):
            idx = np.searchsorted(rc[:, j], REC_THRS, side="left")
            ok = idx < n
            ap[q, c] = pr[idx[ok], j].sum() / n_rec
    return ap


def mean_ap(ap: np.ndarray) -> np.ndarray:
    """Mean over queries with ground truth, per column; NaN where no query has any."""
    valid = ap > -1
    cnt = valid.sum(axis=0)
    tot = np.where(valid, ap, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
