"""Absence metrics (scoring/absence.py) on a held-out dataset with planted hallucinations:
every number below is counted by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import matthews_corrcoef

from probench.cache.records import ABSENCE_KEYS, MetricsRecord
from probench.data.dataset import Dataset
from probench.scoring import score
from probench.scoring.absence import Counts, absence_samples, figures
from probench.scoring.bootstrap import weights
from probench.scoring.constants import ABSENCE_DEFAULT_THRESHOLD
from probench.scoring.suite import _Formulation
from probench.scoring.tables import DetArrays, GroundTruth

TYPES = {1: "attributive", 2: "categorical", 3: "relational"}


def _ann(aid: int, image: int, query: int, box: list[float]) -> dict:
    return {"id": aid, "image_id": image, "category_id": query, "bbox": box, "area": box[2] * box[3],
            "iscrowd": 0}


# four images, every query in every label space (12 pairs). Ground truth:
#   image 1: q1, q2   image 2: q1   image 3: q2, q3   image 4: nothing
# positive pairs (1,1) (1,2) (2,1) (3,2) (3,3) = 5; negative (1,3) (2,2) (2,3) (3,1) (4,1) (4,2) (4,3) = 7
COCO = {
    "images": [{"id": i, "file_name": f"{i}.png", "width": 100, "height": 100, "domain": "indoor",
                "query_ids": [1, 2, 3]} for i in (1, 2, 3, 4)],
    "categories": [{"id": q, "name": f"q{q}", "prompts": {"orig": f"thing {q}"}, "prompt_types": [t]}
                   for q, t in TYPES.items()],
    "annotations": [_ann(1, 1, 1, [0, 0, 20, 20]), _ann(2, 1, 2, [50, 50, 20, 20]),
                    _ann(3, 2, 1, [10, 10, 20, 20]), _ann(4, 3, 2, [30, 30, 20, 20]),
                    _ann(5, 3, 3, [60, 60, 20, 20])],
}  # fmt: skip


def _p(image: int, query: int, box: list[float], s: float) -> dict:
    return {"image_id": image, "category_id": query, "bbox": box, "score": s}


ORIG = [
    _p(1, 1, [0, 0, 20, 20], 0.9),  # positive, found: box TP
    _p(1, 2, [50, 50, 20, 20], 0.2),  # positive, right box but below 0.5 (and 0.3): pair FN, box FN
    _p(2, 1, [10, 10, 20, 20], 0.8),  # positive, found: box TP
    _p(2, 1, [70, 70, 10, 10], 0.6),  # ... and a second, wrong box: box FP
    _p(3, 2, [0, 0, 10, 10], 0.7),  # positive, said present with a wrong box: pair TP, box FP + box FN
    # (3, 3): positive, nothing: pair FN, box FN
    _p(1, 3, [5, 5, 10, 10], 0.95),  # planted hallucination: negative pair, box >= 0.5
    _p(4, 2, [10, 10, 30, 30], 0.55),  # planted hallucination
    _p(2, 3, [40, 40, 10, 10], 0.4),  # a hallucination at 0.3 only
    _p(4, 1, [40, 40, 10, 10], 0.1),  # below every threshold: the pair stays a true negative
]


@pytest.fixture(scope="module")
def at_half() -> MetricsRecord:
    # cat: no predictions at all (the model always says absent)
    return score(Dataset.from_dict(COCO), {"orig": ORIG, "cat": []}, pcr_score_threshold=0.5)


def test_presence_hallucination_and_mcc_match_hand_counts(at_half: MetricsRecord) -> None:
    ab = at_half.absence
    assert ab is not None and ab.score_threshold == 0.5 and ab.threshold_source == "pcr_score_threshold"
    o = ab.by_formulation["orig"]
    # pairs at 0.5: TP (1,1) (2,1) (3,2) = 3; FN (1,2) (3,3) = 2; FP (1,3) (4,2) = 2; TN 7 - 2 = 5
    assert (o.true_positive_pairs, o.false_negative_pairs, o.false_positive_pairs, o.true_negative_pairs) == (
        3, 2, 2, 5)  # fmt: skip
    assert (o.n_positive_pairs, o.n_negative_pairs) == (5, 7)
    assert o.presence_tpr == pytest.approx(3 / 5)
    assert o.presence_fpr == pytest.approx(2 / 7)
    assert o.hallucination_rate == pytest.approx(2 / 7)
    # MCC = (3*5 - 2*2) / sqrt((3+2)(3+2)(5+2)(5+2)) = 11 / 35
    assert o.presence_mcc == pytest.approx(11 / 35)
    # boxes on positive pairs: TP 2 ((1,1), (2,1)); FP 2 ((2,1)'s second, (3,2)'s); FN 3 ((1,2), (3,2), (3,3))
    assert (o.box_tp, o.box_fp, o.box_fn) == (2, 2, 3)
    assert o.positive_f1 == pytest.approx(4 / 9)  # 2*2 / (2*2 + 2 + 3)
    assert o.cgf1 == pytest.approx(4 / 9 * 11 / 35)


def test_mcc_agrees_with_scikit_learn(at_half: MetricsRecord) -> None:
    truth = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]  # the 12 pairs: 5 positive, 7 negative
    said = [1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0]  # TP TP at (1,1) (2,1) (3,2); FP (1,3) (4,2)
    o = at_half.absence.by_formulation["orig"]  # type: ignore[union-attr]
    assert o.presence_mcc == pytest.approx(matthews_corrcoef(truth, said))


def test_per_prompt_type(at_half: MetricsRecord) -> None:
    by = at_half.absence.by_formulation["orig"].by_prompt_type  # type: ignore[union-attr]
    assert list(by) == ["categorical", "attributive", "relational"]  # the paper's order
    # attributive (q1): (1,1) TP, (2,1) TP, (3,1) TN, (4,1) TN (0.1) -> MCC 4 / sqrt(2*2*2*2) = 1
    a = by["attributive"]
    assert (a.presence_tpr, a.presence_fpr, a.presence_mcc) == (1.0, 0.0, 1.0)
    assert a.positive_f1 == pytest.approx(4 / 5)  # boxes TP 2, FP 1, FN 0
    # categorical (q2): (1,2) FN, (3,2) TP, (2,2) TN, (4,2) FP -> MCC (1 - 1) / 4 = 0
    c = by["categorical"]
    assert (c.presence_tpr, c.presence_fpr, c.presence_mcc) == (0.5, 0.5, 0.0)
    # relational (q3): (3,3) FN, (1,3) FP, (2,3) TN (0.4 < 0.5), (4,3) TN -> MCC -1 / sqrt(1*1*3*3) = -1/3
    r = by["relational"]
    assert r.presence_tpr == 0.0 and r.hallucination_rate == pytest.approx(1 / 3)
    assert r.presence_mcc == pytest.approx(-1 / 3)
    assert r.positive_f1 == 0.0 and r.cgf1 == 0.0


def test_a_model_that_never_answers_has_mcc_zero(at_half: MetricsRecord) -> None:
    cat = at_half.absence.by_formulation["cat"]  # type: ignore[union-attr]
    # TP 0, FN 5, FP 0, TN 7: a constant answer carries nothing (scikit-learn's 0, not null)
    assert (cat.presence_tpr, cat.presence_fpr, cat.presence_mcc, cat.positive_f1) == (0.0, 0.0, 0.0, 0.0)
    assert matthews_corrcoef([1] * 5 + [0] * 7, [0] * 12) == 0.0


def test_the_default_operating_point_is_the_nodes() -> None:
    from probench.realtime.node_spec import PARAMETER_DEFAULTS

    assert PARAMETER_DEFAULTS["score_threshold"] == ABSENCE_DEFAULT_THRESHOLD
    m = score(Dataset.from_dict(COCO), {"orig": ORIG})
    o = m.absence.by_formulation["orig"]  # type: ignore[union-attr]
    assert m.absence.threshold_source == "node_default" and m.absence.score_threshold == 0.3  # type: ignore[union-attr]
    # at 0.3 the 0.4 box of (2,3) is a hallucination too: FP 3, TN 4; MCC (3*4 - 3*2) / sqrt(6*5*7*6)
    assert (o.false_positive_pairs, o.true_negative_pairs) == (3, 4)
    assert o.presence_mcc == pytest.approx(6 / math.sqrt(6 * 5 * 7 * 6))


def test_no_negative_pairs_leave_mcc_and_hallucination_null() -> None:
    coco = {**COCO, "images": [{**im, "query_ids": None} for im in COCO["images"]]}  # label spaces from GT
    coco["images"] = [{k: v for k, v in im.items() if k != "query_ids"} for im in coco["images"]]
    m = score(Dataset.from_dict(coco), {"orig": ORIG}, pcr_score_threshold=0.5)
    o = m.absence.by_formulation["orig"]  # type: ignore[union-attr]
    assert o.n_negative_pairs == 0 and o.n_positive_pairs == 5
    assert o.presence_mcc is None and o.hallucination_rate is None and o.cgf1 is None
    assert o.presence_tpr == pytest.approx(3 / 5)
    assert "presence_mcc" in o.to_json() and o.to_json()["presence_mcc"] is None  # JSON null, not NaN


def test_intervals_come_from_the_bootstraps_resamples() -> None:
    ds = Dataset.from_dict(COCO)
    m = score(ds, {"orig": ORIG}, pcr_score_threshold=0.5, bootstrap=40, bootstrap_seed=3)
    assert m.intervals is not None and m.intervals.absence is not None
    iv = m.intervals.absence.by_formulation["orig"]
    assert set(iv) == set(ABSENCE_KEYS)
    assert set(m.intervals.absence.by_prompt_type["orig"]) == set(TYPES.values())
    gt = GroundTruth.from_dataset(ds)
    ev = _Formulation(gt, DetArrays.from_results(ORIG, where="orig"), ("all",))
    samples = absence_samples(gt, {"orig": ev}, weights(4, 40, 3), pcr_score_threshold=0.5)
    tpr = samples["orig.presence_tpr"]
    low, high = np.percentile(tpr[np.isfinite(tpr)], [2.5, 97.5])
    assert iv["presence_tpr"] == pytest.approx([low, high])
    # unit weights give the point values
    unit = absence_samples(gt, {"orig": ev}, np.ones((1, 4)), pcr_score_threshold=0.5)
    assert unit["orig.presence_mcc"][0] == pytest.approx(11 / 35)


def test_figures_are_ratios_of_weighted_counts() -> None:
    c = Counts(*(np.array([x]) for x in (3, 2, 2, 5, 2, 2, 3)))
    got = figures(c)
    assert got["presence_mcc"][0] == pytest.approx(11 / 35) and got["cgf1"][0] == pytest.approx(44 / 315)
    doubled = figures(Counts(*(np.array([2.0 * x]) for x in (3, 2, 2, 5, 2, 2, 3))))
    assert all(np.allclose(got[k], doubled[k]) for k in ABSENCE_KEYS)  # ratios: scale-free


def test_old_metrics_files_still_read() -> None:
    old = MetricsRecord.model_validate({"map50": 0.5})
    assert old.absence is None
    new = score(Dataset.from_dict(COCO), {"orig": ORIG})
    assert MetricsRecord.model_validate(new.to_json()) == new
