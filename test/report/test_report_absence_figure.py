"""The report's absence table and figure (report/absence_figure.py, document.absence_table)."""

from __future__ import annotations

import struct
from pathlib import Path

from probench.cache.records import MetricsRecord
from probench.data.dataset import load_dataset
from probench.report.absence_figure import fig_absence
from probench.report.document import absence_table
from probench.report.load import Entry
from probench.scoring import score

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_a_report_of_sample_runs_has_the_absence_table_and_figure(sample_run, tmp_path: Path) -> None:
    from probench.report.build import build_report

    runs = [sample_run("a", 0.4, seed=4), sample_run("b", 0.9, seed=4)]
    written = build_report(runs, tmp_path / "report", progress=False, bootstrap=0)
    png = written["fig_absence"]
    assert png.name == "fig_absence.png"
    w, h = _png_size(png)
    assert 600 <= w <= 2000 and 400 <= h <= 1200
    doc = written["report.md"].read_text(encoding="utf-8")
    assert "](fig_absence.png)" in doc and "## Absent targets" in doc
    rows = [line for line in doc.splitlines() if line.startswith(("| a |", "| b |")) and "| all |" in line]
    assert len(rows) == 6  # two runs x three formulations, each an "all" row (then its prompt types)


def test_the_figure_draws_each_run_and_formulation_and_names_what_it_leaves_out() -> None:
    ds = load_dataset(SAMPLE, check_files=False)
    # the sample has negative pairs; a perfect orig (every target, nothing else) says present
    # on every positive pair and never on a negative one: TPR 1, hallucination rate 0
    perfect = [{"image_id": a.image_id, "category_id": a.query_id, "bbox": list(a.bbox), "score": 0.9}
               for a in ds.annotations]  # fmt: skip
    m = score(ds, {"orig": perfect, "cat": []})
    assert m.absence is not None
    o = m.absence.by_formulation["orig"]
    assert o.n_negative_pairs > 0 and o.presence_tpr == 1.0 and o.hallucination_rate == 0.0
    entries = [Entry("good", m), Entry("old", MetricsRecord())]
    plot = fig_absence(entries)
    assert plot.figure is not None
    gids = {a.get_gid() for a in plot.figure.axes[0].get_children() if a.get_gid()}
    assert {"run:good:orig", "run:good:cat", "chance"} <= gids
    (point,) = [a for a in plot.figure.axes[0].collections if a.get_gid() == "run:good:orig"]
    assert point.get_offsets().tolist() == [[0.0, 1.0]]
    assert plot.notes == ["old: left out of the absence figure (no absence block in its metrics.json "
                          "(scored by an older probench))"]
    table = absence_table(entries)
    assert any(line.startswith("| good | orig | all |") and "| 1.000 | 0.000 |" in line for line in table)
    assert not any(line.startswith("| old |") for line in table)


def test_no_run_with_absence_draws_nothing() -> None:
    plot = fig_absence([Entry("old", MetricsRecord())])
    assert plot.figure is None and len(plot.notes) == 1
    assert absence_table([Entry("old", MetricsRecord())]) == []
