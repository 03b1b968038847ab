"""The report's temporal part, for runs on a sequence dataset (metrics.json ``temporal``,
docs/METRICS.md "Temporal metrics"): a table of model x formulation (``temporal.md``,
``temporal.csv``) and, per run, a timeline figure (``fig_temporal_<n>.png``): per video, one
row per target and formulation, each frame coloured found / lost / not visible / not
asked, the prompt changes marked by dashed lines. Runs without temporal metrics add nothing.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probench.cache.records import Temporal
from probench.report.layout import wrap_title
from probench.report.load import Entry

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLUMNS", "fig_timelines", "temporal_rows", "to_csv", "to_markdown", "write_temporal"]

# (key in temporal.by_formulation.<f> or, with "run.", in temporal; header)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("continuity", "continuity"),
    ("flicker_per_100_frames", "flicker/100"),
    ("hota", "HOTA"),
    ("idf1", "IDF1"),
    ("mota", "MOTA"),
    ("id_switches_per_100_frames", "IDsw/100"),
    ("prompt_change_latency_frames", "change frames"),
    ("prompt_change_latency_ms_ros", "change ms (ROS 2)"),
    ("prompt_change_ack_ms", "ack ms"),
    ("identity", "identity"),
    ("run.temporal_pcr", "temporal PCR"),
)
# found, lost, not visible, not asked (scoring.temporal's timeline characters)
STATES = {
    "1": ("found", "#2ca02c"),
    "0": ("lost", "#d62728"),
    "-": ("not visible", "#c7c7c7"),
    " ": ("not asked", "#ffffff"),
}


def _temporal(e: Entry) -> Temporal | None:
    return e.metrics.temporal


def temporal_rows(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """One row per run with temporal metrics and formulation, in run order."""
    rows = []
    for e in entries:
        t = _temporal(e)
        if t is None:
            continue
        for f, s in t.by_formulation.items():
            row: dict[str, Any] = {"model": e.label, "formulation": f}
            for key, _ in COLUMNS:
                row[key] = getattr(t, key[4:]) if key.startswith("run.") else getattr(s, key)
            rows.append(row)
    return rows


def _cell(v: object) -> str:
    if v is None:
        return ""
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "formulation", *(k.removeprefix("run.") for k, _ in COLUMNS)])
    for r in rows:
        w.writerow([r["model"], r["formulation"], *(_cell(r[k]) for k, _ in COLUMNS)])
    return buf.getvalue()


def to_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    head = ["model", "formulation", *(h for _, h in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = [str(r["model"]), str(r["formulation"]), *(_cell(r[k]) or "–" for k, _ in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def fig_timelines(e: Entry) -> Figure | None:
    """The run's timeline figure (module doc); None without temporal metrics."""
    t = _temporal(e)
    if t is None or not t.timelines:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    timelines: Mapping[str, Mapping[str, str]] = t.timelines
    forms = list(timelines)
    keys = sorted(
        {k for lines in timelines.values() for k in lines}, key=lambda k: tuple(map(int, k.split(":")))
    )
    videos = sorted({int(k.split(":")[0]) for k in keys})
    codes = {c: i for i, c in enumerate(STATES)}
    n_rows = [sum(1 for k in keys if int(k.split(":")[0]) == v) * len(forms) for v in videos]
    fig = Figure(figsize=(8.0, 0.9 + 0.22 * sum(n_rows) + 0.35 * len(videos)), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(videos), 1, squeeze=False, height_ratios=[max(1, n) for n in n_rows])[:, 0]
    cmap = ListedColormap([c for _, c in STATES.values()])
    changes = t.prompt_change_frames
    for ax, vid in zip(axes, videos, strict=True):
        labels, grid = [], []
        for k in (k for k in keys if int(k.split(":")[0]) == vid):
            for f in forms:
                line = timelines[f].get(k, "")
                grid.append([codes.get(c, 3) for c in line])
                labels.append(f"query {k.split(':')[1]} {f}")
        width = max((len(g) for g in grid), default=0)
        grid = [g + [3] * (width - len(g)) for g in grid]
        ax.imshow(
            grid,
            aspect="auto",
            cmap=cmap,
            vmin=-0.5,
            vmax=len(STATES) - 0.5,
            interpolation="nearest",
            extent=(-0.5, width - 0.5, len(grid) - 0.5, -0.5),
        )
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        for frame in changes.get(str(vid), []):
            ax.axvline(frame - 0.5, color="black", ls="--", lw=1.2, gid=f"prompt-change:{vid}:{frame}")
        ax.set_title(f"video {vid}", fontsize=8, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    axes[-1].set_xlabel("frame")
    handles: list[Any] = [Patch(facecolor=c, label=name, edgecolor="0.5") for name, c in STATES.values()]
    handles.append(Line2D([], [], color="black", ls="--", lw=1.2, label="prompt change"))
    fig.legend(handles=handles, loc="outside lower center", ncol=5, fontsize=7, frameon=False)
    fig.suptitle(wrap_title(f"{e.label}: target found (top-1 IoU >= {t.iou_threshold or 0.5}) per frame",
                            7.8, 9), fontsize=9)
    return fig


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40] or "run"


def write_temporal(entries: Sequence[Entry], out: Path) -> tuple[dict[str, Path], str]:
    """Write the temporal table and timeline figures into ``out``; returns the files written
    and report.md's section ("" when no run has temporal metrics)."""
    from probench.cache.atomic import write_text_atomic
    from probench.report.figures import save_png

    rows = temporal_rows(entries)
    if not rows:
        return {}, ""
    written: dict[str, Path] = {}
    table = to_markdown(rows)
    for name, text in (("temporal.md", table), ("temporal.csv", to_csv(rows))):
        write_text_atomic(out / name, text)
        written[name] = out / name
    section = [
        "",
        "## Temporal metrics (sequence datasets)",
        "",
        'Definitions: docs/METRICS.md, "Temporal metrics". Found = the query\'s top-1 prediction '
        "overlaps its target with IoU >= 0.5; change frames / ms: from a prompt change to the first "
        "frame where the new target is found (ms through ROS 2: to that answer's arrival, from the "
        "operator prompt's publication, or from the changed frame's stamp when the change came as "
        "stamped per-frame sets).",
        "",
        table,
    ]
    n = 0
    for e in entries:
        fig = fig_timelines(e)
        if fig is None:
            continue
        n += 1
        name = f"fig_temporal_{n}_{_slug(e.label)}.png"
        written[name] = save_png(fig, out / name)
        section += ["", f"![{e.label}: found and lost per frame]({name})"]
    return written, "\n".join(section) + "\n"
