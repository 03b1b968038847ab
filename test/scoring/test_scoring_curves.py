"""PR and F1-versus-confidence curves (scoring/curves.py) on a hand-counted case."""

from __future__ import annotations

import pytest

from probench.data.dataset import Dataset
from probench.scoring.curves import THRESHOLDS
from probench.scoring.suite import score


def _q(i: int) -> dict:
    return {"id": i, "name": f"thing{i}", "prompts": {"orig": f"the thing{i}", "cat": f"thing{i}",
                                                      "tmpl": f"a photo of the thing{i}"}}  # fmt: skip


CASE = {
    "images": [{"id": 1, "file_name": "a.png", "width": 300, "height": 300, "query_ids": [1, 2]}],
    "categories": [_q(1), _q(2)],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 40, 40], "area": 1600, "iscrowd": 0},
        {"id": 2, "image_id": 1, "category_id": 1, "bbox": [100, 10, 40, 40], "area": 1600, "iscrowd": 0},
        {"id": 3, "image_id": 1, "category_id": 2, "bbox": [10, 100, 40, 40], "area": 1600, "iscrowd": 0},
    ],
}
PREDS = [  # two true positives (0.9, 0.6), one false positive (0.8); one target never found
    {"image_id": 1, "category_id": 1, "bbox": [10, 10, 40, 40], "score": 0.9},
    {"image_id": 1, "category_id": 2, "bbox": [200, 200, 40, 40], "score": 0.8},
    {"image_id": 1, "category_id": 1, "bbox": [100, 10, 40, 40], "score": 0.6},
]


def test_the_sweep_counts_what_a_hand_count_says():
    c = score(Dataset.from_dict(CASE), {"orig": PREDS}).to_json()["curves"]["by_formulation"]["orig"]
    at = {round(t, 2): i for i, t in enumerate(THRESHOLDS)}
    assert c["n_targets"] == 3 and len(c["f1"]) == 101
    i = at[0.7]  # kept: TP 0.9, FP 0.8
    assert c["precision"][i] == pytest.approx(0.5) and c["recall"][i] == pytest.approx(1 / 3)
    assert c["f1"][i] == pytest.approx(2 / (2 + 1 + 2))
    i = at[0.5]  # kept: all three
    assert c["precision"][i] == pytest.approx(2 / 3) and c["f1"][i] == pytest.approx(4 / 6)
    i = at[0.85]  # kept: the 0.9 true positive only
    assert c["precision"][i] == pytest.approx(1.0) and c["f1"][i] == pytest.approx(2 / 4)
    assert c["precision"][at[0.95]] is None and c["f1"][at[0.95]] == pytest.approx(0.0)
    # the best F1 holds from 0 to 0.6: the operating point is the highest of those thresholds
    assert c["best_f1"] == pytest.approx(4 / 6) and c["best_f1_threshold"] == pytest.approx(0.6)
