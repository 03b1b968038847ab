"""Figures fit to publish (issue 37, item 3; report/layout.py): the checker finds overlapping
texts and texts off the canvas, every figure a report writes passes it (16 synthetic runs
with the paper's rows and ROS replays, and runs of the bundled sample), log-axis tick labels
render as math while a ``$`` in a label stays a dollar, and an empty panel says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probench.cache.records import GroupScores
from probench.report import figures
from probench.report.build import FIGURE_FILES, build_report
from probench.report.layout import plain_text, text_problems
from probench.report.load import load_run

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"
# long and short names, as `probench models` lists them: labels of every width
NAMES = (
    "owlv2-base-patch16-ensemble", "grounding-dino-tiny", "yolo-world-s", "yoloe-11s-seg", "omdet-turbo",
    "mm-grounding-dino-t", "owlvit-b32", "sam3", "detic", "yolo-world-x", "owlv2-large", "gdino-base",
    "florence2", "yoloe-11l", "mmgd-l", "llmdet",
)  # fmt: skip


def _figure(width: float = 3.0, height: float = 2.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def test_the_checker_finds_two_texts_on_one_another_and_a_title_off_the_canvas() -> None:
    fig = _figure()
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, "0.54", fontsize=9)
    ax.text(0.52, 0.5, "0.57", fontsize=9)
    problems = text_problems(fig)
    assert len(problems) == 1 and "'0.54' overlaps '0.57'" in problems[0], problems

    fig = _figure()
    fig.add_subplot().set_title("a title far too long for its three inches of canvas, cut at both ends")
    (problem,) = text_problems(fig)
    assert "leaves the canvas" in problem and problem.startswith("'a title far too long")

    fig = _figure()
    ax = fig.add_subplot()
    ax.text(0.1, 0.5, "0.54", fontsize=9)
    ax.text(0.6, 0.5, "0.57", fontsize=9)
    assert text_problems(fig) == []  # apart: nothing to say


def test_log_axis_tick_labels_render_as_math_and_a_dollar_in_a_label_stays_a_dollar() -> None:
    fig = _figure(4.0, 3.0)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.plot([1, 10, 100], [1, 2, 3])
    ax.set_title("cost $\\frac{1 and $x^")
    plain_text(fig)
    fig.canvas.draw()
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all("mathdefault" in t.get_text() for t in labels)  # the formatter's mathtext...
    assert all(t.get_parse_math() for t in labels)  # ...parsed, so it renders as 10 to the power
    assert not ax.title.get_parse_math()  # the title is text: its dollars are printed as they are
    assert text_problems(fig) == []


def _curves(peak: float, k: int) -> dict:
    th = [i / 20 for i in range(20)]
    one = {"score_thresholds": th, "precision": [min(1.0, peak + t / 2) for t in th],
           "recall": [max(0.0, peak - t) for t in th], "f1": [max(0.0, peak * (1 - t)) for t in th],
           "n_targets": 10}  # fmt: skip
    # operating points 0.03 apart: their labels once merged into "0.5457"
    by = {f: {**one, "best_f1": round(peak * 0.9 - 0.01 * i, 3),
              "best_f1_threshold": round(0.54 + 0.03 * i, 2)}
          for i, f in enumerate(("orig", "cat", "tmpl"))}  # fmt: skip
    by["tmpl"] = {**by["tmpl"], "n_targets": 0, "recall": [None] * 20, "precision": [None] * 20,
                  "f1": [None] * 20, "best_f1": None, "best_f1_threshold": None} if k == 0 else by["tmpl"]
    return {"iou": 0.5, "by_formulation": by}


def _temporal(k: int) -> dict:
    line = "111100--  00111" * 4
    return {"iou_threshold": 0.5, "n_videos": 2, "n_frames": 60, "by_formulation": {
        f: {"continuity": 0.5, "hota": 0.4} for f in ("orig", "tmpl")},
        "timelines": {f: {"0:1": line, "0:2": line[::-1], "1:3": line} for f in ("orig", "tmpl")},
        "prompt_change_frames": {"0": [20 + k]}}  # fmt: skip


def _ros_trace(n: int, k: int) -> str:
    """A replay of ``n`` frames per formulation; latencies over a wide range (a log axis)."""
    recs = []
    for j, f in enumerate(("orig", "cat", "tmpl")):
        for i in range(n):
            lat = None if (i + k) % 4 == 0 else 0.5 * (1.9 ** (i % 12))
            sent = int((j * 10.0 + i / 30.0) * 1e9)
            recs.append({"kind": "frame", "formulation": f, "image_id": i + 1, "sent_ns": sent,
                         "received_ns": None if lat is None else sent + int(lat * 1e6),
                         "latency_ms": lat, "status": "missed" if lat is None else "answered",
                         "session": 0, "warmup": i < 2})  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in recs)


def _absence(i: int) -> dict[str, object]:
    """metrics.json's absence block: 16 runs spread over the TPR / hallucination plane."""
    by_f = {f: {"n_positive_pairs": 20, "n_negative_pairs": 10, "presence_tpr": 0.3 + 0.04 * i - k * 0.05,
                "hallucination_rate": 0.1 + 0.05 * i - k * 0.03, "presence_fpr": 0.1 + 0.05 * i - k * 0.03,
                "presence_mcc": 0.2, "positive_f1": 0.4, "cgf1": 0.08}
            for k, f in enumerate(("orig", "cat", "tmpl"))}
    return {"score_threshold": 0.3, "threshold_source": "node_default", "iou": 0.5, "by_formulation": by_f}


