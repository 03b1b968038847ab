"""The report itself: Table II (Markdown + CSV), Figs. 3-5, the latency timeline and
report.md from run folders, written into one folder (``probench report`` and the sweep's
report step call it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probench.report.load import Entry

FIGURE_FILES = {"fig3": "fig3_map_vs_iou.png", "fig4": "fig4_delta_max_vs_iou.png", "fig5": "fig5_pareto.png",
                "timeline": "fig_latency_timeline.png", "pr": "fig_pr_curves.png",
                "f1": "fig_f1_confidence.png", "prompt_types": "fig_prompt_types.png",
                "fig6": "fig6_qualitative.png", "fig_absence": "fig_absence.png"}


REPORT_SUFFIXES = (".md", ".csv", ".png")  # everything a report folder holds


def is_report_folder(path: Path) -> bool:
    """A folder :func:`build_report` wrote: a report.md and only regular files it writes
    (Markdown, CSV, PNG); what ``--overwrite`` may replace whole."""
    if path.is_symlink() or not (path / "report.md").is_file():
        return False
    return all(p.is_file() and not p.is_symlink() and p.suffix in REPORT_SUFFIXES for p in path.iterdir())


def build_report(
    runs: list[str | Path],
    out: str | Path,
    reference: str | Path | None = None,
    dataset: str | Path | None = None,
    allow_dataset_mismatch: bool = False,
    progress: bool = True,
    bootstrap: int = 1000,
    scenes: list[int] | None = None,
    fig6_formulation: str = "orig",
    overwrite: bool = False,
) -> dict[str, Path]:
    """Write the report into ``out``; returns {"table2.md", "table2.csv", "report.md", figN: path}.
    Runs of different datasets are refused unless ``allow_dataset_mismatch`` (then marked).
    ``progress``: a bar while several runs load (never with False: ``sweep --no-progress``).
    ``bootstrap``: resamples for the intervals of runs scored here (no metrics.json); 0: none.
    ``scenes`` (image ids) and ``fig6_formulation``: Fig. 6 (report/qualitative.py).

    ``out`` follows the writer rule (:mod:`probench.cache.output`): never a link, never in a
    run folder; the report is built out of sight and moved into place whole, replacing a
    previous report only with ``overwrite`` (nothing of it is left beside the new one)."""
    from tqdm import tqdm

    from probench.cache.output import StagedFolder, check_output_folder
    from probench.report.load import check_datasets, disambiguate, load_reference, load_run
    from probench.report.paper import resolve_reference

    out = Path(out)
    check_output_folder(out, what="report", is_previous=is_report_folder, overwrite=overwrite)  # fail fast
    refs = load_reference(resolve_reference(reference)) if reference is not None else []
    # never in a log or a pipe: tqdm's disable=None is off when stderr is not a terminal
    bar = tqdm(runs, desc="report: loading runs", unit="run", file=sys.stderr,
               disable=True if not progress or len(runs) < 2 else None, leave=False)
    entries = [load_run(r, dataset, bootstrap=bootstrap) for r in bar]
    if check_datasets(entries, allow_mismatch=allow_dataset_mismatch):
        print("probench report: warning: the runs were made on different datasets; reported together as "
              "--allow-dataset-mismatch asks, each row marked with its dataset", file=sys.stderr)
    disambiguate(entries)
    staged = StagedFolder(out, what="report", is_previous=is_report_folder, overwrite=overwrite)
    try:
        staged.path.mkdir()
        written = _write_report(entries, refs, staged.path, dataset, scenes, fig6_formulation)
        staged.commit()
    except BaseException:
        staged.abort()
        raise
    return {key: out / path.relative_to(staged.path) for key, path in written.items()}


def _write_report(entries: list[Entry], refs: list[Entry], out: Path, dataset: str | Path | None,
                  scenes: list[int] | None, fig6_formulation: str) -> dict[str, Path]:
    """The report's files written into ``out`` (a new, empty folder); returns them by key."""
    from probench.cache.atomic import write_text_atomic
    from probench.report import document, figures, table

    entries = entries + refs
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
    if any(e.trace or e.metrics.realtime is not None for e in entries):  # ROS replays only
        plots["timeline"] = figures.fig_latency_timeline(entries)
    if any(e.metrics.curves is not None for e in entries):  # runs scored with curves
        plots["pr"] = figures.fig_pr_curves(entries)
        plots["f1"] = figures.fig_f1_curves(entries)
    plots["prompt_types"] = figures.fig_prompt_types(entries)
    if any(e.metrics.absence is not None for e in entries):  # runs scored with the absence metrics
        from probench.report.absence_figure import fig_absence

        plots["fig_absence"] = fig_absence(entries)
    names: dict[str, str | None] = {}
    notes: list[str] = []
    for key, plot in plots.items():
        notes += plot.notes
        if plot.figure is None:
            names[key] = None
            continue
        written[key] = figures.save_png(plot.figure, out / FIGURE_FILES[key])
        names[key] = FIGURE_FILES[key]
    galleries = _qualitative(entries, dataset, out, scenes, fig6_formulation, names, notes, written)
    # published rows never have a sweep: one note for all of them instead of one per row
    ref_notes = [n for n in notes if "published rows" in n]
    notes = [n for n in notes if "published rows" not in n]
    if ref_notes:
        notes.append(
            f"{len(refs)} published row(s): not in Figs. 3-4 (the paper publishes no per-IoU values)"
        )
    from probench.report.temporal import write_temporal  # runs on sequence datasets only

    temporal_files, temporal_md = write_temporal(entries, out)
    written.update(temporal_files)
    write_text_atomic(out / "report.md", document.render(entries, table_md, names, notes, galleries)
                      + temporal_md)
    written["report.md"] = out / "report.md"
    return written


def _qualitative(
    entries: list[Entry], dataset: str | Path | None, out: Path, scenes: list[int] | None, formulation: str,
    names: dict[str, str | None], notes: list[str], written: dict[str, Path],
) -> list[tuple[str, str]]:
    """Fig. 6 and a failure gallery per run, for runs with predictions whose dataset's images
    are on disk; says what is missing otherwise. Returns (run label, gallery file)."""
    from probench.report import figures, qualitative

    runs = [e for e in entries
            if not e.reference and e.path is not None and (e.path / "predictions").is_dir()]  # fmt: skip
    if not runs and not scenes:
        return []
    ds, why = qualitative.dataset_for_figures(runs, dataset)
    if ds is not None:
        missing = qualitative.missing_images(ds, qualitative.choose_scenes(ds, scenes))
        if missing:
            ds, why = None, (f"Fig. 6 and the failure galleries need the dataset's images: {len(missing)} "
                             f"are not on disk (the first {missing[0]}); pass --dataset D, the dataset "
                             "folder with its images (for a bag run, the one the bag was made from)")
    if ds is None:
        names["fig6"] = None
        notes.append(str(why))
        # said where it is seen too, not in report.md only
        print(f"probench report: {why}", file=sys.stderr)
        return []
    plot = qualitative.fig_qualitative(runs, ds, formulation, scenes)
    notes += plot.notes
    names["fig6"] = None
    if plot.figure is not None:
        written["fig6"] = figures.save_png(plot.figure, out / FIGURE_FILES["fig6"])
        names["fig6"] = FIGURE_FILES["fig6"]
    galleries = []
    for k, e in enumerate(runs, start=1):
        g = qualitative.fig_failures(e, ds, formulation)
        notes += g.notes
        if g.figure is not None:
            name = f"fig_failures_{k}.png"
            written[f"failures_{k}"] = figures.save_png(g.figure, out / name)
            galleries.append((e.label, name))
    return galleries
