"""The paired bootstrap (scoring/bootstrap.py): exact re-accumulation, significance, the CLI."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from probench.cli import main
from probench.data.dataset import Dataset
from probench.data.synthetic import arrays_to_results, synthetic_coco, synthetic_prediction_arrays
from probench.scoring import bootstrap as bs
from probench.scoring.suite import ORIG_AREAS, _Formulation, score
from probench.scoring.tables import DetArrays, GroundTruth


def _preds(coco: dict[str, Any], recall: dict[str, float], *, decimals: int | None = 2) -> dict[str, list]:
    return {
        f: arrays_to_results(synthetic_prediction_arrays(coco, f, seed=3, recall=r, score_decimals=decimals))
        for f, r in recall.items()
    }


def _samples(coco: dict[str, Any], preds: dict[str, list], w: np.ndarray) -> dict[str, np.ndarray]:
    ds = Dataset.from_dict(coco)
    gt = GroundTruth.from_dataset(ds)
    evals = {f: _Formulation(gt, DetArrays.from_results(p), ORIG_AREAS if f == "orig" else ("all",),
                             bootstrap=True) for f, p in preds.items()}  # fmt: skip
    tgt = bs.targets_of(gt, {f: ev.recovered() for f, ev in evals.items()})
    return bs.resample(bs.tables_of(gt, evals), tgt, w)


def _value(metrics: dict[str, Any], key: str) -> float:
    if "." in key:
        f, m = key.split(".")
        return float(metrics["by_formulation"][f][m])
    return float(metrics[key])


def test_unit_weights_give_the_suites_point_values():
    coco = synthetic_coco(120, 12, seed=1, crowd_fraction=0.05)
    preds = _preds(coco, {"orig": 0.7, "cat": 0.6, "tmpl": 0.65})
    point = score(Dataset.from_dict(coco), preds).to_json()
    samples = _samples(coco, preds, np.ones((2, 120)))
    assert {"orig.map50", "cat.map50_95", "delta_max", "pcr50", "plc", "pcr50_top1"} <= set(samples)
    for key, v in samples.items():
        assert v[0] == pytest.approx(_value(point, key), abs=1e-9), key


def test_a_weighted_image_counts_as_that_many_copies():
    """Scoring the resampled dataset itself (each image copied w times, new ids) gives the
    resample's values: continuous scores, so copies are the only ties."""
    coco = synthetic_coco(40, 6, seed=2, crowd_fraction=0.05)
    preds = _preds(coco, {"orig": 0.7, "cat": 0.5, "tmpl": 0.6}, decimals=None)
    ids = sorted(im["id"] for im in coco["images"])
    w = np.random.default_rng(5).multinomial(len(ids), np.full(len(ids), 1 / len(ids)))
    copy_of: dict[int, list[int]] = {}
    images, anns, next_id = [], [], 10_000
    for img_id, k in zip(ids, w.tolist(), strict=True):
        for _ in range(k):
            copy_of.setdefault(img_id, []).append(next_id)
            images.append({**next(im for im in coco["images"] if im["id"] == img_id), "id": next_id})
            next_id += 1
    for a in coco["annotations"]:
        for new in copy_of.get(a["image_id"], []):
            anns.append({**a, "id": len(anns) + 1, "image_id": new})
    copied = {**coco, "images": images, "annotations": anns}
    copied_preds = {f: [{**r, "image_id": new} for r in p for new in copy_of.get(r["image_id"], [])]
                    for f, p in preds.items()}  # fmt: skip
    direct = score(Dataset.from_dict(copied), copied_preds).to_json()
    samples = _samples(coco, preds, w[None, :].astype(float))
    for key, v in samples.items():
        assert v[0] == pytest.approx(_value(direct, key), abs=1e-9), key


