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
    tp = tp[o]  # one gather; each query is then a contiguous slice
    fp = fp[o]
    bounds = np.searchsorted(det_query[o], np.arange(n_q + 1))
    n_rec = len(REC_THRS)
    k_min_cache: dict[int, np.ndarray] = {}
    for q in np.flatnonzero((n_pos > 0).any(axis=1)):
        cols = np.flatnonzero(n_pos[q] > 0)
        lo, hi = bounds[q], bounds[q + 1]
        n = hi - lo
        if n == 0:
            ap[q, cols] = 0.0
            continue
        tps = tp[lo:hi][:, cols]
        tp_sum = np.cumsum(tps, axis=0, dtype=np.float64)
        fp_sum = np.cumsum(fp[lo:hi][:, cols], axis=0, dtype=np.float64)
        pr = tp_sum / (fp_sum + tp_sum + _EPS)
        pr = np.maximum.accumulate(pr[::-1], axis=0)[::-1]
        # searchsorted(recall, REC_THRS, "left") without a loop over columns: recall is
        # tp_sum / n_pos, so the first row with recall >= r is the row of the k-th true
        # positive, k the least count with k / n_pos >= r (same float division as COCO).
        k_min = np.stack([_k_min(int(n_pos[q, c]), k_min_cache) for c in cols])  # (C, R)
        c_idx, rows = np.nonzero(tps.T)  # true-positive rows, column by column
        n_tp = np.bincount(c_idx, minlength=len(cols))
        first = np.concatenate([[0], np.cumsum(n_tp)[:-1]])
        has = (k_min >= 1) & (k_min <= n_tp[:, None])
        at = np.where(has, first[:, None] + k_min - 1, 0)
        idx = np.where(k_min == 0, 0, np.where(has, rows[at] if len(rows) else 0, n))
        prec = np.where(idx < n, pr[np.minimum(idx, n - 1), np.arange(len(cols))[:, None]], 0.0)
        ap[q, cols] = prec.sum(axis=1) / n_rec
    return ap


def _k_min(n_pos: int, cache: dict[int, np.ndarray]) -> np.ndarray:
    """Per recall point r, the least k with k / n_pos >= r (``n_pos + 1`` if none)."""
    if n_pos not in cache:
        cache[n_pos] = np.searchsorted(np.arange(n_pos + 1) / n_pos, REC_THRS, side="left")
    return cache[n_pos]


def mean_ap(ap: np.ndarray) -> np.ndarray:
    """Mean over queries with ground truth, per column; NaN where no query has any."""
    valid = ap > -1
    cnt = valid.sum(axis=0)
    tot = np.where(valid, ap, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
