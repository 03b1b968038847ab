"""Prompt-consistent recall (PCR) and prompt localisation consistency (PLC), paper §III-D.

Targets are the non-crowd GT instances. Every variant reads the same IoU-0.5 one-to-one
matching that AP uses (area range "all", maxDets 100); they differ in which matched
prediction counts as *recovering* target i under formulation k:

- ``pcr50`` / ``plc``: any of the up to 100 predictions kept for the (image, query) pair
  (recall@100 consistency);
- ``pcr50_top1`` / ``plc_top1``: only the pair's highest-scoring prediction (a robot's
  operating point); it recovers the target it is matched to (the one it overlaps most);
- ``pcr50_at`` / ``plc_at``: only predictions with score >= the threshold given (the
  matching in score order makes this the same matching cut at the threshold).

K_i is the target's query's ``coref`` set. PCR = mean over targets of prod_{k in K_i}
r_i^(k) (Eq. 3); PLC = mean, over the targets recovered under every k in K_i with
|K_i| >= 2, of the mean pairwise IoU of the matched prediction boxes (Eq. 4). When the run
lacks a formulation some target's K_i needs, every PCR and PLC is None and
``pcr_null_reason`` says why (a partial product would not be the consistency the name
promises). Targets with |K_i| = 1 count in PCR (Eq. 3) and are counted apart
(``pcr_single_formulation_targets``); ``pcr50*_multi`` are over the others only.
None wherever nothing qualifies (JSON has no NaN). Definitions: docs/METRICS.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from probench.cache.records import PCR_VARIANTS, Consistency
from probench.scoring.match import box_iou_edges
from probench.vocabulary import FORMULATIONS


@dataclass(frozen=True)
class Recovery:
    """One formulation's IoU-0.5 matching, per GT row."""

    matched: np.ndarray  # (n_gt,) bool: matched to a kept prediction of its pair
    top1: np.ndarray  # (n_gt,) bool: matched to its pair's highest-scoring prediction
    score: np.ndarray  # (n_gt,) float: the matched prediction's score (-inf when unmatched)
    box: np.ndarray  # (n_gt, 4) xywh of the matched prediction (zeros when unmatched)


def pcr_plc(
    query_coref: np.ndarray,
    gt_query: np.ndarray,
    gt_crowd: np.ndarray,
    recovery: Mapping[str, Recovery],
    score_threshold: float | None = None,
) -> Consistency:
    """Every PCR/PLC variant and their counts, for the formulations in ``recovery``."""
    targets = ~gt_crowd & query_coref[gt_query].any(axis=1)
    k_need = query_coref[gt_query] & targets[:, None]  # (n_gt, 3): K_i over all formulations
    n_k = k_need.sum(axis=1)
    missing = [f for f in FORMULATIONS if f not in recovery]
    needs_missing = k_need[:, [FORMULATIONS.index(f) for f in missing]].any(axis=1)
    n_targets = int(targets.sum())
    multi = targets & (n_k >= 2)
    variants: dict[str, Callable[[Recovery], np.ndarray]] = {
        "": lambda r: r.matched,
        "_top1": lambda r: r.top1,
    }
    if score_threshold is not None:
        variants["_at"] = lambda r: r.matched & (r.score >= score_threshold)
    null_reason = None
    if needs_missing.any():
        lacking = [f for f in missing if k_need[:, FORMULATIONS.index(f)].any()]
        null_reason = (
            f"the run lacks formulation(s) {', '.join(lacking)} that the coref sets of "
            f"{int(needs_missing.sum())} of {n_targets} targets need; score a run with every formulation"
        )
    elif n_targets == 0:
        null_reason = "no targets (non-crowd ground truth)"
    present = [f for f in FORMULATIONS if f in recovery]
    k_set = k_need[:, [FORMULATIONS.index(f) for f in present]]  # (n_gt, F present)
    pair_iou = None if null_reason else _mean_pairwise_iou(present, k_set, n_k, recovery)
    values: dict[str, float | int | None] = {}
    for suffix, recovered in variants.items():
        pcr, pcr_multi, plc, n_plc = PCR_VARIANTS[suffix]
        values.update({pcr: None, pcr_multi: None, plc: None, n_plc: 0})
        if pair_iou is None:
            continue
        rec = np.stack([recovered(recovery[f]) for f in present], axis=1)
        all_rec = targets & np.all(rec | ~k_set, axis=1)
        values[pcr] = float(all_rec.sum() / n_targets)
        if multi.any():
            values[pcr_multi] = float((all_rec & multi).sum() / multi.sum())
        plc_set = all_rec & multi
        if plc_set.any():
            values[plc] = float(pair_iou[plc_set].mean())
            values[n_plc] = int(plc_set.sum())
    out = Consistency(
        n_targets=n_targets,
        pcr_single_formulation_targets=int((targets & (n_k == 1)).sum()),
        pcr_multi_formulation_targets=int(multi.sum()),
        pcr_null_reason=null_reason,
    ).updated(**values)
    return out if score_threshold is None else out.updated(pcr_score_threshold=float(score_threshold))


def _mean_pairwise_iou(
    present: list[str], k_set: np.ndarray, n_k: np.ndarray, recovery: Mapping[str, Recovery]
) -> np.ndarray:
    """Per target with |K_i| >= 2 recovered (by any kept prediction) under all of K_i: the
    mean pairwise IoU of its matched boxes (Eq. 4's inner term); NaN elsewhere. Every
    variant's recovered set is a subset, and the matched box is the same."""
    rec = np.stack([recovery[f].matched for f in present], axis=1)
    rows = (n_k >= 2) & np.all(rec | ~k_set, axis=1)
    tot = np.zeros(len(n_k))
    for a, b in combinations(range(len(present)), 2):
        both = rows & k_set[:, a] & k_set[:, b]
        if both.any():
            tot[both] += box_iou_edges(recovery[present[a]].box[both], recovery[present[b]].box[both])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(rows, tot / (n_k * (n_k - 1) / 2), np.nan)
