"""The engine agrees with pycocotools (label-space-filtered detections) to 1e-9."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scoring_helpers import cocoeval, hard_coco, hard_predictions, ref_map

from probench.data.dataset import Dataset
from probench.scoring import score
from probench.scoring.constants import COCO_IOUS, SWEEP_IOUS

TOL = 1e-9


def _close(a: float | None, b: float) -> bool:
    if math.isnan(b):
        return a is None
    return a is not None and abs(a - b) <= TOL


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ap_matches_pycocotools(seed: int) -> None:
    coco = hard_coco(seed)
    preds = {f: hard_predictions(coco, f, seed) for f in ("orig", "cat")}
    if seed == 3:  # some pairs beyond maxDets = 100
        preds["orig"] = hard_predictions(coco, "orig", seed, fp_per_pair=70.0)
    out = score(Dataset.from_dict(coco), preds)
    assert out["by_formulation"]["orig"]["n_beyond_max_dets"] > 0 or seed != 3
    for f, res in preds.items():
        mine = out["by_formulation"][f]
        ev = cocoeval(coco, res, SWEEP_IOUS, area=False)
        for t, thr in enumerate(SWEEP_IOUS):
            ref = ref_map(ev, t)
            assert _close(mine["ap_by_iou"][f"{thr:.2f}"], ref), (f, thr, mine["ap_by_iou"], ref)
        ev = cocoeval(coco, res, COCO_IOUS, area=True)
        per_t = [ref_map(ev, t) for t in range(len(COCO_IOUS))]
        assert _close(mine["map50"], per_t[0])
        assert _close(mine["map75"], per_t[5])
        s = ev.eval["precision"][:, :, :, 0, 0]
        assert _close(mine["map50_95"], float(np.mean(s[s > -1])))
        if f == "orig":
            for a, size in enumerate(("small", "medium", "large"), start=1):
                got = out["by_size"][size]
                assert _close(got["map50"], ref_map(ev, 0, a)), size
                assert _close(got["map75"], ref_map(ev, 5, a)), size
                s = ev.eval["precision"][:, :, :, a, 0]
                ref = float(np.mean(s[s > -1])) if (s > -1).any() else float("nan")
                assert _close(got["map50_95"], ref), size
                assert got["n_queries"] == int((s[0, 0] > -1).sum())


def test_iou_tie_goes_to_the_later_gt_as_pycocotools() -> None:
    """det1 overlaps GT A and B equally (IoU 1/3): pycocotools gives it the later GT (B),
    which leaves A for det2 (IoU 1); giving it A instead would leave det2 unmatched."""
    coco = {
        "images": [{"id": 1, "file_name": "a.png", "width": 100, "height": 100, "domain": "indoor"}],
        "categories": [{"id": 1, "name": "box", "prompts": {"orig": "the box"}}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100, "iscrowd": 0},
            {"id": 2, "image_id": 1, "category_id": 1, "bbox": [10, 0, 10, 10], "area": 100, "iscrowd": 0},
        ],
    }
    res = [
        {"image_id": 1, "category_id": 1, "bbox": [5, 0, 10, 10], "score": 0.9},
        {"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.8},
    ]
    out = score(Dataset.from_dict(coco), {"orig": res})
    ev = cocoeval(coco, res, SWEEP_IOUS, area=False)
    assert ref_map(ev, 2) == pytest.approx(1.0)  # both GT found at 0.30
    assert out["by_formulation"]["orig"]["ap_by_iou"]["0.30"] == pytest.approx(1.0, abs=TOL)
    assert out["by_formulation"]["orig"]["ap_by_iou"]["0.50"] == pytest.approx(ref_map(ev, 4), abs=TOL)
