"""Fig. 6 (qualitative grounding) and the failure galleries, on the bundled sample's images."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from probench.cli import main
from probench.data.dataset import load_dataset
from probench.report.errors import ReportUsageError
from probench.report.load import load_run
from probench.report.qualitative import choose_scenes, failures, fig_failures, fig_qualitative

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def _ds():
    return load_dataset(SAMPLE, check_files=False)


def test_scenes_are_one_per_domain_then_per_uncovered_prompt_type_and_can_be_chosen():
    ds = _ds()
    scenes = choose_scenes(ds)
    assert scenes == choose_scenes(ds)  # deterministic
    domains = [ds.images[i].domain for i in scenes]
    assert sorted(set(domains)) == sorted({im.domain for im in ds.images.values()})
    assert domains[:3] == ["indoor", "industrial", "outdoor"] and scenes[0] == 1
    shown = [a.query_id for a in ds.annotations if a.image_id in scenes]
    covered = {t for q in shown for t in ds.queries[q].prompt_types}
    assert covered == {t for q in ds.queries.values() for t in q.prompt_types}  # every prompt type shown
    assert choose_scenes(ds, [8, 3, 8]) == [8, 3]
    with pytest.raises(ReportUsageError, match="999"):
        choose_scenes(ds, [999])


def test_each_cell_shows_the_gt_and_the_top_prediction_per_target_prompt(sample_run):
    entry = load_run(sample_run("a", 0.9))
    ds = _ds()
    fig = fig_qualitative([entry], ds, "orig", [1]).figure
    (ax,) = [a for a in fig.axes if a.get_visible()]
    gids = {a.get_gid() for a in ax.get_children() if a.get_gid()}
    targets = sorted({a.query_id for a in ds.annotations if a.image_id == 1})
    assert {f"gt:1:{q}" for q in targets} <= gids
    texts = {t.get_gid(): t.get_text() for t in ax.texts}
    for q in targets:  # the prompt text is written out, with a score or "no prediction"
        number, text = texts[f"prompt:a:1:{q}"].split("  ", 1)
        assert text.startswith(ds.queries[q].prompts["orig"])
        assert (texts.get(f"tag:a:1:{q}") == number) == ("no prediction" not in text)
        assert (f"pred:a:1:{q}" in gids) == ("no prediction" not in text)
    preds = json.loads((entry.path / "predictions" / "orig.json").read_text())
    q = targets[0]
    best = max((p for p in preds if p["image_id"] == 1 and p["category_id"] == q), key=lambda p: p["score"])
    assert texts[f"prompt:a:1:{q}"].endswith(f"{best['score']:.2f}")


def _case_run(root: Path) -> Path:
    """Image 1 of the sample: query 2 found, query 3 mislocalised, query 4 on query 2's target;
    every other target missed."""
    ds = _ds()
    gt = {a.query_id: list(a.bbox) for a in ds.annotations if a.image_id == 1}
    x, y, w, h = gt[3]
    preds = [
        {"image_id": 1, "category_id": 2, "bbox": gt[2], "score": 0.9},
        {"image_id": 1, "category_id": 3, "bbox": [x + 0.7 * w, y, w, h], "score": 0.8},
        {"image_id": 1, "category_id": 4, "bbox": gt[2], "score": 0.7},
        {"image_id": 1, "category_id": 4, "bbox": gt[4], "score": 0.2},  # not its top one
    ]
    run = root / "case"
    (run / "predictions").mkdir(parents=True)
    (run / "predictions" / "orig.json").write_text(json.dumps(preds), encoding="utf-8")
    (run / "run.json").write_text(json.dumps({"model": {"name": "case"}, "dataset": {"path": str(SAMPLE)}}))
    (run / "metrics.json").write_text(json.dumps({"map50": 0.1}))
    return run


def test_failures_are_sorted_into_their_kinds(tmp_path):
    entry, ds = load_run(_case_run(tmp_path)), _ds()
    found = failures(entry, ds)
    assert [(f["image_id"], f["query_id"]) for f in found["mislocalised"]] == [(1, 3)]
    assert found["mislocalised"][0]["iou"] < 0.5
    assert [(f["query_id"], f["taken"]) for f in found["wrong target"]] == [(4, 2)]
    n_pairs = len({(a.image_id, a.query_id) for a in ds.annotations if not a.iscrowd})
    assert len(found["missed"]) == n_pairs - 3 and all(f["image_id"] != 1 for f in found["missed"])
    fig = fig_failures(entry, ds).figure
    rows = [a.get_ylabel() for a in fig.axes if a.get_visible() and a.get_ylabel()]
    assert rows == [f"missed ({n_pairs - 3})", "mislocalised (1)", "wrong target (1)"]


def test_report_draws_fig6_and_galleries_and_says_what_is_missing(sample_run, tmp_path, capsys):
    run = sample_run("a", 0.8)
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out), "--bootstrap", "0", "--scenes", "1,8"]) == 0
    assert (out / "fig6_qualitative.png").is_file() and (out / "fig_failures_1.png").is_file()
    doc = (out / "report.md").read_text(encoding="utf-8")
    assert "](fig6_qualitative.png)" in doc and "### Failure galleries" in doc
    # a dataset without its images (as a bag run's copy of the annotations): said, not drawn
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(SAMPLE / "annotations.json", bare / "annotations.json")
    out2 = tmp_path / "rep2"
    assert main(["report", str(run), "--out", str(out2), "--bootstrap", "0", "--dataset", str(bare)]) == 0
    assert not (out2 / "fig6_qualitative.png").exists()
    doc = (out2 / "report.md").read_text(encoding="utf-8")
    assert "Fig. 6 and the failure galleries need the dataset's images" in doc and "--dataset D" in doc
    assert "*Fig. 6: not drawn" in doc
    with pytest.raises(SystemExit):
        main(["report", str(run), "--out", str(out2), "--scenes", "x,1"])


def test_a_frame_the_node_dropped_is_marked_dropped_not_as_a_model_that_found_nothing(sample_run):
    """A ROS replay's trace says which frames were never answered: Fig. 6 writes "frame dropped"
    for them and the gallery files their pairs under "dropped", apart from "missed"."""
    from probench.cache.trace import frame_record

    run = sample_run("ros", 0.9)
    path = run / "predictions" / "orig.json"
    path.write_text(json.dumps([p for p in json.loads(path.read_text()) if p["image_id"] != 1]))
    sent = {i: i * 33_000_000 for i in (1, 2, 3)}
    trace = [frame_record("orig", i, sent_ns=t, received_ns=None if i == 1 else t + 10**7,
                          status="missed" if i == 1 else "answered") for i, t in sent.items()]  # fmt: skip
    (run / "realtime_frames.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trace))
    entry = load_run(run)
    assert entry.dropped_images("orig") == {1} and entry.dropped_images("cat") == set()
    ds = _ds()
    ax = next(a for a in fig_qualitative([entry], ds, "orig", [1, 2]).figure.axes if a.get_visible())
    said = [t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("prompt:ros:1:")]
    assert said and all(s.endswith(": frame dropped (never answered)") for s in said)
    found = failures(entry, ds, "orig")
    targets = {(a.image_id, a.query_id) for a in ds.annotations if a.image_id == 1 and not a.iscrowd}
    assert {(f["image_id"], f["query_id"]) for f in found["dropped"]} == targets
    assert all(f["image_id"] != 1 for f in found["missed"])
    axes = fig_failures(entry, ds, "orig").figure.axes
    rows = [a.get_ylabel() for a in axes if a.get_visible() and a.get_ylabel()]
    assert rows[-1] == f"dropped ({len(targets)})"
