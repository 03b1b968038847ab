"""The report itself: Table II (Markdown + CSV), Figs. 3-5, the latency timeline and
report.md from run folders, written into one folder (``probench report`` and the sweep's
report step call it)."""

from __future__ import annotations

import sys
from pathlib import Path

from probench.report.errors import ReportUsageError

FIGURE_FILES = {"fig3": "fig3_map_vs_iou.png", "fig4": "fig4_delta_max_vs_iou.png", "fig5": "fig5_pareto.png",
                "timeline": "fig_latency_timeline.png", "pr": "fig_pr_curves.png",
                "f1": "fig_f1_confidence.png", "prompt_types": "fig_prompt_types.png"}


def build_report(
    runs: list[str | Path],
    out: str | Path,
    reference: str | Path | None = None,
    dataset: str | Path | None = None,
    allow_dataset_mismatch: bool = False,
    progress: bool = True,
    bootstrap: int = 1000,
) -> dict[str, Path]:
    """Write the report into ``out``; returns {"table2.md", "table2.csv", "report.md", figN: path}.
    Runs of different datasets are refused unless ``allow_dataset_mismatch`` (then marked).
    ``progress``: a bar while several runs load (never with False: ``sweep --no-progress``).
    ``bootstrap``: resamples for the intervals of runs scored here (no metrics.json); 0: none."""
    from tqdm import tqdm

    from probench.cache.atomic import write_text_atomic
    from probench.report import document, figures, table
    from probench.report.load import check_datasets, disambiguate, load_reference, load_run

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ReportUsageError(f"{out}: exists and is not a folder")
    from probench.report.paper import resolve_reference

    # fail fast, before scoring
    refs = load_reference(resolve_reference(reference)) if reference is not None else []
    bar = tqdm(runs, desc="report: loading runs", unit="run", file=sys.stderr,
               disable=not progress or len(runs) < 2, leave=False)
    entries = [load_run(r, dataset, bootstrap=bootstrap) for r in bar]
    if check_datasets(entries, allow_mismatch=allow_dataset_mismatch):
        print("probench report: warning: the runs were made on different datasets; reported together as "
              "--allow-dataset-mismatch asks, each row marked with its dataset", file=sys.stderr)
    disambiguate(entries)
    entries += refs
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportUsageError(f"{out}: cannot create the output folder: {exc.strerror or exc}") from exc
    written: dict[str, Path] = {}
    table_md = table.to_markdown(entries)
    intervals = table.intervals_csv(entries)
    texts = [("table2.md", table_md), ("table2.csv", table.to_csv(entries))]
    if intervals is not None:
        texts.append(("table2_intervals.csv", intervals))
    for name, text in texts:
        write_text_atomic(out / name, text)
        written[name] = out / name
    plots = {
        "fig3": figures.fig_map_vs_iou(entries),
        "fig4": figures.fig_delta_vs_iou(entries),
        "fig5": figures.fig_pareto(entries),
    }
    if any(e.trace or isinstance(e.metrics.get("realtime"), dict) for e in entries):  # ROS replays only
        plots["timeline"] = figures.fig_latency_timeline(entries)
    if any(isinstance(e.metrics.get("curves"), dict) for e in entries):  # runs scored with curves
        plots["pr"] = figures.fig_pr_curves(entries)
        plots["f1"] = figures.fig_f1_curves(entries)
    plots["prompt_types"] = figures.fig_prompt_types(entries)
    names: dict[str, str | None] = {}
    notes: list[str] = []
    for key, plot in plots.items():
        notes += plot.notes
        if plot.figure is None:
            names[key] = None
            continue
        written[key] = figures.save_png(plot.figure, out / FIGURE_FILES[key])
        names[key] = FIGURE_FILES[key]
    # published rows never have a sweep: one note for all of them instead of one per row
    ref_notes = [n for n in notes if "published rows" in n]
    notes = [n for n in notes if "published rows" not in n]
    if ref_notes:
        notes.append(
            f"{len(refs)} published row(s): not in Figs. 3-4 (the paper publishes no per-IoU values)"
        )
    write_text_atomic(out / "report.md", document.render(entries, table_md, names, notes))
    written["report.md"] = out / "report.md"
    return written
