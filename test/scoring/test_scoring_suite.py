"""The suite's contract: keys, edge cases, score_run, the CLI and the streaming scorer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.scoring_data import write_run
from probench.cache.run import sort_results
from probench.cli import main
from probench.data.dataset import Dataset
from probench.data.synthetic import synthetic_coco, synthetic_predictions, write_synthetic_dataset
from probench.scoring import StreamingScorer, score, score_run
from probench.scoring.errors import ScoringError, ScoringUsageError

TOP_KEYS = {
    "map50", "map75", "map50_95", "by_formulation", "m_orig", "m_cat", "m_tmpl", "delta_orig_cat",
    "delta_tmpl_orig", "delta_max", "best_formulation", "best_formulation_ties", "pcr50", "plc",
    "pcr50_multi", "pcr50_top1", "plc_top1", "pcr50_top1_multi", "n_targets",
    "pcr_single_formulation_targets", "pcr_multi_formulation_targets", "pcr_null_reason",
    "n_degenerate_boxes",
    "by_prompt_type", "by_domain", "by_size",
}  # fmt: skip
SWEEP_KEYS = {"0.10", "0.20", "0.30", "0.40", "0.50", "0.60", "0.70", "0.80", "0.90", "0.95"}


@pytest.fixture(scope="module")
def small() -> tuple[dict, dict]:
    coco = synthetic_coco(30, 10, seed=5)
    return coco, synthetic_predictions(coco, seed=5)


def _no_nan(obj: object) -> None:
    if isinstance(obj, float):
        assert not math.isnan(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _no_nan(v)
    elif isinstance(obj, list):
        for v in obj:
            _no_nan(v)


def test_every_contract_key(small: tuple[dict, dict]) -> None:
    coco, preds = small
    out = score(Dataset.from_dict(coco), preds).to_json()
    assert out.keys() >= TOP_KEYS
    for f in ("orig", "cat", "tmpl"):
        s = out["by_formulation"][f]
        assert set(s["ap_by_iou"]) == SWEEP_KEYS
        assert out[f"m_{f}"] == s["map50"] == s["ap_by_iou"]["0.50"]
        assert 0 < s["map50_95"] < s["map50"] <= 1
    assert out["map50"] == out["m_orig"]
    ms = [out["m_orig"], out["m_cat"], out["m_tmpl"]]
    assert out["delta_max"] == pytest.approx(max(ms) - min(ms))
    assert out["best_formulation"] == ("orig", "cat", "tmpl")[ms.index(max(ms))]
    assert set(out["by_size"]) == {"small", "medium", "large"}
    assert set(out["by_domain"]) == {im["domain"] for im in coco["images"]}
    assert set(out["by_prompt_type"]) == {t for c in coco["categories"] for t in c["prompt_types"]}
    for group in ("by_size", "by_domain", "by_prompt_type"):
        for v in out[group].values():
            assert {"map50", "map50_95", "n_queries"} <= v.keys()
    json.dumps(out, allow_nan=False)


def test_perfect_predictions_score_one(small: tuple[dict, dict]) -> None:
    coco, _ = small
    perfect = [
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 1.0}
        for a in coco["annotations"]
    ]
    out = score(Dataset.from_dict(coco), {"orig": perfect, "cat": perfect, "tmpl": perfect}).to_json()
    assert out["map50"] == pytest.approx(1.0) and out["map50_95"] == pytest.approx(1.0)
    assert out["pcr50"] == pytest.approx(1.0) and out["plc"] == pytest.approx(1.0)
    # every formulation ties: no best one (was "orig", the first in order, before issue 14)
    assert out["delta_max"] == 0.0 and out["best_formulation"] is None
    assert out["best_formulation_ties"] == ["orig", "cat", "tmpl"]


def test_best_formulation_ties() -> None:
    coco = synthetic_coco(8, 3, seed=4, negatives_per_image=0)
    ds = Dataset.from_dict(coco)
    good = synthetic_predictions(coco, ("orig",), seed=4)["orig"]
    out = score(ds, {"orig": good, "cat": [], "tmpl": good}).to_json()  # orig = tmpl > cat = 0
    assert out["m_orig"] == out["m_tmpl"] > out["m_cat"] == 0.0
    assert out["best_formulation"] == "orig" and out["best_formulation_ties"] == ["orig", "tmpl"]
    out = score(ds, {"cat": good, "tmpl": good}).to_json()  # the two formulations scored tie
    assert out["best_formulation"] is None and out["best_formulation_ties"] == ["cat", "tmpl"]
    out = score(ds, {"orig": [], "tmpl": good}).to_json()
    assert out["best_formulation"] == "tmpl" and out["best_formulation_ties"] is None


def test_outside_label_space_and_negative_pairs() -> None:
    coco = {
        "images": [{"id": 1, "file_name": "a.png", "width": 100, "height": 100, "domain": "urban",
                    "query_ids": [1, 2]}],
        "categories": [{"id": q, "name": f"n{q}", "prompts": {"orig": f"p{q}"}} for q in (1, 2, 3)],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100}],
    }  # fmt: skip
    ds = Dataset.from_dict(coco)
    hit = {"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.5}
    neg = {"image_id": 1, "category_id": 2, "bbox": [0, 0, 10, 10], "score": 0.9}  # negative pair: FP
    out_ls = {"image_id": 1, "category_id": 3, "bbox": [0, 0, 10, 10], "score": 0.9}  # not evaluated
    base = score(ds, {"orig": [hit]}).to_json()["map50"]
    assert base == pytest.approx(1.0)
    assert score(ds, {"orig": [hit, out_ls]}).to_json()["map50"] == pytest.approx(1.0)
    out = score(ds, {"orig": [hit, neg]}).to_json()
    # query 2 has no GT: excluded from the mean, its detection does not hurt query 1
    assert out["map50"] == pytest.approx(1.0)
    assert out["by_formulation"]["orig"]["n_outside_label_space"] == 0
    outside = score(ds, {"orig": [hit, out_ls]}).to_json()["by_formulation"]["orig"]
    assert outside["n_outside_label_space"] == 1


def test_query_without_predictions_scores_zero() -> None:
    coco = synthetic_coco(6, 3, seed=2, negatives_per_image=0)
    preds = synthetic_predictions(coco, ("orig",), seed=2)["orig"]
    only_q1 = [r for r in preds if r["category_id"] == 1]
    out = score(Dataset.from_dict(coco), {"orig": only_q1}).to_json()
    # AP of query 1 alone: the same dataset reduced to query 1
    q1 = {
        "images": coco["images"],
        "categories": [c for c in coco["categories"] if c["id"] == 1],
        "annotations": [a for a in coco["annotations"] if a["category_id"] == 1],
    }
    for im in q1["images"]:
        im.pop("query_ids", None)
    ap_q1 = score(Dataset.from_dict(q1), {"orig": only_q1}).to_json()["map50"]
    assert 0 < ap_q1 <= 1
    assert out["n_queries_with_gt"] == 3
    assert out["map50"] == pytest.approx(ap_q1 / 3, abs=1e-12)  # the two others contribute 0


def test_empty_inputs_give_nulls_not_nan() -> None:
    empty = Dataset.from_dict({"images": [], "categories": [], "annotations": []})
    out = score(empty, {"orig": [], "cat": []}).to_json()
    assert out["map50"] is None and out["pcr50"] is None and out["plc"] is None
    assert out["delta_orig_cat"] is None and out["best_formulation"] is None
    _no_nan(out)
    json.dumps(out, allow_nan=False)
    coco = synthetic_coco(5, 3, seed=1)
    nothing = {f: [] for f in ("orig", "cat", "tmpl")}  # a model that outputs nothing
    out = score(Dataset.from_dict(coco), nothing).to_json()
    assert out["map50"] == 0.0 and out["pcr50"] == 0.0 and out["pcr50_top1"] == 0.0 and out["plc"] is None
    assert out["delta_max"] == 0.0 and out["best_formulation"] is None  # a tie, not "orig"


def test_bad_input_is_named() -> None:
    ds = Dataset.from_dict(synthetic_coco(3, 2, seed=0))
    with pytest.raises(ScoringUsageError, match="unknown formulation"):
        score(ds, {"foo": []})
    with pytest.raises(ScoringError, match="record 1"):
        score(ds, {"orig": [{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}, {"x": 1}]})


def test_score_run_and_cli(tmp_path: Path, small: tuple[dict, dict], capsys: pytest.CaptureFixture) -> None:
    coco, preds = small
    ds_dir = tmp_path / "ds"
    ds_dir.mkdir()
    (ds_dir / "annotations.json").write_text(json.dumps(coco))
    run = tmp_path / "run"
    write_run(run, {"orig": preds["orig"], "cat": preds["cat"]})
    ds = Dataset.from_dict(coco)
    out = score_run(ds, run).to_json()
    assert out["latency_ms"]["p95"] == 1.2 and out["realtime"]["frames_sent"] == 3
    assert out["formulations_missing"] == ["tmpl"] and out["model"] == "tiny-owlv2"
    # the cache stores results in canonical order, which fixes the order of tied scores
    want = score(ds, {"orig": sort_results(preds["orig"])}).to_json()["map50"]
    assert out["map50"] == pytest.approx(want, abs=1e-12)
    # the CLI: image files are not needed
    assert main(["score", "--dataset", str(ds_dir), "--run", str(run)]) == 0
    written = json.loads((run / "metrics.json").read_text())
    assert written["map50"] == pytest.approx(out["map50"])
    assert "mAP.5" in capsys.readouterr().out
    assert main(["score", "--dataset", str(tmp_path / "nope"), "--run", str(run)]) == 2
    assert main(["score", "--dataset", str(ds_dir), "--run", str(tmp_path / "nope")]) == 2
    empty_run = tmp_path / "empty"
    empty_run.mkdir()
    assert main(["score", "--dataset", str(ds_dir), "--run", str(empty_run)]) == 1
    err = capsys.readouterr().err
    assert "no complete predictions" in err and "Traceback" not in err


def test_streaming_matches_batch(small: tuple[dict, dict]) -> None:
    coco, preds = small
    ds = Dataset.from_dict(coco)
    s = StreamingScorer(ds)
    for f in ("orig", "cat", "tmpl"):
        by_img: dict[int, list] = {i: [] for i in ds.images}
        for r in preds[f]:
            by_img[r["image_id"]].append(r)
        for i in sorted(by_img, reverse=True):  # arrival order does not matter
            s.update(f, i, by_img[i])
    s.update("orig", 1, [r for r in preds["orig"] if r["image_id"] == 1])  # a re-sent frame replaces
    got = s.compute(pcr_score_threshold=0.5).to_json()
    want = score(ds, preds, pcr_score_threshold=0.5).to_json()
    assert want["pcr_null_reason"] is None and want["pcr50"] > want["pcr50_at"] > 0
    assert got == want  # every key, PCR/PLC variants included, bit for bit
    s.reset()
    assert s.compute().to_json()["formulations"] == []
    with pytest.raises(ScoringUsageError):
        s.update("orig", 10**6, [])


def test_write_synthetic_dataset_validates(tmp_path: Path) -> None:
    folder = write_synthetic_dataset(tmp_path / "syn", 4, seed=3)
    assert main(["validate", str(folder)]) == 0
    assert len(list((folder / "images").glob("*.png"))) == 4
