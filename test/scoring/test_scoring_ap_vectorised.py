"""The vectorised average precision gives, bit for bit, what the per-query loop it replaced
gave (that loop is kept below as the reference), on random matchings with ties, ignored
detections, queries without detections and columns without ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from probench.scoring.ap import average_precision
from probench.scoring.constants import REC_THRS

_EPS = np.spacing(1)


def reference_average_precision(det_query: np.ndarray, det_image: np.ndarray, det_score: np.ndarray,
                                det_order: np.ndarray, tp: np.ndarray, fp: np.ndarray,
                                n_pos: np.ndarray) -> np.ndarray:
    """The per-query loop the vectorised version replaced (probench before issue 21)."""
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
        k_min = np.stack([_k_min_ref(int(n_pos[q, c]), k_min_cache) for c in cols])  # (C, R)
        c_idx, rows = np.nonzero(tps.T)  # true-positive rows, column by column
        n_tp = np.bincount(c_idx, minlength=len(cols))
        first = np.concatenate([[0], np.cumsum(n_tp)[:-1]])
        has = (k_min >= 1) & (k_min <= n_tp[:, None])
        at = np.where(has, first[:, None] + k_min - 1, 0)
        idx = np.where(k_min == 0, 0, np.where(has, rows[at] if len(rows) else 0, n))
        prec = np.where(idx < n, pr[np.minimum(idx, n - 1), np.arange(len(cols))[:, None]], 0.0)
        ap[q, cols] = prec.sum(axis=1) / n_rec
    return ap


def _k_min_ref(n_pos: int, cache: dict[int, np.ndarray]) -> np.ndarray:
    """Per recall point r, the least k with k / n_pos >= r (``n_pos + 1`` if none)."""
    if n_pos not in cache:
        cache[n_pos] = np.searchsorted(np.arange(n_pos + 1) / n_pos, REC_THRS, side="left")
    return cache[n_pos]


@pytest.mark.parametrize("seed", range(60))
def test_vectorised_ap_equals_the_per_query_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, n_q, n_c = int(rng.integers(0, 500)), int(rng.integers(1, 15)), int(rng.integers(1, 8))
    det_query, det_image = rng.integers(0, n_q, n), rng.integers(0, 25, n)
    det_score = np.round(rng.random(n), int(rng.integers(1, 3)))  # ties
    det_order = rng.permutation(n)
    ignored = rng.random((n, n_c)) < 0.2
    tp = (rng.random((n, n_c)) < rng.random()) & ~ignored
    fp = ~tp & ~ignored
    n_pos = rng.integers(0, 9, (n_q, n_c)) * (rng.random((n_q, n_c)) < 0.8)
    args = (det_query, det_image, det_score, det_order, tp, fp, n_pos)
    assert np.array_equal(average_precision(*args), reference_average_precision(*args))
