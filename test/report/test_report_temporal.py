"""The report's temporal part (report/temporal.py): a run on the sample sequence dataset gives
the temporal table (model x formulation), a timeline figure with the prompt change marked, and
report.md's section; `probench score` prints the same metrics."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from probench.cache.records import MetricsRecord
from probench.cli import main
from probench.report.build import build_report
from probench.report.load import load_run
from probench.report.temporal import fig_timelines, temporal_rows


@pytest.fixture(scope="module")
def seq_run(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seqrun") / "run"
    ds = repo_root / "datasets" / "probench-sequences"
    assert (
        main(
            [
                "infer",
                "--model",
                "helpers.sequence_link:build",
                "--dataset",
                str(ds),
                "--out",
                str(out),
                "--formulations",
                "orig,tmpl",
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["score", "--dataset", str(ds), "--run", str(out), "--quiet"]) == 0
    return out


def test_score_prints_the_temporal_metrics(
    repo_root: Path, seq_run: Path, capsys: pytest.CaptureFixture
) -> None:
    assert (
        main(
            ["score", "--dataset", str(repo_root / "datasets" / "probench-sequences"), "--run", str(seq_run)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "temporal: 4 videos, 8 targets, 1 prompt change(s)" in out
    assert any(line.startswith("orig ") and "(identity: query)" in line for line in out.splitlines())


def test_the_temporal_table_and_timeline(seq_run: Path, tmp_path: Path) -> None:
    entry = load_run(seq_run)
    rows = temporal_rows([entry])
    assert [r["formulation"] for r in rows] == ["orig", "tmpl"]
    t = entry.metrics.to_json()["temporal"]["by_formulation"]["orig"]
    assert rows[0]["continuity"] == t["continuity"] > 0.9  # the colour rule finds the shapes
    written = build_report([seq_run], tmp_path / "rep", progress=False)
    table = list(csv.DictReader(io.StringIO((tmp_path / "rep" / "temporal.csv").read_text())))
    assert [r["formulation"] for r in table] == ["orig", "tmpl"] and table[0][
        "continuity"
    ] == f"{t['continuity']:.3f}"
    figs = [p for name, p in written.items() if name.startswith("fig_temporal_")]
    assert len(figs) == 1 and figs[0].stat().st_size > 10_000
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "## Temporal metrics (sequence datasets)" in report and f"]({figs[0].name})" in report
    fig = fig_timelines(entry)
    assert fig is not None
    (change,) = entry.metrics.to_json()["temporal"]["prompt_change_frames"]["1"]
    marked = [a for ax in fig.axes for a in ax.lines if a.get_gid() == f"prompt-change:1:{change}"]
    assert len(marked) == 1 and len(fig.axes) == 4  # one panel per video
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        "query 10 orig",
        "query 10 tmpl",
        "query 11 orig",
        "query 11 tmpl",
    ]


def test_runs_without_temporal_metrics_add_nothing(tmp_path: Path) -> None:
    from probench.report.load import Entry
    from probench.report.temporal import write_temporal

    assert write_temporal([Entry("x", MetricsRecord.model_validate({"map50": 0.5}))], tmp_path) == ({}, "")
    assert list(tmp_path.iterdir()) == []
