"""``probench report`` end to end: files written, PNGs valid, scoring on the fly, errors."""

from __future__ import annotations

import csv
import json
import struct
from pathlib import Path

from probench.cli import main
from probench.report.load import COLUMNS

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_writes_table_figures_and_document(two_runs, reference_csv, tmp_path, capsys):
    out = tmp_path / "report"
    rc = main(["report", *map(str, two_runs), "--out", str(out), "--reference", str(reference_csv)])
    assert rc == 0
    printed = capsys.readouterr().out.split()
    expected = ["table2.md", "table2.csv", "fig3_map_vs_iou.png", "fig4_delta_max_vs_iou.png",
                "fig5_pareto.png", "fig_prompt_types.png", "report.md"]  # fmt: skip
    assert [Path(p).name for p in printed] == expected
    for name in expected:
        assert (out / name).is_file()
    rows = list(csv.DictReader((out / "table2.csv").open(encoding="utf-8")))
    assert len(rows) == 5 and tuple(rows[0]) == COLUMNS
    for name in expected[2:6]:
        w, h = _png_size(out / name)
        assert 600 <= w <= 2000 and 400 <= h <= 1200, (name, w, h)  # 150 dpi figures
    doc = (out / "report.md").read_text(encoding="utf-8")
    for name in expected[:6]:
        assert f"]({name})" in doc or f"({name})" in doc
    assert "OWLv2-B (random weights)" in doc and "random weights" in doc.lower()
    assert "| model | map50 |" in doc


def test_run_without_metrics_is_scored_from_its_dataset(tmp_path, capsys):
    ann = json.loads((SAMPLE / "annotations.json").read_text(encoding="utf-8"))
    run = tmp_path / "perfect"
    (run / "predictions").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"model": {"name": "oracle"}, "dataset": {"path": str(SAMPLE)}}))
    gt = [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 0.9}
          for a in ann["annotations"]]  # fmt: skip
    for f in ("orig", "cat", "tmpl"):
        (run / "predictions" / f"{f}.json").write_text(json.dumps(gt if f != "cat" else gt[: len(gt) // 2]))
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out)]) == 0
    (row,) = list(csv.DictReader((out / "table2.csv").open(encoding="utf-8")))
    assert row["model"] == "oracle" and row["map50"] == "1.000" and row["best_formulation"] == "orig"
    assert float(row["m_cat"]) < 1.0 and row["latency_ms"] == ""
    assert not (run / "metrics.json").exists()  # a report never writes into its inputs
    doc = (out / "report.md").read_text(encoding="utf-8")
    assert "scored now" in doc and "left out of Fig. 5 (no latency measured)" in doc
    assert not (out / "fig5_pareto.png").exists()


