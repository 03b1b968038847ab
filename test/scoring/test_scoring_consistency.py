"""PCR and PLC on hand-worked cases (answers computed by hand in the comments)."""

from __future__ import annotations

import pytest

from probench.data.dataset import Dataset
from probench.scoring import score


def _q(qid: int, coref: list[str] | None) -> dict:
    c = {"id": qid, "name": f"n{qid}", "prompts": {"orig": f"the thing {qid}"}, "prompt_types": ["state"]}
    if coref is not None:
        c["coref"] = coref
    return c


def _a(aid: int, qid: int, box: list[float], crowd: int = 0) -> dict:
    return {
        "id": aid,
        "image_id": 1,
        "category_id": qid,
        "bbox": box,
        "area": box[2] * box[3],
        "iscrowd": crowd,
    }


COCO = {
    "images": [{"id": 1, "file_name": "a.png", "width": 100, "height": 100, "domain": "indoor"}],
    "categories": [_q(1, None), _q(2, ["orig", "cat"]), _q(3, ["orig"])],
    "annotations": [
        _a(1, 1, [0, 0, 10, 10]),  # A: coref all three
        _a(2, 2, [20, 20, 10, 10]),  # B: coref orig, cat
        _a(3, 3, [40, 40, 20, 20]),  # C: coref orig only
        _a(4, 2, [60, 60, 10, 10]),  # D: coref orig, cat
        _a(5, 3, [0, 80, 20, 20], crowd=1),  # crowd: not a target
    ],
}


def _p(qid: int, box: list[float], s: float = 0.9) -> dict:
    return {"image_id": 1, "category_id": qid, "bbox": box, "score": s}


PREDS = {
    # A: IoU 1 / 0.5 / 0.8 -> recovered under all three
    # B: orig IoU 1, cat IoU 0.4 -> not recovered under cat (tmpl is outside its coref set)
    # C: orig IoU 0.5 -> recovered (single-formulation coref: PCR only)
    # D: orig IoU 1, cat [62,60,10,10] IoU 80/120 -> recovered under both
    "orig": [
        _p(1, [0, 0, 10, 10]),
        _p(2, [20, 20, 10, 10]),
        _p(3, [40, 40, 20, 10]),
        _p(2, [60, 60, 10, 10], 0.8),
    ],
    "cat": [_p(1, [0, 0, 10, 5]), _p(2, [20, 20, 10, 4]), _p(2, [62, 60, 10, 10], 0.8)],
    "tmpl": [_p(1, [0, 0, 10, 8]), _p(2, [20, 20, 10, 10])],
}


def test_pcr_plc_all_formulations() -> None:
    out = score(Dataset.from_dict(COCO), PREDS)
    assert out["n_targets"] == 4  # the crowd instance is not a target
    assert out["pcr50"] == pytest.approx(3 / 4)  # A, C, D recovered under their coref sets; B not
    # A: IoU(orig,cat)=50/100, IoU(orig,tmpl)=80/100, IoU(cat,tmpl)=50/80 -> mean 1.925/3
    # D: IoU(orig,cat)=80/120
    assert out["n_plc_targets"] == 2
    assert out["plc"] == pytest.approx((1.925 / 3 + 2 / 3) / 2)


def test_pcr_plc_with_a_missing_formulation() -> None:
    out = score(Dataset.from_dict(COCO), {"orig": PREDS["orig"], "cat": PREDS["cat"]})
    assert out["formulations_missing"] == ["tmpl"]
    # coref sets restricted to {orig, cat}: A, C, D recovered, B not
    assert out["pcr50"] == pytest.approx(3 / 4)
    assert out["plc"] == pytest.approx((0.5 + 2 / 3) / 2)  # A: 50/100, D: 80/120
    assert out["m_tmpl"] is None and out["delta_tmpl_orig"] is None
    assert out["delta_orig_cat"] == pytest.approx(out["m_orig"] - out["m_cat"])


def test_pcr_only_cat() -> None:
    out = score(Dataset.from_dict(COCO), {"cat": PREDS["cat"]})
    # C's coref set {orig} has no formulation in the run: left out. A and D recovered, B not.
    assert out["n_targets"] == 3
    assert out["pcr50"] == pytest.approx(2 / 3)
    assert out["plc"] is None  # nobody has two formulations
    assert out["map50"] is None and out["by_prompt_type"] == {} and out["best_formulation"] is None


def test_recovery_uses_the_one_to_one_matching() -> None:
    """Two orig predictions on the same GT: the second is a duplicate (FP), so a second GT
    of the same query far away stays unrecovered."""
    coco = {**COCO, "annotations": [_a(1, 1, [0, 0, 10, 10]), _a(2, 1, [50, 50, 10, 10])]}
    preds = {"orig": [_p(1, [0, 0, 10, 10], 0.9), _p(1, [0, 0, 10, 10], 0.8)]}
    out = score(Dataset.from_dict(coco), preds)
    assert out["pcr50"] == pytest.approx(1 / 2)
    assert out["map50"] == pytest.approx(0.5049504950495051)  # recall 1/2 at precision 1: 51/101