def test_formulations_differing_only_by_noise_are_not_significant():
    coco = synthetic_coco(150, 10, seed=4)
    preds = _preds(coco, {"orig": 0.6, "cat": 0.6})  # same recall: only jitter, scores, FPs differ
    m = score(Dataset.from_dict(coco), preds, bootstrap=300, bootstrap_seed=1).to_json()
    iv = m["intervals"]
    assert iv["resamples"] == 300 and iv["seed"] == 1
    assert bs.holds_zero(iv["delta_orig_cat"]), iv["delta_orig_cat"]
    assert m["best_formulation"] is not None and iv["best_formulation_support"] < bs.SIGNIFICANT_SUPPORT
    assert sum(iv["formulation_support"].values()) == pytest.approx(1.0)


def test_a_large_delta_is_significant():
    coco = synthetic_coco(150, 10, seed=4)
    m = score(Dataset.from_dict(coco), _preds(coco, {"orig": 0.9, "cat": 0.3}), bootstrap=300).to_json()
    iv = m["intervals"]
    assert iv["delta_orig_cat"][0] > 0.1 and not bs.holds_zero(iv["delta_orig_cat"])
    assert m["best_formulation"] == "orig" and iv["best_formulation_support"] == 1.0
    lo, hi = iv["by_formulation"]["orig"]["map50"]
    assert lo < hi and lo <= m["map50"] + 0.02 and m["map50"] - 0.02 <= hi


def test_intervals_leave_the_point_values_alone_and_are_seeded():
    coco = synthetic_coco(60, 8, seed=6)
    preds = _preds(coco, {"orig": 0.7, "cat": 0.5, "tmpl": 0.6})
    ds = Dataset.from_dict(coco)
    plain = score(ds, preds).to_json()
    a = score(ds, preds, bootstrap=50, bootstrap_seed=3).to_json()
    b = score(ds, preds, bootstrap=50, bootstrap_seed=3).to_json()
    iv = a.pop("intervals")
    assert iv == b.pop("intervals")
    assert a == plain and "intervals" not in plain
    other = score(ds, preds, bootstrap=50, bootstrap_seed=4).to_json()["intervals"]
    assert other["by_formulation"]["orig"]["map50"] != iv["by_formulation"]["orig"]["map50"]


def test_pcr_needs_every_formulation_for_its_interval():
    coco = synthetic_coco(40, 6, seed=7)
    m = score(Dataset.from_dict(coco), _preds(coco, {"orig": 0.7}), bootstrap=20).to_json()
    iv = m["intervals"]
    assert m["pcr50"] is None and "pcr50" not in iv and "delta_max" not in iv
    assert iv["by_formulation"]["orig"]["map50"] is not None and "best_formulation_support" not in iv


def test_score_cli_writes_intervals_and_bootstrap_0_turns_them_off(tmp_path, capsys):
    coco = synthetic_coco(30, 5, seed=8)
    ds_dir = tmp_path / "ds"
    ds_dir.mkdir()
    (ds_dir / "annotations.json").write_text(json.dumps(coco), encoding="utf-8")
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"model": {"name": "m"}}), encoding="utf-8")
    for f, p in _preds(coco, {"orig": 0.7, "cat": 0.5, "tmpl": 0.6}).items():
        (run / "predictions" / f"{f}.json").write_text(json.dumps(p), encoding="utf-8")
    assert main(["score", "--dataset", str(ds_dir), "--run", str(run), "--bootstrap", "40"]) == 0
    out = capsys.readouterr().out
    assert "95% intervals (40 paired bootstrap resamples" in out
    assert "operating point (best F1, IoU .5, queries pooled): score_threshold orig 0." in out
    assert json.loads((run / "metrics.json").read_text())["intervals"]["resamples"] == 40
    assert main(["score", "--dataset", str(ds_dir), "--run", str(run), "--bootstrap", "0", "--quiet"]) == 0
    assert "intervals" not in json.loads((run / "metrics.json").read_text())
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["score", "--dataset", str(ds_dir), "--run", str(run), "--bootstrap", "-1"])
    assert exc.value.code == 2 and "outside 0-100000" in capsys.readouterr().err
