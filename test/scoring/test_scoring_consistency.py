"""PCR and PLC on hand-worked cases (answers computed by hand in the comments)."""

from __future__ import annotations

import pytest

from helpers.scoring_data import ONE_TARGET, example_predictions
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
    out = score(Dataset.from_dict(COCO), PREDS).to_json()
    assert out["n_targets"] == 4  # the crowd instance is not a target
    assert out["pcr_null_reason"] is None
    assert out["pcr50"] == pytest.approx(3 / 4)  # A, C, D recovered under their coref sets; B not
    # A: IoU(orig,cat)=50/100, IoU(orig,tmpl)=80/100, IoU(cat,tmpl)=50/80 -> mean 1.925/3
    # D: IoU(orig,cat)=80/120
    assert out["n_plc_targets"] == 2
    assert out["plc"] == pytest.approx((1.925 / 3 + 2 / 3) / 2)
    # C's coref set is {orig}: it counts in pcr50, not in pcr50_multi (A, B, D: A and D recovered)
    assert out["pcr_single_formulation_targets"] == 1 and out["pcr_multi_formulation_targets"] == 3
    assert out["pcr50_multi"] == pytest.approx(2 / 3)


def test_top1_counts_only_the_highest_scoring_prediction_of_the_pair() -> None:
    out = score(Dataset.from_dict(COCO), PREDS).to_json()
    # top-1 of each (image, query) pair: orig q1 -> A, q2 -> B (0.9; D's box is 0.8), q3 -> C;
    # cat q1 -> A, q2 -> [20,20,10,4] (IoU 0.4 with B: no match, D's box is 0.8); tmpl q1 -> A.
    # A: orig, cat, tmpl all top-1 -> recovered; B: cat misses; C: orig top-1 -> recovered;
    # D: matched under orig and cat, but never by the top-1 -> not recovered.
    assert out["pcr50_top1"] == pytest.approx(2 / 4)
    assert out["pcr50_top1_multi"] == pytest.approx(1 / 3)  # A of A, B, D
    assert out["n_plc_top1_targets"] == 1
    assert out["plc_top1"] == pytest.approx(1.925 / 3)  # A's boxes, as in plc
    assert "pcr50_at" not in out and "pcr_score_threshold" not in out  # no threshold asked


@pytest.mark.parametrize(
    ("threshold", "pcr", "plc", "n_plc"),
    [
        (0.85, 2 / 4, 1.925 / 3, 1),  # D's matched boxes score 0.8 -> D drops out; A and C stay
        (0.8, 3 / 4, (1.925 / 3 + 2 / 3) / 2, 2),  # inclusive: score >= T, so as pcr50
        (0.95, 0.0, None, 0),  # nothing scores that high
    ],
)
def test_score_threshold(threshold: float, pcr: float, plc: float | None, n_plc: int) -> None:
    out = score(Dataset.from_dict(COCO), PREDS, pcr_score_threshold=threshold).to_json()
    assert out["pcr_score_threshold"] == threshold
    assert out["pcr50_at"] == pytest.approx(pcr)
    assert out["plc_at"] == (None if plc is None else pytest.approx(plc))
    assert out["n_plc_at_targets"] == n_plc


def test_the_issue_example_recall_at_100_versus_top1() -> None:
    """One target; under every formulation 99 wrong boxes at 0.9 and the right box at 0.001."""
    out = score(Dataset.from_dict(ONE_TARGET), example_predictions(), pcr_score_threshold=0.5).to_json()
    assert out["map50"] == pytest.approx(0.01)  # precision 1/100 at recall 1
    assert out["pcr50"] == 1.0 and out["plc"] == 1.0  # the 100th box counts
    assert out["pcr50_top1"] == 0.0 and out["plc_top1"] is None  # the top box is wrong
    assert out["pcr50_at"] == 0.0 and out["plc_at"] is None  # the right box scores below 0.5
    low = score(Dataset.from_dict(ONE_TARGET), example_predictions(), pcr_score_threshold=0.001).to_json()
    assert low["pcr50_at"] == 1.0 and low["plc_at"] == 1.0  # inclusive: score >= T


def test_missing_formulation_a_target_needs_makes_pcr_null() -> None:
    out = score(Dataset.from_dict(COCO), {"orig": PREDS["orig"], "cat": PREDS["cat"]}).to_json()
    assert out["formulations_missing"] == ["tmpl"]
    # A's coref set (all three) needs tmpl: no PCR/PLC variant is computed
    for key in ("pcr50", "pcr50_multi", "plc", "pcr50_top1", "pcr50_top1_multi", "plc_top1"):
        assert out[key] is None, key
    assert out["n_plc_targets"] == 0
    assert out["pcr_null_reason"] == (
        "the run lacks formulation(s) tmpl that the coref sets of 1 of 4 targets need; "
        "score a run with every formulation"
    )
    assert out["n_targets"] == 4 and out["pcr_single_formulation_targets"] == 1
    assert out["m_tmpl"] is None and out["delta_tmpl_orig"] is None
    assert out["delta_orig_cat"] == pytest.approx(out["m_orig"] - out["m_cat"])


