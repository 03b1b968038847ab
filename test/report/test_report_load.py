"""Runs that know their data (issue 37, item 4): `probench bag` records the dataset's folder,
a run of the bag carries it into run.json (``dataset.made_from``), and `report` and `compare`
find the images through it without --dataset while its annotations keep the run's hash;
they say in one line when the folder moved or changed (report/load.py ``recorded_dataset``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from probench.bags.reader import ProbenchBag
from probench.cache.records import RUN_FILE
from probench.cli import main
from probench.report.build import FIGURE_FILES

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def _bag_run(tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    """A copy of the sample, its bag made by `probench bag` and a run of the bag with the
    identity the evaluator writes (predictions synthetic): (dataset folder, run folder)."""
    from probench.cache.identity import open_run
    from probench.data.synthetic import arrays_to_results, synthetic_prediction_arrays
    from probench.realtime.eval_run import ros_identity
    from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS

    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    bag = tmp_path / "bag"
    assert main(["bag", "--dataset", str(data), "--out", str(bag), "--compressed", *extra]) == 0
    grounding = {**GROUNDING_PARAMS.defaults(), "model": "tiny-owlv2"}
    with ProbenchBag(bag) as b:
        identity = ros_identity(EVALUATOR_PARAMS.defaults(), grounding, b.dataset.summary(), bag=str(bag),
                                compressed=b.compressed, made_from=b.dataset_folder)
    run = tmp_path / "run"
    open_run(run, identity, formulations=["orig"]).finish()
    coco = json.loads((data / "annotations.json").read_text(encoding="utf-8"))
    preds = arrays_to_results(synthetic_prediction_arrays(coco, "orig", seed=1, recall=0.7, fp_per_pair=1.0))
    (run / "predictions").mkdir(exist_ok=True)
    (run / "predictions" / "orig.json").write_text(json.dumps(preds), encoding="utf-8")
    # the evaluator scores its run: metrics.json (the report then scores nothing itself)
    assert main(["score", "--dataset", str(data), "--run", str(run), "--quiet", "--bootstrap", "0"]) == 0
    return data, run


def test_a_bag_run_report_draws_fig6_without_dataset_and_says_when_the_folder_moved_or_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, run = _bag_run(tmp_path)
    with ProbenchBag(tmp_path / "bag") as bag:
        assert bag.dataset_folder == str(data.resolve())
    recorded = json.loads((run / RUN_FILE).read_text())["dataset"]
    assert recorded["made_from"] == str(data.resolve()) and recorded["path"] is None
    capsys.readouterr()
    assert main(["report", str(run), "--out", str(tmp_path / "rep"), "--bootstrap", "0"]) == 0
    assert (tmp_path / "rep" / FIGURE_FILES["fig6"]).is_file()
    assert (tmp_path / "rep" / "fig_failures_1.png").is_file()
    assert "probench report:" not in capsys.readouterr().err

    ann = data / "annotations.json"  # changed: another annotation file under the same folder
    coco = json.loads(ann.read_text(encoding="utf-8"))
    coco["annotations"] = coco["annotations"][1:]
    ann.write_text(json.dumps(coco), encoding="utf-8")
    assert main(["report", str(run), "--out", str(tmp_path / "rep2"), "--bootstrap", "0"]) == 0
    err = capsys.readouterr().err.strip()
    assert not (tmp_path / "rep2" / FIGURE_FILES["fig6"]).exists()
    assert "\n" not in err and "has changed since the run" in err and "--dataset D" in err, err

    data.rename(tmp_path / "moved")  # moved
    assert main(["report", str(run), "--out", str(tmp_path / "rep3"), "--bootstrap", "0"]) == 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is gone (moved or removed)" in err, err
    doc = (tmp_path / "rep3" / "report.md").read_text(encoding="utf-8")
    assert "is gone (moved or removed)" in doc


def test_compare_finds_the_dataset_of_bag_runs_and_refuses_in_one_line_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, run = _bag_run(tmp_path, "--no-dataset-folder")
    assert json.loads((run / RUN_FILE).read_text())["dataset"]["made_from"] is None
    capsys.readouterr()
    assert main(["compare", str(run), str(run), "--bootstrap", "0"]) == 2  # a usage error
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "records no dataset folder" in err and "--dataset D" in err, err
    assert main(["compare", str(run), str(run), "--bootstrap", "0", "--dataset", str(SAMPLE)]) == 0

    _, linked = _bag_run(tmp_path / "second")
    capsys.readouterr()
    assert main(["compare", str(linked), str(linked), "--bootstrap", "0"]) == 0
    assert "map50" in capsys.readouterr().out
