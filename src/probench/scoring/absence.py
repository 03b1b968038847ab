"""Absence metrics: does the model answer a target that is not in the image?
(docs/METRICS.md, "Absence"; issue 37.)

Over the label-space pairs (image, query) of one formulation: a pair is *positive* when the
query has ground truth in the image (any annotation, crowd included: the target is there),
*negative* when it has none (the paper's negative pairs). The model *says present* when it
kept a box for the pair (one of the pair's up to 100, as AP keeps) scoring at least the
operating threshold ``t``. Then, with TP/FN/FP/TN the pairs' confusion counts:

- ``presence_tpr`` = TP / (TP + FN), ``presence_fpr`` = FP / (FP + TN);
- ``hallucination_rate``: the share of negative pairs with a box >= t (the same number as
  ``presence_fpr``, under the name the absence benchmarks use);
- ``presence_mcc``: Matthews' correlation of the four counts; null when the pairs have no
  positive or no negative (truth is constant: nothing to correlate with), 0 when the model's
  answer is constant while both kinds exist (scikit-learn's convention);
- ``positive_f1``: box-level micro F1 on the positive pairs at IoU 0.5 and score >= t
  (2 TP / (2 TP + FP + FN) over boxes; the AP's matching cut at t; crowd GT ignored);
- ``cgf1`` = positive_f1 x presence_mcc (SAM 3's SA-Co classification-gated F1, without
  its factor 100; MCC not clipped: a worse-than-chance presence gives a negative cgF1).

Every figure is a ratio of counts summed over images, so a bootstrap resample's value is
the same ratio of the counts weighted by the image multiplicities (scoring/bootstrap.py's
draws, the very weights of the other metrics' intervals): :func:`absence` gives the point
values and ``intervals.absence``, :func:`absence_samples` the resampled values (``compare``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from probench.cache.records import (
    ABSENCE_KEYS,
    ABSENCE_THRESHOLD_ASKED,
    ABSENCE_THRESHOLD_DEFAULT,
    Absence,
    AbsenceFormulation,
    AbsenceIntervals,
    AbsenceScores,
    sample_name,
)
from probench.scoring.constants import ABSENCE_DEFAULT_THRESHOLD, PCR_IOU
from probench.scoring.match import Matched
from probench.scoring.tables import GroundTruth
from probench.vocabulary import PROMPT_TYPES

# the per-image counts, in this order, of :class:`Counts`
_COUNTS = ("tp", "fn", "fp", "tn", "box_tp", "box_fp", "box_fn")


class Evaluated(Protocol):
    """What the absence metrics read of one formulation's evaluation (the suite's ``_Formulation``)."""

    m: Matched  # at area "all", IoU 0.5 among its thresholds


@dataclass(frozen=True)
class Counts:
    """Per image (I,), or weighted sums per resample (B,): the pair confusion counts and the
    box counts on positive pairs."""

    tp: np.ndarray
    fn: np.ndarray
    fp: np.ndarray
    tn: np.ndarray
    box_tp: np.ndarray
    box_fp: np.ndarray
    box_fn: np.ndarray

    def weighted(self, w: np.ndarray) -> Counts:
        """The counts summed over images with the weights ``w`` (B, I): (B,) each."""
        return Counts(*(w @ getattr(self, k) for k in _COUNTS))

    def total(self) -> Counts:
        return Counts(*(np.asarray(getattr(self, k).sum()) for k in _COUNTS))


def operating_threshold(pcr_score_threshold: float | None) -> tuple[float, str]:
    """The threshold the absence metrics use, and where it comes from: the PCR score
    threshold when one is asked (the report's pcr50_at), else the node's default."""
    if pcr_score_threshold is not None:
        return float(pcr_score_threshold), ABSENCE_THRESHOLD_ASKED
    return ABSENCE_DEFAULT_THRESHOLD, ABSENCE_THRESHOLD_DEFAULT


def pair_types(gt: GroundTruth) -> list[str]:
    """The prompt types of the dataset's queries, the paper's order first (as the AP breakdown)."""
    types = [t for t in PROMPT_TYPES if any(t in qt for qt in gt.query_types)]
    return types + sorted({t for qt in gt.query_types for t in qt} - set(types))


def counts(gt: GroundTruth, ev: Evaluated, threshold: float, pairs: np.ndarray | None = None) -> Counts:
    """Per image, the counts of the pairs selected by ``pairs`` (P,) bool (all when None)."""
    m = ev.m
    n_p, n_i = len(gt.pair_keys), len(gt.image_ids)
    sel = np.ones(n_p, bool) if pairs is None else pairs
    a, t = m.column("all", PCR_IOU)
    above = m.det_score >= threshold
    present = np.zeros(n_p, bool)
    present[m.det_pair[above]] = True
    positive = gt.pair_gt_count > 0
    keep_gt = ~m.gt_ignored[:, a]
    n_keep = np.bincount(gt.gt_pair[keep_gt], minlength=n_p)
    box_tp = np.bincount(m.det_pair[above & m.tp[:, a, t]], minlength=n_p)
    box_fp = np.bincount(m.det_pair[above & m.fp[:, a, t]], minlength=n_p)
    img = gt.pair_image

    def per_image(values: np.ndarray) -> np.ndarray:
        return np.bincount(img[sel], weights=values[sel].astype(np.float64), minlength=n_i)

    pos = positive
    return Counts(
        tp=per_image(pos & present), fn=per_image(pos & ~present), fp=per_image(~pos & present),
        tn=per_image(~pos & ~present), box_tp=per_image(np.where(pos, box_tp, 0)),
        box_fp=per_image(np.where(pos, box_fp, 0)), box_fn=per_image(np.where(pos, n_keep - box_tp, 0)),
    )  # fmt: skip


def figures(c: Counts) -> dict[str, np.ndarray]:
    """Every absence figure of the counts (any shape; NaN where undefined), by its key."""
    tp, fn, fp, tn = (np.asarray(x, np.float64) for x in (c.tp, c.fn, c.fp, c.tn))
    n_pos, n_neg = tp + fn, fp + tn
    said, not_said = tp + fp, fn + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = np.where(n_pos > 0, tp / n_pos, np.nan)
        fpr = np.where(n_neg > 0, fp / n_neg, np.nan)
        denom = np.sqrt(n_pos * n_neg * said * not_said)
        defined = (n_pos > 0) & (n_neg > 0)
        mcc = np.where(defined, np.where(denom > 0, (tp * tn - fp * fn) / np.where(denom > 0, denom, 1), 0.0),
                       np.nan)  # fmt: skip
        f1_denom = 2 * c.box_tp + c.box_fp + c.box_fn
        f1 = np.where(f1_denom > 0, 2 * c.box_tp / np.where(f1_denom > 0, f1_denom, 1), np.nan)
    keys = dict(zip(ABSENCE_KEYS, (tpr, fpr, np.clip(mcc, -1.0, 1.0), fpr, f1, f1 * mcc), strict=True))
    return keys


def _value(x: np.ndarray) -> float | None:
    v = float(x)
    return None if not np.isfinite(v) else v


S = TypeVar("S", bound=AbsenceScores)


def _scores(c: Counts, cls: type[S]) -> S:
    total = c.total()
    n = {k: round(float(getattr(total, k))) for k in _COUNTS}
    values = {k: _value(v) for k, v in figures(total).items()}
    return cls(
        n_positive_pairs=n["tp"] + n["fn"], n_negative_pairs=n["fp"] + n["tn"], true_positive_pairs=n["tp"],
        false_negative_pairs=n["fn"], false_positive_pairs=n["fp"], true_negative_pairs=n["tn"],
        box_tp=n["box_tp"], box_fp=n["box_fp"], box_fn=n["box_fn"], **values,
    )  # fmt: skip


def _type_pairs(gt: GroundTruth) -> dict[str, np.ndarray]:
    """The pairs (P,) bool of each prompt type."""
    out = {}
    for t in pair_types(gt):
        of_type = np.array([t in qt for qt in gt.query_types], dtype=bool)
        out[t] = of_type[gt.pair_query] if len(of_type) else np.zeros(len(gt.pair_query), bool)
    return out


def absence(
    gt: GroundTruth, evals: Mapping[str, Evaluated], pcr_score_threshold: float | None = None,
    w: np.ndarray | None = None,
) -> tuple[Absence, AbsenceIntervals | None]:  # fmt: skip
    """metrics.json's ``absence`` for the evaluated formulations, and, given the bootstrap's
    image weights ``w`` (B, I), ``intervals.absence`` (None without)."""
    from probench.scoring.bootstrap import interval

    threshold, source = operating_threshold(pcr_score_threshold)
    by_formulation: dict[str, AbsenceFormulation] = {}
    iv_form: dict[str, dict[str, list[float] | None]] = {}
    iv_type: dict[str, dict[str, dict[str, list[float] | None]]] = {}
    for f, ev in evals.items():
        groups: list[tuple[str | None, np.ndarray | None]] = [(None, None), *_type_pairs(gt).items()]
        by_type: dict[str, AbsenceScores] = {}
        for t, pairs in groups:
            c = counts(gt, ev, threshold, pairs)
            ivs = None if w is None else {k: interval(v) for k, v in figures(c.weighted(w)).items()}
            if t is None:
                by_formulation[f] = _scores(c, AbsenceFormulation)
                if ivs is not None:
                    iv_form[f] = ivs
            else:
                by_type[t] = _scores(c, AbsenceScores)
                if ivs is not None:
                    iv_type.setdefault(f, {})[t] = ivs
        by_formulation[f] = by_formulation[f].updated(by_prompt_type=by_type)
    out = Absence(score_threshold=threshold, threshold_source=source, iou=PCR_IOU,
                  by_formulation=by_formulation)
    if w is None:
        return out, None
    return out, AbsenceIntervals(by_formulation=iv_form, by_prompt_type=iv_type)


def absence_samples(
    gt: GroundTruth, evals: Mapping[str, Evaluated], w: np.ndarray, keys: Sequence[str] = ABSENCE_KEYS,
    pcr_score_threshold: float | None = None,
) -> dict[str, np.ndarray]:
    """Every formulation's absence figures per resample, (B,) each, named
    ``<formulation>.<key>`` as the bootstrap names its metrics (``compare``'s paired deltas)."""
    threshold, _ = operating_threshold(pcr_score_threshold)
    out: dict[str, np.ndarray] = {}
    for f, ev in evals.items():
        values = figures(counts(gt, ev, threshold).weighted(w))
        out.update({sample_name(f, k): values[k] for k in keys})
    return out
