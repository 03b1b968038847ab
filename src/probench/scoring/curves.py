"""Precision-recall and F1-versus-confidence curves per formulation (docs/METRICS.md, "Curves").

Both come from one sweep of a score threshold ``s`` over 0, 0.01, ..., 1 on the IoU-0.5
matching the AP uses (area "all", label spaces, maxDets 100), with every query pooled (a
robot keeps every detection scoring at least ``s``, whatever the query):

- TP(s) / FP(s): the kept predictions scoring >= s that are true / false positives
  (predictions matched to crowd GT are ignored, as in AP);
- precision(s) = TP / (TP + FP) (None where nothing scores >= s), recall(s) = TP / targets;
- F1(s) = 2 TP / (2 TP + FP + (targets - TP)).

The highest threshold reaching the best F1 is the operating point: the ``score_threshold`` to give the
grounding node for this model and formulation. Pooled over queries, the PR curve is not
the per-query average that AP takes; it is what a deployed detector's output looks like.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from probench.cache.records import Curve, Curves
from probench.scoring.constants import PCR_IOU
from probench.scoring.match import Matched

THRESHOLDS = np.round(np.linspace(0.0, 1.0, 101), 2)


class Evaluated(Protocol):
    """What the curves read of one formulation's evaluation (the suite's ``_Formulation``)."""

    m: Matched


def curve(ev: Evaluated, n_targets: int) -> Curve:
    """One formulation's sweep: ``score_thresholds``, ``precision``, ``recall``, ``f1`` (lists
    of 101), ``best_f1`` and ``best_f1_threshold`` (the highest threshold reaching it)."""
    a, t = ev.m.column("all", PCR_IOU)
    tp = ev.m.tp[:, a, t]
    fp = ~tp & ~ev.m.ignored[:, a, t]
    score = ev.m.det_score
    # predictions scoring >= s for each s: counted with a sorted search
    tp_s, fp_s = np.sort(score[tp]), np.sort(score[fp])
    n_tp = len(tp_s) - np.searchsorted(tp_s, THRESHOLDS, side="left")
    n_fp = len(fp_s) - np.searchsorted(fp_s, THRESHOLDS, side="left")
    kept = n_tp + n_fp
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(kept > 0, n_tp / np.maximum(kept, 1), np.nan)
        recall = n_tp / n_targets if n_targets else np.full(len(THRESHOLDS), np.nan)
        denom = 2 * n_tp + n_fp + (n_targets - n_tp)
        f1 = np.where(denom > 0, 2 * n_tp / np.maximum(denom, 1), np.nan)
    # the highest threshold reaching the best F1: as good, with the fewest detections kept
    best = len(f1) - 1 - int(np.nanargmax(f1[::-1])) if np.isfinite(f1).any() else None
    return Curve(
        score_thresholds=THRESHOLDS.tolist(),
        precision=_list(precision),
        recall=_list(recall),
        f1=_list(f1),
        n_targets=int(n_targets),
        best_f1=None if best is None else float(f1[best]),
        best_f1_threshold=None if best is None else float(THRESHOLDS[best]),
    )


def curves(evals: Mapping[str, Evaluated], n_targets: int) -> Curves:
    """metrics.json's ``curves``: the sweep of every formulation."""
    return Curves(iou=PCR_IOU, by_formulation={f: curve(ev, n_targets) for f, ev in evals.items()})


def _list(v: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(x) else float(x) for x in v.tolist()]
