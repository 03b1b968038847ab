"""Figures 3-5: what is drawn, inspected on the matplotlib objects (no pixels)."""

from __future__ import annotations

import itertools

import pytest

from probench.report.figures import (
    BUDGET_MS,
    delta_max_by_iou,
    fig_delta_vs_iou,
    fig_map_vs_iou,
    fig_pareto,
    pareto_front,
)
from probench.report.load import load_reference, load_run


def _by_gid(fig, prefix):
    ax = fig.axes[0]
    return [a for a in ax.get_children() if (a.get_gid() or "").startswith(prefix)]


def test_fig3_one_line_per_run_over_the_sweep(two_runs, reference_csv):
    entries = [load_run(r) for r in two_runs] + load_reference(reference_csv)
    plot = fig_map_vs_iou(entries)
    lines = _by_gid(plot.figure, "run:")
    assert sorted(ln.get_gid() for ln in lines) == ["run:OWL-ViT", "run:OWLv2-B (random weights)"]
    xs, ys = lines[0].get_data()
    assert list(xs) == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    assert all(a >= b for a, b in itertools.pairwise(ys))  # AP falls as IoU tightens
    # the paper's rows have no sweep: left out, with a note each
    assert len(plot.notes) == 3 and all("published rows have no IoU sweep" in n for n in plot.notes)


def test_fig4_delta_max_is_max_minus_min_per_threshold(two_runs):
    e = load_run(two_runs[1])  # peaks orig 0.9, cat 0.7, tmpl 0.8
    d = delta_max_by_iou(e)
    for t, v in d.items():
        aps = [e.ap_by_iou(f)[t] for f in ("orig", "cat", "tmpl")]
        assert v == pytest.approx(max(aps) - min(aps))
    assert d[0.1] == pytest.approx(0.9 * (1 - 0.001) - 0.7 * (1 - 0.001), abs=1e-3)
    plot = fig_delta_vs_iou([load_run(r) for r in two_runs])
    line = next(ln for ln in _by_gid(plot.figure, "run:") if ln.get_gid() == "run:OWL-ViT")
    assert list(line.get_data()[1]) == pytest.approx(list(d.values()))


def test_fig4_needs_two_formulations(make_run):
    only_orig = load_run(make_run("solo", peaks={"orig": 0.5}))
    assert delta_max_by_iou(only_orig) is None
    plot = fig_delta_vs_iou([only_orig])
    assert plot.figure is None and "fewer than two formulations" in plot.notes[0]


def test_pareto_front_keeps_only_undominated_points():
    pts = [(10.0, 0.2), (20.0, 0.1), (30.0, 0.5), (5.0, 0.05), (30.0, 0.4), (100.0, 0.5)]
    assert pareto_front(pts) == [3, 0, 2]


def test_fig5_reference_rows_budget_frontier_and_left_out_runs(two_runs, reference_csv, make_run):
    no_lat = load_run(make_run("nolat", paper_name="G-DINO-T", latency=None))
    entries = [load_run(r) for r in two_runs] + load_reference(reference_csv) + [no_lat]
    plot = fig_pareto(entries)
    fig = plot.figure
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    points = {a.get_gid() for a in ax.get_children() if (a.get_gid() or "").startswith("point:")}
    labels = {a.get_text() for a in ax.texts}
    assert labels == {"OWLv2-B (random weights)", "OWL-ViT", "SAM3-Lite (paper)", "OmDet-T (paper)",
                      "YOLO-W-S (paper)"}  # fmt: skip
    # the random-weight row is drawn apart (hollow, grey, its own gid), labelled as such
    assert points == {f"point:{label}" for label in labels} - {"point:OWLv2-B (random weights)"}
    (random_point,) = _by_gid(fig, "random:OWLv2-B (random weights)")
    assert random_point.get_markerfacecolor() == "white"
    assert len(_by_gid(fig, "connector:")) == 5
    assert plot.notes == ["G-DINO-T: left out of Fig. 5 (no latency measured)"]
    (budget,) = _by_gid(fig, "budget")
    assert list(budget.get_xdata()) == [BUDGET_MS, BUDGET_MS]
    assert _by_gid(fig, "realtime-region")
    (front,) = _by_gid(fig, "pareto")
    # frontier: YOLO-W-S 7.3 ms -> OWL-ViT run 20 ms (0.7875 beats everything slower)
    assert list(front.get_xdata()) == [7.3, 20.0]
    # vertical connectors go from mAP.5 down to mAP.5:.95
    conn = {c.get_gid(): c for c in _by_gid(fig, "connector:")}
    seg = conn["connector:SAM3-Lite (paper)"].get_segments()[0]
    assert seg[:, 1].tolist() == pytest.approx([0.562, 0.696])
    # the run's latency std becomes a horizontal error bar; the paper rows have none
    stds = {c.get_gid(): c for c in _by_gid(fig, "std:")}
    assert set(stds) == {"std:OWL-ViT", "std:OWLv2-B (random weights)"}
    (bar,) = stds["std:OWL-ViT"].get_segments()
    assert bar[:, 0].tolist() == pytest.approx([18.0, 22.0])  # 20 +- 2 ms


def _label_boxes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    return [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts], ax.get_window_extent(renderer)


def test_fig5_labels_never_overlap_on_a_two_model_sweep_with_the_paper(make_run):
    """Issue 26: G-DINO-T collided with MM-G-D-L, and the two tiny rows of a sweep with each other."""
    from probench.report.paper import resolve_reference

    sweep = [load_run(make_run("tiny-owlv2", paper_name="OWLv2-B", random_weights=True,
                               peaks={"orig": 0.004, "cat": 0.003, "tmpl": 0.002}, latency=(61.0, 9.0))),
             load_run(make_run("tiny-gdino", paper_name="G-DINO-T", random_weights=True,
                               peaks={"orig": 0.003, "cat": 0.004, "tmpl": 0.002}, latency=(66.0, 12.0)))]
    entries = sweep + load_reference(resolve_reference("paper"))
    boxes, axes_box = _label_boxes(fig_pareto(entries).figure)
    assert len(boxes) == len(entries)
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (ta, tb)
    for t, box in boxes:  # and inside the axes
        assert axes_box.x0 - 1 <= box.x0 and box.x1 <= axes_box.x1 + 1, t
        assert axes_box.y0 - 1 <= box.y0 and box.y1 <= axes_box.y1 + 1, t


def test_fig5_std_bars_stay_inside_the_axes(make_run):
    wide = load_run(make_run("wide", latency=(20.0, 18.0)))
    fig = fig_pareto([wide]).figure
    lo, hi = fig.axes[0].get_xlim()
    (bar,) = _by_gid(fig, "std:OWLv2-B")[0].get_segments()
    assert lo < bar[:, 0].min() and bar[:, 0].max() < hi


def test_fig5_legend_shows_only_what_is_drawn(reference_csv, make_run):
    legend = lambda fig: [t.get_text() for t in fig.axes[0].get_legend().get_texts()]  # noqa: E731
    only_paper = legend(fig_pareto(load_reference(reference_csv)).figure)
    assert not any("your runs" in t for t in only_paper) and "paper (RTX 4090)" in only_paper
    assert not any("scale variants" in t for t in only_paper)  # no two rows of one family here
    only_run = legend(fig_pareto([load_run(make_run("r", paper_name="OWL-ViT"))]).figure)
    assert "your runs (probench latency)" in only_run and "paper (RTX 4090)" not in only_run
    assert not any("random weights" in t for t in only_run)
