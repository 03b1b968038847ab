"""The report's evidence sections on runs of the sample scored on the fly: the TIDE table,
the PR / F1 / prompt-type figures, and what each breakdown's n counts."""

from __future__ import annotations

from probench.cli import main
from probench.report.figures import fig_f1_curves, fig_pr_curves, fig_prompt_types
from probench.report.load import load_run


def test_report_has_errors_curves_and_explains_n(sample_run, tmp_path):
    a, b = sample_run("a", 0.5), sample_run("b", 0.9)
    out = tmp_path / "rep"
    assert main(["report", str(a), str(b), "--out", str(out), "--bootstrap", "50"]) == 0
    names = ("fig_pr_curves.png", "fig_f1_confidence.png", "fig_prompt_types.png", "table2_intervals.csv")
    for name in names:
        assert (out / name).is_file(), name
    doc = (out / "report.md").read_text(encoding="utf-8")
    assert "## Error analysis (TIDE)" in doc and "| a | orig |" in doc and "| b | cat |" in doc
    assert "What a reformulation changes" in doc
    assert "## Operating points" in doc and "| a | orig | " in doc
    assert "](fig_pr_curves.png)" in doc and "](fig_f1_confidence.png)" in doc
    # the sample's queries span several domains: the n add up to more than the queries, said so
    assert "a query with targets in several domains counts in each" in doc
    assert "(here a: 22 over 20 queries; b: 22 over 20 queries)." in doc  # the 22 for 20
    md = (out / "table2.md").read_text(encoding="utf-8")
    assert "[low, high]" in md and " [0." in md


def test_curve_and_bar_figures_draw_what_the_metrics_hold(sample_run):
    entry = load_run(sample_run("a", 0.7))  # scored on the fly (no metrics.json)
    curves = entry.metrics.to_json()["curves"]["by_formulation"]
    pr = fig_pr_curves([entry]).figure
    lines = {ln.get_gid(): ln for ln in pr.axes[0].get_lines()}
    assert set(lines) == {f"pr:a:{f}" for f in ("orig", "cat", "tmpl")}
    recall = [r for r in curves["orig"]["recall"] if r is not None]
    assert list(lines["pr:a:orig"].get_xdata()) == recall[: len(lines["pr:a:orig"].get_xdata())]
    f1 = fig_f1_curves([entry]).figure
    (best,) = [ln for ln in f1.axes[0].get_lines() if ln.get_gid() == "best:a:orig"]
    assert list(best.get_xdata()) == [curves["orig"]["best_f1_threshold"]]
    assert list(best.get_ydata()) == [curves["orig"]["best_f1"]]
    bars = fig_prompt_types([entry]).figure.axes[0]
    by = entry.metrics.to_json()["by_prompt_type"]
    heights = sorted(round(p.get_height(), 9) for p in bars.patches)
    assert heights == sorted(round(v["map50"], 9) for v in by.values() if v["map50"] is not None)
    ticks = [t.get_text() for t in bars.get_xticklabels()]
    assert all("(n=" in t for t in ticks) and len(ticks) == len(by)


def test_runs_without_curves_are_named(make_run):
    plot = fig_pr_curves([load_run(make_run("old"))])
    assert plot.figure is None
    assert plot.notes == ["OWLv2-B: left out of the PR curves (no curves in its metrics: score it again)"]
