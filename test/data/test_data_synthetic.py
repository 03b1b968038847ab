"""Synthetic datasets and runs: valid, deterministic, covering what the metrics need."""

from __future__ import annotations

import numpy as np

from probench.data.dataset import Dataset
from probench.data.synthetic import synthetic_coco, synthetic_prediction_arrays, synthetic_predictions
from probench.data.validate import validate_coco
from probench.vocabulary import PROMPT_TYPES


def test_synthetic_dataset_is_valid_and_covers_the_cases() -> None:
    coco = synthetic_coco(60, 24, seed=7)
    assert validate_coco(coco) == []
    ds = Dataset.from_dict(coco)
    assert {t for q in ds.queries.values() for t in q.prompt_types} == set(PROMPT_TYPES)
    assert len({im.domain for im in ds.images.values()}) >= 3
    assert any(len(q.coref) == 1 for q in ds.queries.values())
    assert any(len(q.coref) == 3 for q in ds.queries.values())
    gt_pairs = {(a.image_id, a.query_id) for a in ds.annotations}
    ls_pairs = {(i, q) for i in ds.images for q in ds.label_space(i)}
    assert gt_pairs < ls_pairs  # negative pairs exist
    assert any(a.iscrowd for a in ds.annotations)
    areas = np.array([a.area for a in ds.annotations])
    assert (areas < 32**2).any() and ((areas > 32**2) & (areas < 96**2)).any() and (areas > 96**2).any()
    derived = [c for c in coco["categories"] if "cat" not in c["prompts"]]
    assert derived and ds.queries[derived[0]["id"]].prompts["tmpl"].startswith("a photo of ")


def test_deterministic_with_a_seed() -> None:
    assert synthetic_coco(20, 5, seed=3) == synthetic_coco(20, 5, seed=3)
    assert synthetic_coco(20, 5, seed=3) != synthetic_coco(20, 5, seed=4)
    coco = synthetic_coco(20, 5, seed=3)
    assert synthetic_predictions(coco, seed=1) == synthetic_predictions(coco, seed=1)


def test_prediction_quality_is_controllable() -> None:
    coco = synthetic_coco(40, 6, seed=2)
    lo = synthetic_prediction_arrays(coco, "orig", seed=2, recall=0.2, fp_per_pair=0, duplicates=0)
    hi = synthetic_prediction_arrays(coco, "orig", seed=2, recall=0.9, fp_per_pair=0, duplicates=0)
    assert len(lo["score"]) < len(hi["score"]) <= len(coco["annotations"])
    many = synthetic_prediction_arrays(coco, "orig", seed=2, fp_per_pair=30)
    assert len(many["score"]) > 20 * len(coco["images"])
    tied = synthetic_prediction_arrays(coco, "cat", seed=2, score_decimals=1)
    assert len(np.unique(tied["score"])) <= 11
