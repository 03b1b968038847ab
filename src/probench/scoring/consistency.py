"""Prompt-consistent recall (PCR) and prompt localisation consistency (PLC), paper §III-D.

Targets are the non-crowd GT instances. Target i is *recovered* under formulation k when the
IoU-0.5 matching that AP uses (area range "all") matched it to a prediction of k. Its
formulation set K_i is its query's ``coref`` set, restricted to the formulations the run
has (a formulation with no prediction file is not evaluated, it is listed as missing);
targets whose K_i is then empty are left out.

- PCR = mean over targets of prod_{k in K_i} r_i^(k).
- PLC = mean over targets recovered under every k in K_i with |K_i| >= 2 of the mean
  pairwise IoU of the matched prediction boxes. Targets with |K_i| = 1 count in PCR only.
Both are None when no target qualifies (JSON has no NaN).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import numpy as np

from probench.data.dataset import FORMULATIONS
from probench.scoring.match import box_iou_edges


def pcr_plc(
    query_coref: np.ndarray,
    gt_query: np.ndarray,
    gt_crowd: np.ndarray,
    matched_box: Mapping[str, tuple[np.ndarray, np.ndarray]],
) -> dict:
    """``matched_box[k] = (recovered (n_gt,) bool, box (n_gt, 4) xywh of the matched
    prediction)`` for each formulation present. Returns pcr50, plc and their counts."""
    present = [f for f in FORMULATIONS if f in matched_box]
    targets = ~gt_crowd
    k_set = query_coref[gt_query][:, [FORMULATIONS.index(f) for f in present]]  # (n_gt, F)
    k_set = k_set & targets[:, None]
    n_k = k_set.sum(axis=1)
    counted = n_k > 0
    rec = np.zeros((len(gt_query), 0), bool)
    if present:
        rec = np.stack([matched_box[f][0] for f in present], axis=1)
    all_rec = counted & np.all(rec | ~k_set, axis=1)
    n_pcr = int(counted.sum())
    out: dict = {"pcr50": None, "plc": None, "n_targets": n_pcr, "n_plc_targets": 0}
    if n_pcr:
        out["pcr50"] = float(all_rec.sum() / n_pcr)
    plc_set = all_rec & (n_k >= 2)
    if plc_set.any():
        tot = np.zeros(len(gt_query))
        for a, b in combinations(range(len(present)), 2):
            both = plc_set & k_set[:, a] & k_set[:, b]
            if both.any():
                tot[both] += box_iou_edges(matched_box[present[a]][1][both], matched_box[present[b]][1][both])
        n_pairs = n_k * (n_k - 1) / 2
        vals = tot[plc_set] / n_pairs[plc_set]
        out["plc"] = float(vals.mean())
        out["n_plc_targets"] = int(plc_set.sum())
    return out
