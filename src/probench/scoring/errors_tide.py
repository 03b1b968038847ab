"""TIDE error analysis (Bolya et al., ECCV 2020) per formulation: what the AP lost, by cause.

The six error types, at the foreground IoU 0.5 and background IoU 0.1 (docs/METRICS.md,
"Error analysis"):

- ``cls``: a false positive overlapping (IoU >= 0.5) a GT of another query in the image;
- ``loc``: right query, 0.1 <= IoU < 0.5 with its GT;
- ``both``: wrong query and 0.1 <= IoU < 0.5;
- ``dupe``: right query, IoU >= 0.5, but the GT was taken by a higher-scoring prediction;
- ``bkg``: IoU < 0.1 with every GT of the image;
- ``missed``: a GT no prediction recovers and no other error accounts for.

Each type's ``delta_ap`` is how much mAP.5 rises when exactly those errors are fixed
(TIDE's oracles); ``counts`` is how many errors of the type there are. ``delta_ap_fp`` /
``delta_ap_fn`` are TIDE's two broader oracles (every false positive suppressed; every
missed GT dropped).

The computation is hotcoco's (``COCOeval.tide_errors``, a maintained reimplementation of
tidecv), run on the predictions **inside the images' label spaces** only: a prediction for a
query outside an image's label space is not evaluated by probench, so it is never an
error there (counted in ``n_outside_label_space``). ``ap50`` is the mAP.5 hotcoco measures
on the same input: the suite's mAP.5 of the formulation (a test checks they agree).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from probench.cache.records import TIDE_ERROR_TYPES, TideErrors, TideScores
from probench.data.dataset import Dataset
from probench.scoring.cocoeval import CocoAP
from probench.scoring.match import det_pairs
from probench.scoring.tables import DetArrays, GroundTruth

FG_IOU = 0.5
BG_IOU = 0.1
ERROR_TYPES: tuple[str, ...] = TIDE_ERROR_TYPES
MISSED = ERROR_TYPES[-1]
# hotcoco's names of the error types
_HOTCOCO_KEYS = dict(zip(ERROR_TYPES, ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss"), strict=True))
METHOD = "TIDE (hotcoco COCOeval.tide_errors), foreground IoU 0.5, background IoU 0.1, label spaces kept"


def tide_errors(
    dataset: Dataset | GroundTruth | CocoAP,
    predictions: Mapping[str, Iterable[Mapping[str, Any]] | DetArrays],
) -> TideErrors:
    """metrics.json's ``errors``: per formulation, ``ap50``, ``delta_ap`` and ``counts`` per
    error type, ``delta_ap_fp`` / ``delta_ap_fn`` and ``n_outside_label_space``. ``dataset``
    may be its tables, or the suite's hotcoco evaluation over them (its ground truth reused)."""
    import hotcoco

    engine = CocoAP.of(dataset)
    gt, coco = engine.gt, engine.ground_truth()
    by_formulation: dict[str, TideScores] = {}
    for f, preds in predictions.items():
        dets = DetArrays.from_results(preds, where=f"{f} predictions")
        pair = det_pairs(gt, dets)
        rows = engine.results(dets, pair)
        n_outside = int((pair < 0).sum())
        with contextlib.redirect_stdout(io.StringIO()):
            if len(rows):
                ev = hotcoco.COCOeval(coco, coco.load_res(rows), "bbox")
                ev.evaluate()
                res = ev.tide_errors(pos_thr=FG_IOU, bg_thr=BG_IOU)
            else:
                res = None
        if res is None:  # nothing predicted: every GT is missed
            n_gt = int((~gt.gt_crowd).sum())
            counts = {**dict.fromkeys(ERROR_TYPES, 0), MISSED: n_gt}
            by_formulation[f] = TideScores(ap50=0.0 if n_gt else None, delta_ap=None, counts=counts,
                                           n_outside_label_space=n_outside)
            continue
        by_formulation[f] = TideScores(
            ap50=_num(res["ap_base"]),
            delta_ap={t: _num(res["delta_ap"][k]) for t, k in _HOTCOCO_KEYS.items()},
            counts={t: int(res["counts"][k]) for t, k in _HOTCOCO_KEYS.items()},
            delta_ap_fp=_num(res["delta_ap"]["FP"]),
            delta_ap_fn=_num(res["delta_ap"]["FN"]),
            n_outside_label_space=n_outside,
        )
    return TideErrors(method=METHOD, by_formulation=by_formulation)


def _num(v: object) -> float | None:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v):
        return None
    return float(v)
