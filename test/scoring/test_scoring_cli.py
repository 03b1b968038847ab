"""``probench score`` on run folders: the PCR variants, the dataset-hash check and the
count of boxes with a width or height <= 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.scoring_data import ONE_TARGET, example_predictions, write_run
from probench.cli import main
from probench.data.dataset import Dataset

OTHER_HASH = "sha256:" + "0" * 64


def _dataset(tmp_path: Path, coco: dict) -> tuple[Path, str]:
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "annotations.json").write_text(json.dumps(coco), encoding="utf-8")
    return folder, Dataset.from_dict(coco).content_hash


def _metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text(encoding="utf-8"))


def test_the_issue_example_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ds, ds_hash = _dataset(tmp_path, ONE_TARGET)
    run = tmp_path / "run"
    write_run(run, example_predictions(), dataset={"path": str(ds), "hash": ds_hash})
    assert main(["score", "--dataset", str(ds), "--run", str(run)]) == 0
    m = _metrics(run)
    assert m["map50"] == pytest.approx(0.01)
    assert m["pcr50"] == 1.0 and m["plc"] == 1.0
    assert m["pcr50_top1"] == 0.0 and m["plc_top1"] is None
    assert "pcr50_at" not in m and "pcr_score_threshold" not in m
    assert m["best_formulation"] is None and m["best_formulation_ties"] == ["orig", "cat", "tmpl"]
    assert m["dataset_hash_matches"] is True and "dataset_mismatch_allowed" not in m
    out = capsys.readouterr().out
    assert "PCR@.5 any-of-100 1.0000  top-1 0.0000" in out and "best tie" in out
    assert main(["score", "--dataset", str(ds), "--run", str(run), "--pcr-score-threshold", "0.001"]) == 0
    m = _metrics(run)
    assert m["pcr_score_threshold"] == 0.001 and m["pcr50_at"] == 1.0 and m["plc_at"] == 1.0
    assert main(["score", "--dataset", str(ds), "--run", str(run), "--pcr-score-threshold", "0.5"]) == 0
    assert _metrics(run)["pcr50_at"] == 0.0


@pytest.mark.parametrize("bad", ["1.5", "-0.1", "nan", "high"])
def test_bad_threshold_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture, bad: str) -> None:
    ds, ds_hash = _dataset(tmp_path, ONE_TARGET)
    run = tmp_path / "run"
    write_run(run, example_predictions(), dataset={"hash": ds_hash})
    with pytest.raises(SystemExit) as exc:  # argparse's usage error, one line
        main(["score", "--dataset", str(ds), "--run", str(run), "--pcr-score-threshold", bad])
    assert exc.value.code == 2
    assert "is not a score in [0, 1]" in capsys.readouterr().err
    assert not (run / "metrics.json").exists()


def test_a_dataset_other_than_the_runs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ds, ds_hash = _dataset(tmp_path, ONE_TARGET)
    run = tmp_path / "run"
    write_run(run, example_predictions(), dataset={"path": "/data/old", "hash": OTHER_HASH})
    assert main(["score", "--dataset", str(ds), "--run", str(run)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert ds_hash in err and OTHER_HASH in err and "/data/old" in err and "--allow-dataset-mismatch" in err
    assert not (run / "metrics.json").exists()
    # told otherwise: scored, and the metrics say so
    assert main(["score", "--dataset", str(ds), "--run", str(run), "--allow-dataset-mismatch"]) == 0
    assert "differs from the run's" in capsys.readouterr().err
    m = _metrics(run)
    assert m["dataset_hash_matches"] is False and m["dataset_mismatch_allowed"] is True
    assert m["dataset_hash"] == ds_hash and m["pcr50"] == 1.0


def test_allowing_a_mismatch_records_nothing_when_the_hashes_match(tmp_path: Path) -> None:
    ds, ds_hash = _dataset(tmp_path, ONE_TARGET)
    run = tmp_path / "run"
    write_run(run, example_predictions(), dataset={"hash": ds_hash})
    allow = ["--allow-dataset-mismatch", "--quiet"]
    assert main(["score", "--dataset", str(ds), "--run", str(run), *allow]) == 0
    m = _metrics(run)
    assert m["dataset_hash_matches"] is True and "dataset_mismatch_allowed" not in m
    # a run.json without a hash: nothing mismatched either
    unhashed = tmp_path / "unhashed"
    write_run(unhashed, example_predictions())
    assert main(["score", "--dataset", str(ds), "--run", str(unhashed), *allow]) == 0
    m = _metrics(unhashed)
    assert m["dataset_hash_matches"] is None and "dataset_mismatch_allowed" not in m


def test_a_run_without_a_dataset_hash_is_scored(tmp_path: Path) -> None:
    ds, _ = _dataset(tmp_path, ONE_TARGET)
    run = tmp_path / "run"
    write_run(run, example_predictions())  # run.json names no dataset: nothing to compare
    assert main(["score", "--dataset", str(ds), "--run", str(run), "--quiet"]) == 0
    assert _metrics(run)["dataset_hash_matches"] is None


def test_boxes_without_area_are_counted_and_said(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ds, ds_hash = _dataset(tmp_path, ONE_TARGET)
    preds = {f: [*p[:9], p[-1]] for f, p in example_predictions().items()}  # 9 wrong at 0.9, right at 0.001
    base = dict(preds["orig"][0])
    preds["orig"] += [
        {**base, "bbox": [100, 100, -50, 50], "score": 0.95},  # negative area: ignored
        {**base, "bbox": [100, 100, 50, 0], "score": 0.95},  # zero area: a false positive
        {**base, "bbox": [100, 100, -5, -5], "score": 0.95},  # positive area, never matches: FP
    ]
    run = tmp_path / "run"
    write_run(run, preds, dataset={"hash": ds_hash})
    assert main(["score", "--dataset", str(ds), "--run", str(run), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "orig: 3 of 13 predictions have a width or height <= 0" in err and "1 with a negative area" in err
    assert "cat:" not in err
    m = _metrics(run)
    assert m["by_formulation"]["orig"]["n_degenerate_boxes"] == 3
    assert m["by_formulation"]["orig"]["n_degenerate_ignored"] == 1
    assert m["n_degenerate_boxes"] == 3 and m["by_formulation"]["cat"]["n_degenerate_boxes"] == 0
    # as pycocotools: 2 FP at 0.95 (the ignored one is not counted), 9 FP at 0.9, then the
    # hit: precision 1/12 at recall 1; cat has 9 FP then the hit: 1/10
    assert m["map50"] == pytest.approx(1 / 12) and m["m_cat"] == pytest.approx(1 / 10)


@pytest.mark.parametrize(("record", "named"), [
    ({"image_id": 99999, "category_id": 1}, "image_id 99999 (predictions/cat.json, record 100)"),
    ({"image_id": 1, "category_id": 77}, "query (category_id) 77 (predictions/cat.json, record 100)"),
])  # fmt: skip
def test_predictions_for_unknown_images_or_queries_are_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture, record: dict, named: str
) -> None:
    ds, ds_hash = _dataset(tmp_path, ONE_TARGET)
    run = tmp_path / "run"
    preds = example_predictions()
    preds["cat"].append({**record, "bbox": [100, 100, 50, 50], "score": 0.5})
    write_run(run, preds, dataset={"hash": ds_hash})
    capsys.readouterr()
    assert main(["score", "--dataset", str(ds), "--run", str(run)]) == 1  # was rc 0, no word
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"1 prediction(s) are for images or queries this dataset does not have, the first {named}" in err
    assert "--allow-unknown" in err and not (run / "metrics.json").exists()
    assert main(["score", "--dataset", str(ds), "--run", str(run), "--allow-unknown", "--quiet"]) == 0
    assert "1 prediction(s) name images or queries the dataset does not have" in capsys.readouterr().err
    m = _metrics(run)
    assert m["n_unknown_predictions"] == 1
    assert m["map50"] == pytest.approx(0.01)  # the unknown one never matches: the same score as without it
