"""TIDE error types (scoring/errors_tide.py): each injected error lands in its own type,
label spaces are respected, and hotcoco's mAP.5 agrees with the suite's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probench.cli import main
from probench.data.dataset import Dataset
from probench.data.synthetic import synthetic_coco, synthetic_predictions
from probench.scoring.errors_tide import ERROR_TYPES, tide_errors
from probench.scoring.suite import score


def _query(i: int, name: str) -> dict[str, Any]:
    prompts = {"orig": f"the {name}", "cat": name, "tmpl": f"a photo of the {name}"}
    return {"id": i, "name": name, "prompts": prompts, "prompt_types": ["categorical"]}


G1, G2, G3, G4 = [10, 10, 40, 40], [100, 100, 40, 40], [10, 120, 40, 40], [10, 10, 40, 40]
CASE = {
    "images": [
        {"id": 1, "file_name": "a.png", "width": 200, "height": 200, "domain": "indoor", "query_ids": [1, 2]},
        {"id": 2, "file_name": "b.png", "width": 200, "height": 200, "domain": "indoor", "query_ids": [1]},
    ],
    "categories": [_query(1, "valve"), _query(2, "door")],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": G1, "area": 1600, "iscrowd": 0},
        {"id": 2, "image_id": 1, "category_id": 2, "bbox": G2, "area": 1600, "iscrowd": 0},
        {"id": 3, "image_id": 1, "category_id": 1, "bbox": G3, "area": 1600, "iscrowd": 0},
        {"id": 4, "image_id": 2, "category_id": 1, "bbox": G4, "area": 1600, "iscrowd": 0},
    ],
}


def _det(image: int, query: int, box: list[int], s: float) -> dict[str, Any]:
    return {"image_id": image, "category_id": query, "bbox": box, "score": s}


PERFECT = [_det(1, 1, G1, 0.9), _det(1, 2, G2, 0.9), _det(1, 1, G3, 0.7), _det(2, 1, G4, 0.7)]
SHIFTED = [32, 10, 40, 40]  # IoU 0.29 with G1: between the background and foreground thresholds
INJECTED = {
    "cls": [*PERFECT, _det(1, 2, G1, 0.95)],  # a door where the valve is
    "loc": [*PERFECT, _det(1, 1, SHIFTED, 0.95)],
    "both": [*PERFECT, _det(1, 2, SHIFTED, 0.95)],
    "dupe": [*PERFECT, _det(1, 1, [11, 10, 40, 40], 0.8)],  # G1 again, after its TP, before the others
    "bkg": [*PERFECT, _det(1, 1, [150, 10, 30, 30], 0.95)],
    "missed": [d for d in PERFECT if d["bbox"] is not G3],
}


def _errors(preds: list[dict[str, Any]]) -> dict[str, Any]:
    return tide_errors(Dataset.from_dict(CASE), {"orig": preds}).to_json()["by_formulation"]["orig"]


def test_a_perfect_case_has_no_errors():
    e = _errors(PERFECT)
    assert e["ap50"] == pytest.approx(1.0)
    assert e["counts"] == dict.fromkeys(ERROR_TYPES, 0)


@pytest.mark.parametrize("kind", ERROR_TYPES)
def test_each_injected_error_is_attributed_to_its_own_type(kind):
    e = _errors(INJECTED[kind])
    assert e["counts"] == {t: int(t == kind) for t in ERROR_TYPES}, e["counts"]
    assert e["delta_ap"][kind] > 0 and e["ap50"] < 1.0
    assert all(v == pytest.approx(0.0) for t, v in e["delta_ap"].items() if t != kind)
    assert e["ap50"] + e["delta_ap"][kind] == pytest.approx(1.0)  # fixing the one error gives AP 1


def test_the_cls_error_costs_what_a_hand_count_says():
    # door: the false positive (0.95) ranks before the true positive -> AP 0.5; valve: AP 1
    e = _errors(INJECTED["cls"])
    assert e["ap50"] == pytest.approx(0.75) and e["delta_ap"]["cls"] == pytest.approx(0.25)


def test_a_query_outside_the_label_space_is_never_an_error():
    # image 2's label space is {valve}: a door on its valve would be a cls error if evaluated
    e = _errors([*PERFECT, _det(2, 2, G4, 0.99)])
    assert e["counts"] == dict.fromkeys(ERROR_TYPES, 0) and e["n_outside_label_space"] == 1
    assert e["ap50"] == pytest.approx(1.0)


def test_hotcocos_map50_is_the_suites():
    coco = synthetic_coco(60, 8, seed=3)
    ds = Dataset.from_dict(coco)
    preds = synthetic_predictions(coco, seed=4)
    errors = tide_errors(ds, preds).to_json()["by_formulation"]
    metrics = score(ds, preds).to_json()
    for f in ("orig", "cat", "tmpl"):
        assert errors[f]["ap50"] == pytest.approx(metrics["by_formulation"][f]["map50"], abs=1e-6), f
        assert sum(errors[f]["counts"].values()) > 0


def test_score_writes_the_errors_and_no_errors_skips_them(tmp_path: Path, capsys):
    ds_dir, run = tmp_path / "ds", tmp_path / "run"
    ds_dir.mkdir()
    (ds_dir / "annotations.json").write_text(json.dumps(CASE), encoding="utf-8")
    (run / "predictions").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"model": {"name": "m"}}), encoding="utf-8")
    (run / "predictions" / "orig.json").write_text(json.dumps(INJECTED["bkg"]), encoding="utf-8")
    args = ["score", "--dataset", str(ds_dir), "--run", str(run), "--quiet", "--bootstrap", "0"]
    assert main(args) == 0
    m = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    assert m["errors"]["by_formulation"]["orig"]["counts"]["bkg"] == 1
    assert main([*args, "--no-errors"]) == 0
    assert "errors" not in json.loads((run / "metrics.json").read_text(encoding="utf-8"))