def test_missing_formulation_no_target_needs_is_fine() -> None:
    coco = {**COCO, "categories": [_q(1, ["orig", "cat"]), _q(2, ["orig", "cat"]), _q(3, ["orig"])]}
    out = score(Dataset.from_dict(coco), {"orig": PREDS["orig"], "cat": PREDS["cat"]}).to_json()
    assert out["pcr_null_reason"] is None
    assert out["pcr50"] == pytest.approx(3 / 4)  # A, C, D recovered, B not
    assert out["plc"] == pytest.approx((0.5 + 2 / 3) / 2)  # A: 50/100, D: 80/120


def test_pcr_only_cat() -> None:
    out = score(Dataset.from_dict(COCO), {"cat": PREDS["cat"]}).to_json()
    # every target's coref set has orig, and A's has tmpl too: nothing can be computed
    assert out["pcr50"] is None and out["plc"] is None and out["pcr50_top1"] is None
    assert out["pcr_null_reason"].startswith(
        "the run lacks formulation(s) orig, tmpl that the coref sets of 4 of 4 targets need"
    )
    assert out["map50"] is None and out["by_prompt_type"] == {} and out["best_formulation"] is None


def test_single_formulation_coref_sets_give_plain_recall() -> None:
    coco = {**COCO, "categories": [_q(1, ["orig"]), _q(2, ["orig"]), _q(3, ["orig"])]}
    out = score(Dataset.from_dict(coco), {"orig": PREDS["orig"]}).to_json()
    # orig recovers A, B, C, D (D by its second box): recall 1; top-1 misses D
    assert out["pcr50"] == 1.0 and out["pcr50_top1"] == pytest.approx(3 / 4)
    assert out["pcr_single_formulation_targets"] == 4 and out["pcr_multi_formulation_targets"] == 0
    assert out["pcr50_multi"] is None and out["plc"] is None  # no target has two formulations


def test_recovery_uses_the_one_to_one_matching() -> None:
    """Two predictions on the same GT: the second is a duplicate (FP), so a second GT of the
    same query far away stays unrecovered."""
    coco = {**COCO, "annotations": [_a(1, 1, [0, 0, 10, 10]), _a(2, 1, [50, 50, 10, 10])]}
    res = [_p(1, [0, 0, 10, 10], 0.9), _p(1, [0, 0, 10, 10], 0.8)]
    out = score(Dataset.from_dict(coco), {f: res for f in ("orig", "cat", "tmpl")}).to_json()
    assert out["pcr50"] == pytest.approx(1 / 2) and out["pcr50_top1"] == pytest.approx(1 / 2)
    assert out["map50"] == pytest.approx(0.5049504950495051)  # recall 1/2 at precision 1: 51/101


def test_top1_recovers_at_most_one_target_of_a_pair() -> None:
    """Two targets of one query in one image. The top box (0.9) overlaps A at IoU 0.5 and B
    at IoU 0.8: matched one-to-one, it recovers B (the larger IoU) and only B; the second box
    (0.5) recovers A, which counts for pcr50 but not for pcr50_top1."""
    a_box, b_box = [0, 0, 10, 10], [0, 2, 10, 10]  # A and B overlap: IoU 80/120
    coco = {**COCO, "categories": [_q(1, ["orig"])], "annotations": [_a(1, 1, a_box), _a(2, 1, b_box)]}
    top = [0, 4, 10, 8]  # with A: 60/(100+80-60) = 0.5; with B: 80/(100+80-80) = 0.8
    out = score(Dataset.from_dict(coco), {"orig": [_p(1, top, 0.9), _p(1, a_box, 0.5)]}).to_json()
    assert out["pcr50"] == 1.0
    assert out["pcr50_top1"] == pytest.approx(1 / 2)


def test_top1_tie_keeps_the_given_order() -> None:
    """Equal top scores: the first one given is the top-1 (the stable order AP uses)."""
    coco = {**COCO, "categories": [_q(1, ["orig"])], "annotations": [_a(1, 1, [0, 0, 10, 10])]}
    hit, miss = _p(1, [0, 0, 10, 10], 0.7), _p(1, [50, 50, 10, 10], 0.7)
    assert score(Dataset.from_dict(coco), {"orig": [hit, miss]}).to_json()["pcr50_top1"] == 1.0
    assert score(Dataset.from_dict(coco), {"orig": [miss, hit]}).to_json()["pcr50_top1"] == 0.0


def test_no_targets_gives_nulls_with_a_reason() -> None:
    coco = {**COCO, "annotations": [_a(5, 3, [0, 80, 20, 20], crowd=1)]}
    out = score(Dataset.from_dict(coco), PREDS).to_json()
    assert out["n_targets"] == 0 and out["pcr50"] is None and out["pcr50_top1"] is None
    assert out["pcr_null_reason"] == "no targets (non-crowd ground truth)"
