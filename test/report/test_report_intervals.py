"""Table II's intervals and significance marks, the intervals CSV, escaping of strings from
files, and the dataset check on the scored dataset's hash."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from probench.cli import main
from probench.report.load import COLUMNS, load_run
from probench.report.table import md_text, to_markdown


def _add(run: Path, **metrics: object) -> None:
    path = run / "metrics.json"
    m = json.loads(path.read_text(encoding="utf-8"))
    m.update(metrics)
    path.write_text(json.dumps(m), encoding="utf-8")


def _intervals(support: float, delta_max: list[float]) -> dict:
    return {
        "method": "paired percentile bootstrap over images", "resamples": 1000, "seed": 0, "level": 0.95,
        "by_formulation": {"orig": {"map50": [0.40, 0.52], "map75": [0.3, 0.4], "map50_95": [0.25, 0.3]},
                           "cat": {"map50": [0.45, 0.62]}, "tmpl": {"map50": [0.35, 0.5]}},
        "delta_orig_cat": [-0.2, 0.01], "delta_tmpl_orig": [-0.1, 0.02], "delta_max": delta_max,
        "pcr50": [0.25, 0.35], "plc": [0.85, 0.95],
        "formulation_support": {"orig": (1 - support) / 2, "cat": support, "tmpl": (1 - support) / 2},
        "best_formulation_support": support,
    }  # fmt: skip


def test_markdown_shows_intervals_and_marks_what_is_not_significant(make_run, tmp_path):
    weak = make_run("weak")  # k* = cat (conftest peaks), delta_max interval holds 0
    _add(weak, intervals=_intervals(0.6, [-0.01, 0.2]))
    strong = make_run("strong", paper_name="OWL-ViT")
    _add(strong, intervals=_intervals(0.99, [0.05, 0.2]))
    md = to_markdown([load_run(weak), load_run(strong)])
    weak_row = next(line for line in md.splitlines() if line.startswith("| OWLv2-B"))
    strong_row = next(line for line in md.splitlines() if line.startswith("| OWL-ViT"))
    assert "[0.400, 0.520]" in weak_row and "[0.450, 0.620]" in weak_row  # map50 and m_cat
    assert "cat† (60%)" in weak_row and "cat (99%)" in strong_row
    assert "† [-0.010, 0.200]" in weak_row and "† [" not in strong_row.split("cat (99%)")[0]
    assert "its interval holds 0" in md and "fewer than 95% of the resamples" in md


def test_csv_keeps_the_papers_columns_and_a_second_csv_holds_the_intervals(make_run, tmp_path):
    run = make_run("a")
    _add(run, intervals=_intervals(0.6, [-0.01, 0.2]), delta_orig_cat=-0.1, delta_tmpl_orig=-0.05)
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out)]) == 0
    with (out / "table2.csv").open(encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == COLUMNS and "[" not in "".join(rows[1])
    with (out / "table2_intervals.csv").open(encoding="utf-8") as fh:
        (iv,) = list(csv.DictReader(fh))
    assert iv["map50_low"] == "0.4000" and iv["map50_high"] == "0.5200" and iv["m_cat_high"] == "0.6200"
    assert iv["delta_orig_cat_low"] == "-0.2000" and iv["delta_orig_cat"] == "-0.100"
    assert iv["best_formulation"] == "cat" and iv["best_formulation_support"] == "0.600"
    assert iv["resamples"] == "1000"


def test_no_intervals_no_intervals_csv(make_run, tmp_path):
    out = tmp_path / "rep"
    assert main(["report", str(make_run("plain")), "--out", str(out)]) == 0
    assert not (out / "table2_intervals.csv").exists()
    assert "[low, high]" not in (out / "table2.md").read_text(encoding="utf-8")


def test_strings_from_files_are_inert_in_markdown(make_run, tmp_path):
    evil = "Evil\n# heading <img src=x onerror=alert(1)> [x](javascript:alert(1)) |"
    run = make_run("evil", paper_name=evil)
    info = json.loads((run / "run.json").read_text(encoding="utf-8"))
    info["device"] = "<script>alert(1)</script>"
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out)]) == 0
    for name in ("table2.md", "report.md"):
        text = (out / name).read_text(encoding="utf-8")
        assert "<img" not in text and "<script" not in text and "](javascript" not in text, name
        assert "&lt;img src=x onerror=alert(1)&gt;" in text, name
        assert "\n# heading" not in text and "Evil # heading" in text, name
    assert md_text("a|b*c`d\\e\r\nf") == "a\\|b\\*c\\`d\\\\e f"


def test_report_refuses_runs_scored_on_different_datasets_by_their_metrics_hash(make_run, tmp_path, capsys):
    """run.json names no dataset; metrics.json's dataset_hash (the scored dataset) decides."""
    a, b = make_run("a"), make_run("b", paper_name="OWL-ViT")
    _add(a, dataset_hash="sha256:" + "a" * 64)
    _add(b, dataset_hash="sha256:" + "b" * 64)
    rc = main(["report", str(a), str(b), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1 and "2 different datasets" in err and "\n" not in err.strip()
    assert main(["report", str(a), str(b), "--out", str(tmp_path / "o"), "--allow-dataset-mismatch"]) == 0
    doc = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert "**different datasets**" in doc and "[dataset ? aaaaaaaa]" in doc


def test_a_dollar_in_a_name_is_plain_text_in_the_figures(make_run, tmp_path):
    """A label is never parsed as mathtext: ``$\\frac{`` once ended the report in an internal error."""
    run = make_run("money", paper_name="cost $\\frac{1 and $x^")
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out)]) == 0
    assert (out / "fig5_pareto.png").is_file() and (out / "fig3_map_vs_iou.png").is_file()