@pytest.fixture(scope="module")
def synthetic_16(tmp_path_factory: pytest.TempPathFactory, run_writers) -> list[Path]:
    """16 runs: every third with random weights, every fourth replayed through ROS (a trace),
    two on a sequence dataset; latencies from 5 to 115 ms."""
    root = tmp_path_factory.mktemp("sixteen")
    write_run = run_writers[0]
    runs = []
    for i, name in enumerate(NAMES):
        run = write_run(root, name, paper_name=None, random_weights=i % 3 == 0, latency=(5 + i * 7.3, 1 + i),
                        peaks={"orig": 0.3 + 0.02 * i, "cat": 0.35 + 0.015 * i, "tmpl": 0.32 + 0.01 * i})
        m = json.loads((run / "metrics.json").read_text())
        m["curves"] = _curves(0.4 + 0.01 * i, i)
        m["by_prompt_type"] = {t: {"map50": 0.3 + 0.01 * i, "map50_95": 0.2, "n_queries": 3 + k}
                               for k, t in enumerate(("categorical", "attribute", "spatial", "relational"))}
        if i % 4 == 1:
            m["realtime"] = {"budget_ms": 33.3, "rate_hz": 30.0, "mode": "camera-rate", "frames_sent": 36,
                             "frames_received": 27, "frames_missed": 9,
                             "latency_ms": {"mean": 40.0 + i, "p95": 90.0}}
            (run / "realtime_frames.jsonl").write_text(_ros_trace(12, i), encoding="utf-8")
        if i in (2, 3):
            m["temporal"] = _temporal(i)
        m["absence"] = _absence(i)
        (run / "metrics.json").write_text(json.dumps(m), encoding="utf-8")
        runs.append(run)
    return runs


def _report_figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Every figure the report saves, checked as it is saved: file name -> its problems."""
    checked: dict[str, list[str]] = {}
    save = figures.save_png

    def checking_save(fig, path):
        checked[Path(path).name] = text_problems(fig)
        return save(fig, path)

    monkeypatch.setattr(figures, "save_png", checking_save)
    return checked


def test_every_figure_of_a_16_model_report_with_the_paper_is_fit_to_publish(
    synthetic_16: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = _report_figures(monkeypatch)
    build_report(synthetic_16, tmp_path / "rep", reference="paper", progress=False)
    names = set(checked)
    assert set(FIGURE_FILES.values()) - {FIGURE_FILES["fig6"]} <= names, names  # no predictions: no Fig. 6
    assert sum("temporal" in n for n in names) == 2, names
    assert {n: p for n, p in checked.items() if p} == {}


def test_every_figure_of_a_sample_report_is_fit_to_publish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_writers
) -> None:
    write_sample_run = run_writers[1]
    runs = [write_sample_run(tmp_path / "runs", name, recall, seed)
            for name, recall, seed in (("tiny-owlv2", 0.6, 1), ("tiny-grounding-dino", 0.3, 2))]  # fmt: skip
    for one in ([runs[0]], runs):  # one run: the narrowest Fig. 6, whose title was cut at both ends
        checked = _report_figures(monkeypatch)
        build_report(one, tmp_path / f"rep{len(one)}", reference="paper", progress=False, bootstrap=0)
        assert {FIGURE_FILES["fig5"], FIGURE_FILES["fig6"], "fig_failures_1.png"} <= set(checked), checked
        assert {n: p for n, p in checked.items() if p} == {}


def test_an_empty_panel_says_why(synthetic_16: list[Path]) -> None:
    entry = load_run(synthetic_16[0])  # its tmpl formulation has no ground truth
    for plot in (figures.fig_pr_curves([entry]), figures.fig_f1_curves([entry])):
        ax = plot.figure.axes[0]
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "tmpl: no curve (no ground truth in this formulation)" in legend
    m = entry.metrics.model_copy(deep=True)
    for f in ("orig", "cat"):
        m.curves.by_formulation[f] = m.curves.by_formulation["tmpl"]
    entry.metrics = m
    ax = figures.fig_pr_curves([entry]).figure.axes[0]
    (note,) = [t.get_text() for t in ax.texts if t.get_gid() == f"empty:{entry.label}"]
    assert note.replace("\n", " ").startswith("no PR curve: orig: no ground truth in this formulation")
    empty = GroupScores(map50=None, map50_95=None, n_queries=0)
    entry.metrics = m.model_copy(update={"by_prompt_type": {"categorical": empty}})
    ax = figures.fig_prompt_types([entry]).figure.axes[0]
    assert [t.get_gid() for t in ax.texts] == ["empty:prompt-types"]