def test_run_without_metrics_or_dataset_is_a_one_line_error(make_run, tmp_path, capsys):
    run = make_run("bare", with_metrics=False)
    rc = main(["report", str(run), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "\n" not in err
    assert "no metrics.json and no dataset" in err and "bare" in err


def test_malformed_reference_is_a_one_line_error(two_runs, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("model;map50\nX;0.1\n", encoding="utf-8")
    rc = main(["report", str(two_runs[0]), "--out", str(tmp_path / "o"), "--reference", str(bad)])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "\n" not in err and "not a Table II CSV" in err
    assert not (tmp_path / "o").exists()  # checked before anything is written


def test_missing_run_folder_is_a_usage_error(tmp_path, capsys):
    rc = main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "no such run folder" in err and "\n" not in err


def test_malformed_metrics_value_is_a_one_line_error(make_run, tmp_path, capsys):
    run = make_run("weird")
    m = json.loads((run / "metrics.json").read_text())
    m["map50"] = "high"
    (run / "metrics.json").write_text(json.dumps(m))
    rc = main(["report", str(run), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "\n" not in err and "map50 is 'high', not a number" in err


def test_same_model_twice_gets_folder_names(make_run, tmp_path):
    a, b = make_run("first"), make_run("second")
    out = tmp_path / "o"
    assert main(["report", str(a), str(b), "--out", str(out)]) == 0
    models = {r["model"] for r in csv.DictReader((out / "table2.csv").open(encoding="utf-8"))}
    assert models == {"OWLv2-B [first]", "OWLv2-B [second]"}


def test_realtime_and_breakdowns_reach_the_document(make_run, tmp_path):
    run = make_run("ros")
    m = json.loads((run / "metrics.json").read_text())
    m["realtime"] = {
        "budget_ms": 33.3, "rate_hz": 30.0, "frames_sent": 100, "frames_received": 98, "frames_missed": 2,
        "within_budget": 0.75, "latency_ms": {"p50": 21.0, "p95": 40.5},
    }  # fmt: skip
    (run / "metrics.json").write_text(json.dumps(m))
    out = tmp_path / "o"
    assert main(["report", str(run), "--out", str(out)]) == 0
    doc = (out / "report.md").read_text(encoding="utf-8")
    assert "| OWLv2-B | 30.0 | 100 | 98 | 2 | 75.0% | 21.0 | 40.5 |" in doc
    assert "| categorical | 0.500 (n=3) |" in doc and "| indoor | 0.400 (n=10) |" in doc


def test_dataset_option_overrides_run_json(make_run, tmp_path, capsys):
    run = make_run("elsewhere", with_metrics=False, dataset_path=str(tmp_path / "gone"))
    rc = main(["report", str(run), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "cannot score it (no metrics.json)" in err and "\n" not in err
    # the same run, pointed at the sample dataset: scored (no predictions -> a clear error)
    rc = main(["report", str(run), "--out", str(tmp_path / "o"), "--dataset", str(SAMPLE)])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "no complete predictions" in err and "\n" not in err


def test_reference_paper_adds_the_16_published_rows(tmp_path) -> None:
    from probench.report.build import build_report
    from probench.report.load import load_reference
    from probench.report.paper import table2_path

    rows = load_reference(table2_path())
    assert len(rows) == 16 and {r.label for r in rows} >= {"OWLv2-B (paper)", "SAM3-Lite (paper)"}
    owl = next(r for r in rows if r.label.startswith("OWLv2-B"))
    assert owl.metrics.map50 == 0.507
    assert owl.metrics.latency_ms is not None and owl.metrics.latency_ms.mean == 56.6
    written = build_report([], tmp_path / "out", reference="paper")
    table = written["table2.md"].read_text()
    assert "MM-G-D-T (paper)" in table and "0.696" in table


def test_document_says_how_each_latency_was_measured(make_run, tmp_path):
    measured, unknown = make_run("swept"), make_run("by-hand", paper_name="OWL-ViT")
    none = make_run("no-lat", paper_name="OmDet-T")
    iso = {"how": "one Ray task holding every CPU (8) and GPU (1) of node 10.0.0.5", "where": "gpu-node"}
    protocol = {"n_images": 50, "runs": 10, "warmup": 3, "cuda_synchronized": True}
    latency = {"device": "cuda", "protocol": protocol}
    (measured / "latency.json").write_text(json.dumps({**latency, "isolation": iso}))
    (unknown / "latency.json").write_text(json.dumps({**latency, "device": "cpu"}))
    out = tmp_path / "o"
    assert main(["report", str(measured), str(unknown), str(none), "--out", str(out)]) == 0
    doc = (out / "report.md").read_text(encoding="utf-8")
    assert "## How latency was measured" in doc
    assert f"| OWLv2-B | cuda | 50 x 10 (+ 3) | yes | {iso['how']} |" in doc
    assert "| OWL-ViT | cpu | 50 x 10 (+ 3) | yes | not recorded" in doc
    section = doc.split("## How latency was measured")[1].split("\n## ")[0]
    assert "OmDet-T" not in section and section.count("\n| ") == 3  # header + the two measured rows


def _set_dataset(run: Path, **dataset: object) -> None:
    info = json.loads((run / "run.json").read_text(encoding="utf-8"))
    info["dataset"] = dataset
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")


def test_runs_of_different_datasets_are_refused_unless_allowed_then_marked(make_run, tmp_path, capsys):
    a = make_run("a", paper_name="OWL-ViT")
    b = make_run("b", paper_name="OWLv2-B")
    _set_dataset(a, path="/data/probench", hash="sha256:" + "a" * 64)
    _set_dataset(b, path="/data/other", hash="sha256:" + "b" * 64)
    out = tmp_path / "rep"
    capsys.readouterr()
    assert main(["report", str(a), str(b), "--out", str(out)]) == 1  # was rc 0 and nothing said
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "2 different datasets" in err and "OWL-ViT on probench" in err and "OWLv2-B on other" in err
    assert "--allow-dataset-mismatch" in err and not out.exists()
    assert main(["report", str(a), str(b), "--out", str(out), "--allow-dataset-mismatch"]) == 0
    assert "made on different datasets" in capsys.readouterr().err
    rows = [r["model"] for r in csv.DictReader((out / "table2.csv").open(encoding="utf-8"))]
    assert sorted(rows) == ["OWL-ViT [dataset probench aaaaaaaa]", "OWLv2-B [dataset other bbbbbbbb]"]
    doc = (out / "report.md").read_text(encoding="utf-8")
    assert "| OWL-ViT [dataset probench aaaaaaaa] |" in doc and "**different datasets**" in doc


def test_a_ros_run_shows_its_bag_and_its_measured_latency_in_table_and_fig5(make_run, tmp_path):
    """The latency probench eval measured reaches Table II and Fig. 5, marked as end-to-end
    through ROS 2 at camera rate, next to the offline protocol's figure; a bag run's dataset
    is named (was "?")."""
    from probench.report.figures import fig_pareto
    from probench.report.load import load_run

    ros = make_run("ros", paper_name="OWL-ViT", latency=None)
    _set_dataset(ros, bag="/bags/probench-sample", hash="sha256:" + "c" * 64, path=None)
    metrics = json.loads((ros / "metrics.json").read_text(encoding="utf-8"))
    metrics["realtime"] = {"mode": "camera-rate", "rate_hz": 30.0,
                           "latency_ms": {"mean": 251.0452, "p50": 248.3, "p95": 421.1481}}
    (ros / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    out = tmp_path / "rep"
    assert main(["report", str(ros), "--out", str(out)]) == 0
    doc = (out / "report.md").read_text(encoding="utf-8")
    runs_row = next(ln for ln in doc.splitlines() if ln.startswith("| OWL-ViT | "))
    assert "bag /bags/probench-sample" in runs_row and " ? " not in runs_row
    assert "| latency_ms | latency ROS 2 (ms) |" in doc
    table_row = [ln for ln in doc.splitlines() if ln.startswith("| OWL-ViT | ")][1].split(" | ")
    assert table_row[4:6] == ["", "251.0"]  # offline latency not measured; the ROS 2 one beside it
    assert ("- OWL-ViT: latency ROS 2 251.0 ms (mean, p95 421.1 ms) end-to-end through the ROS 2 graph "
            "(ROS 2, camera-rate 30 Hz, `probench eval`)") in doc
    assert "- OWL-ViT: empty: latency_ms (`probench latency` measures it)" in doc
    fig = fig_pareto([load_run(ros)]).figure
    ax = fig.axes[0]
    (point,) = [a for a in ax.get_children() if a.get_gid() == "ros:OWL-ViT"]
    assert list(point.get_xdata()) == [251.0452]
    assert {t.get_text() for t in ax.texts} == {"OWL-ViT [ROS 2, camera-rate 30 Hz]"}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("through ROS 2" in t and "camera rate" in t for t in legend)
    assert not [a for a in ax.get_children() if a.get_gid() == "pareto"]  # no frontier of ROS points
