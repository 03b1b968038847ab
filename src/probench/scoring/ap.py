"""COCO average precision from matched detections (pycocotools' ``accumulate``, vectorised
over queries, thresholds and area ranges).

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
    with -1 where ``n_pos`` is 0.

    All queries at once, on the true-positive rows only (precision rises only there, so the
    precision envelope is the suffix maximum over them): at the k-th true positive of a
    (column, query) run, tp = k and fp = the rows of the query so far minus k minus the
    ignored ones (integers, so exactly the per-query cumulative sums); the envelope at the
    101 recall points is a maximum over the runs' pieces between the points read, then a
    running maximum over the points (exact: no arithmetic on the precisions)."""
    n_q, n_c = n_pos.shape
    ap = np.full((n_q, n_c), -1.0)
    counted = n_pos > 0
    ap[counted] = 0.0  # no true positive: every precision read is 0
    n = len(det_query)
    if n == 0 or not counted.any():
        return ap
    o = np.lexsort((det_order, det_image, -det_score, det_query))
    tp = tp[o]  # one gather; each query is then a contiguous run of rows
    ignored = ~tp & ~fp[o]
    q_row = det_query[o]
    start = np.searchsorted(q_row, np.arange(n_q))
    # true positives, column by column, rows ascending (so grouped by (column, query))
    e_col, e_row = np.nonzero(tp.T)
    e_q = q_row[e_row]
    keep = counted[e_q, e_col]
    e_col, e_row, e_q = e_col[keep], e_row[keep], e_q[keep]
    if len(e_row) == 0:
        return ap
    g_key = e_col.astype(np.int64) * n_q + e_q
    g_start = np.flatnonzero(np.concatenate([[True], g_key[1:] != g_key[:-1]]))
    g_size = np.diff(np.concatenate([g_start, [len(g_key)]]))
    t_sum = np.arange(len(g_key)) - np.repeat(g_start, g_size) + 1
    i_col, i_row = np.nonzero(ignored.T)
    i_key = i_col.astype(np.int64) * n + i_row  # sorted
    base = e_col.astype(np.int64) * n
    e_start = start[e_q]
    n_ig = np.searchsorted(i_key, base + e_row, "right") - np.searchsorted(i_key, base + e_start, "left")
    f_sum = (e_row - e_start + 1) - t_sum - n_ig
    t_f, f_f = t_sum.astype(np.float64), f_sum.astype(np.float64)
    prec = t_f / (f_f + t_f + _EPS)
    # per run and recall point: the k-th true positive, k the least with k / n_pos >= r
    g_q, g_c = e_q[g_start], e_col[g_start]
    counts, which = np.unique(n_pos[g_q, g_c], return_inverse=True)  # few distinct GT counts
    k_min = np.stack([_k_min(int(v)) for v in counts])[which.reshape(-1)]
    k = np.maximum(k_min, 1)  # recall 0: the envelope's maximum, at the first true positive
    ok = k <= g_size[:, None]
    at = g_start[:, None] + np.minimum(k, g_size[:, None]) - 1  # (G, R), rising along each row
    pieces = np.maximum.reduceat(prec, at.reshape(-1)).reshape(at.shape)  # [at_j, at_j+1) or run end
    env = np.maximum.accumulate(pieces[:, ::-1], axis=1)[:, ::-1]
    read = np.where(ok, env, 0.0)
    ap[g_q, g_c] = read.sum(axis=1) / len(REC_THRS)
    return ap


def _k_min(n_pos: int) -> np.ndarray:
    """Per recall point r, the least k with k / n_pos >= r (``n_pos + 1`` if none), with
    pycocotools' float division."""
    return np.searchsorted(np.arange(n_pos + 1) / n_pos, REC_THRS, side="left")


def mean_ap(ap: np.ndarray) -> np.ndarray:
    """Mean over queries with ground truth, per column; NaN where no query has any."""
    valid = ap > -1
    cnt = valid.sum(axis=0)
    tot = np.where(valid, ap, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
