"""The paper's figures 3-5 and the replay's latency timeline as matplotlib Figures (Agg
canvas, no pyplot global state).

Each ``fig_*`` returns a :class:`Plot`: the figure (None when no row can be drawn) and a
note per row that was left out and why. Artists carry a ``gid`` (``"run:<label>"``,
``"pareto"``, ``"budget"``...) so that tests can inspect what was drawn without pixels.
matplotlib is imported inside the functions: ``probench --help`` never loads it.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.cache.atomic import write_bytes_atomic
from probench.cache.records import MAP50, MAP50_95, Curve
from probench.report.layout import plain_text, wrap_title
from probench.report.load import LATENCY_COLUMN, Entry
from probench.vocabulary import FORMULATIONS

if TYPE_CHECKING:  # names for the checker only: mypy skips matplotlib (pyproject)
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation

SWEEP: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
BUDGET_MS = 33.3  # 30 Hz: the paper's real-time operational reference
DPI = 150
LEGEND_INSIDE_MAX = 6  # more lines than this: the legend goes outside, right of the axes
PANEL_WIDTH_IN = 3.4  # one panel of a multi-panel figure (timeline, curves), in inches


@dataclass
class Plot:
    figure: Figure | None
    notes: list[str] = field(default_factory=list)


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colours(n: int) -> list[tuple[float, float, float, float]]:  # RGBA
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _legend(ax: Axes, n: int) -> None:
    if n > LEGEND_INSIDE_MAX:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    else:
        ax.legend(loc="best", fontsize=8)


def _ylim(ax: Axes, top: float) -> None:
    """From just below 0 (so that zero values stay visible above the axis) to ``top``."""
    top = max(0.05, min(1.02, top))
    ax.set_ylim(-0.025 * top, top)


def _sweep_axes(ax: Axes, ylabel: str) -> None:
    ax.set_xlabel("IoU threshold")
    ax.set_ylabel(ylabel)
    ax.set_xticks(list(SWEEP))
    ax.set_xticklabels([f"{t:g}" for t in SWEEP], fontsize=8)
    ax.set_xlim(0.07, 0.98)
    ax.grid(True, alpha=0.3)


def fig_map_vs_iou(entries: list[Entry]) -> Plot:
    """Fig. 3: mAP (orig formulation) at each IoU threshold of the sweep, one line per run."""
    return _sweep_plot(
        entries,
        lambda e: e.ap_by_iou("orig"),
        "no orig IoU sweep in its metrics",
        fig="Fig. 3",
        ylabel="mAP (orig formulation)",
        title="Fig. 3 - mAP versus IoU threshold",
        headroom=1.1,
    )


def _sweep_plot(
    entries: list[Entry],
    curve_of: Callable[[Entry], dict[float, float] | None],
    why_missing: str,
    *,
    fig: str,
    ylabel: str,
    title: str,
    headroom: float,
) -> Plot:
    """One line per run over the IoU sweep (Figs. 3 and 4); runs without a curve are noted."""
    notes, series = [], []
    for e in entries:
        curve = curve_of(e)
        if curve is None:
            why = "published rows have no IoU sweep" if e.reference else why_missing
            notes.append(f"{e.label}: left out of {fig} ({why})")
            continue
        series.append((e, curve))
    if not series:
        return Plot(None, notes)
    figure = _figure(8.0 if len(series) > LEGEND_INSIDE_MAX else 6.4, 4.2)
    ax = figure.add_subplot()
    for (e, curve), colour in zip(series, _colours(len(series)), strict=True):
        xs = list(curve)
        ax.plot(xs, [curve[t] for t in xs], marker="o", ms=3.5, lw=1.6, color=colour, label=e.label,
                gid=f"run:{e.label}")
    _sweep_axes(ax, ylabel)
    top = max(max(c.values()) for _, c in series)
    _ylim(ax, top * headroom)
    ax.set_title(title, fontsize=10)
    _legend(ax, len(series))
    return Plot(figure, notes)


def delta_max_by_iou(entry: Entry) -> dict[float, float] | None:
    """Δmax at each IoU: max - min over the formulations of AP at that IoU (>= 2 needed)."""
    sweeps = [s for f in FORMULATIONS if (s := entry.ap_by_iou(f)) is not None]
    if len(sweeps) < 2:
        return None
    out = {}
    for t in sorted(set().union(*sweeps)):
        vals = [s[t] for s in sweeps if t in s]
        if len(vals) >= 2:
            out[t] = max(vals) - min(vals)
    return out or None


def fig_delta_vs_iou(entries: list[Entry]) -> Plot:
    """Fig. 4: prompt-induced variation Δmax at each IoU threshold, one line per run."""
    return _sweep_plot(
        entries,
        delta_max_by_iou,
        "fewer than two formulations with an IoU sweep",
        fig="Fig. 4",
        ylabel="Δmax (max - min of AP over formulations)",
        title="Fig. 4 - prompt-induced variation versus IoU threshold",
        headroom=1.15,
    )


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the accuracy-latency Pareto frontier (lower latency, higher accuracy),
    in increasing latency: a point is on it when no faster-or-equal point is as accurate."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], float("-inf")
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def fig_pareto(entries: list[Entry]) -> Plot:
    """Fig. 5: accuracy-latency trade-off (x latency ms, log; y mAP.5), Pareto frontier,
    connectors mAP.5 -> mAP.5:.95, latency std as horizontal bars, 30 Hz region.

    Runs measured through ROS 2 by ``probench eval`` are drawn at that latency as diamonds,
    labelled so, beside their offline point when they have one. Rows with random weights are
    drawn hollow and grey, labelled, and never enter the frontier or the scale-variant lines;
    the frontier is over the offline protocol's points of the other rows."""
    notes: list[str] = []
    rows: list[tuple[Entry, float, float]] = []
    texts: dict[int, str] = {}  # row index -> its label, where it differs from the entry's
    for e in entries:
        lat, m50 = e.number(LATENCY_COLUMN), e.number(MAP50)
        ros = e.ros_latency()
        if m50 is not None and ros is not None and ros.mean > 0:
            texts[len(rows)] = f"{e.label} [{e.ros_latency_text()}]"
            rows.append((e, ros.mean, m50))
        if lat is None or lat <= 0 or m50 is None:
            if ros is None or m50 is None:
                why = "no latency measured" if lat is None or lat <= 0 else "no mAP.5"
                notes.append(f"{e.label}: left out of Fig. 5 ({why})")
            continue
        rows.append((e, lat, m50))
    if not rows:
        return Plot(None, notes)
    # taller with many rows: their labels need room (37 rows once left no free place for some);
    # capped, so that a 500-row reference CSV still gives a page-sized figure
    fig = _figure(8.6, min(5.0 + 0.08 * max(0, len(rows) - 20), 8.0))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    # the x range holds every std bar (room for labels on both sides)
    spans = [(lat, std) for i, (e, lat, _) in enumerate(rows)
             for std in [0.0 if i in texts else (e.latency_std or 0.0)]]  # fmt: skip
    lows = [lat - s if lat - s > 0 else lat / 2 if s else lat for lat, s in spans]
    lo, hi = min([*lows, BUDGET_MS]) / 1.6, max([*(lat + s for lat, s in spans), BUDGET_MS]) * 2.5
    ax.set_xlim(lo, hi)
    ax.axvspan(lo, BUDGET_MS, color="tab:green", alpha=0.08, lw=0, gid="realtime-region")
    ax.axvline(BUDGET_MS, color="tab:green", ls="--", lw=1.0, gid="budget")
    colours = _colours(len(rows))
    for i, ((e, lat, m50), colour) in enumerate(zip(rows, colours, strict=True)):
        via_ros = i in texts
        if e.random_weights:
            colour = (0.55, 0.55, 0.55, 1.0)
        m5095 = e.number(MAP50_95)
        if m5095 is not None:  # localisation tightness, as the paper's vertical connectors
            ax.vlines(lat, m5095, m50, color=colour, lw=1.2, alpha=0.8,
                      gid=f"{'ros-' if via_ros else ''}connector:{e.label}")
            ax.plot([lat], [m5095], marker="_", ms=7, color=colour)
        std = None if via_ros else e.latency_std
        marker = "D" if via_ros else "s" if e.reference else "o"
        face = "white" if e.random_weights else colour
        bars = ax.errorbar([lat], [m50], xerr=[[std], [std]] if std else None, fmt=marker, ms=5.5,
                           color=colour, mfc=face, mec="black" if not e.reference else colour, mew=0.6,
                           capsize=2.5, elinewidth=1.0)
        kind = "ros" if via_ros else "random" if e.random_weights else "point"
        bars.lines[0].set_gid(f"{kind}:{e.label}")
        for coll in bars.lines[2]:  # the horizontal std bar, when there is one
            coll.set_gid(f"std:{e.label}")
    ymax = max(r[2] for r in rows)
    _ylim(ax, ymax * 1.15)
    ranked = [i for i, r in enumerate(rows) if i not in texts and not r[0].random_weights]
    families = _family_connectors(ax, [rows[i] for i in ranked])
    front = [ranked[k] for k in pareto_front([(rows[i][1], rows[i][2]) for i in ranked])]
    if front:
        ax.plot([rows[i][1] for i in front], [rows[i][2] for i in front], drawstyle="steps-post",
                color="0.2", lw=1.2, ls="-", alpha=0.7, gid="pareto")
    ax.set_xlabel("end-to-end latency per image (ms, log scale)")
    ax.set_ylabel("mAP.5 (vertical connector: down to mAP.5:.95)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(handles=_pareto_legend(rows, texts, frontier=bool(front), families=families), loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.set_title("Fig. 5 - accuracy-latency trade-off", fontsize=10)
    plain_text(fig)
    fig.canvas.draw()  # lay the figure out, then freeze it: labels are placed in its final pixels
    fig.set_layout_engine("none")
    _labels(ax, fig, rows, texts)
    return Plot(fig, notes)


def _pareto_legend(
    rows: list[tuple[Entry, float, float]], texts: dict[int, str], *, frontier: bool, families: bool
) -> list[Artist]:
    """Legend entries for what is drawn only."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Artist] = []
    if any(i not in texts and not e.reference and not e.random_weights for i, (e, _, _) in enumerate(rows)):
        handles.append(Line2D([], [], marker="o", ls="", color="0.5", mec="black",
                              label="your runs (probench latency)"))
    if any(e.reference for e, _, _ in rows):
        handles.append(Line2D([], [], marker="s", ls="", color="0.5", label="paper (RTX 4090)"))
    if texts:
        handles.append(Line2D([], [], marker="D", ls="", color="0.5", mec="black",
                              label="your runs end-to-end through ROS 2\nat camera rate (probench eval)"))
    if any(r[0].random_weights for r in rows):
        handles.append(Line2D([], [], marker="o", ls="", color="0.55", mfc="white", mec="black",
                              label="random weights: tests the pipeline,\nnot ranked, off the frontier"))
    if frontier:
        handles.append(Line2D([], [], color="0.2", lw=1.2, label="Pareto frontier (offline protocol)"))
    if families:
        handles.append(Line2D([], [], color="0.5", ls=":", lw=1.0, label="scale variants"))
    handles.append(Patch(color="tab:green", alpha=0.15, label="0-33.3 ms: 30 Hz real time"))
    return handles


# label places around a point, in points: (dx, dy, horizontal alignment); near ones first
_LABEL_PLACES: tuple[tuple[float, float, str], ...] = (
    (5, 2, "left"), (5, -9, "left"), (-5, 2, "right"), (-5, -9, "right"),
    (0, 7, "center"), (0, -15, "center"),
    *((dx * s, dy * s, ha) for s in (1.0, 1.8, 2.6, 3.4)
      for dx, dy, ha in ((10, 12, "left"), (10, -20, "left"), (-10, 12, "right"), (-10, -20, "right"),
                         (0, 20, "center"), (0, -28, "center"))),
)  # fmt: skip


def _labels(ax: Axes, fig: Figure, rows: list[tuple[Entry, float, float]], texts: dict[int, str]) -> None:
    """Point labels (``texts[i]`` where row ``i`` has its own), each at the first place of
    :data:`_LABEL_PLACES` where its box overlaps no label already placed, no marker and stays
    inside the axes (the least overlapping place when none is free); a leader line joins a
    label placed away from its point. The figure's layout is final (frozen) when called.

    Linear in the text layouts: a label is measured once per alignment, its box at every
    place is that box shifted by the place's offset, and the overlaps of all places with
    every box already placed are one array operation (a 500-row reference CSV once took
    minutes here: an annotation drawn per place and per row, its overlaps summed in Python)."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas has one
    to_px = ax.transData.transform
    ib = ax.get_window_extent(renderer)
    inside = np.array([ib.x0, ib.y0, ib.x1, ib.y1])
    r_px = 4.0 * fig.dpi / 72.0  # a marker's half size
    centres = np.array([to_px((lat, m50)) for _, lat, m50 in rows], dtype=float).reshape(-1, 2)
    markers = np.hstack([centres - r_px, centres + r_px])  # (n, 4) boxes x0, y0, x1, y1
    offsets = np.array([(dx, dy) for dx, dy, _ in _LABEL_PLACES], dtype=float) * fig.dpi / 72.0
    placed = np.empty((len(rows), 4))  # the box of every label placed, in placing order
    for n_placed, i in enumerate(sorted(range(len(rows)), key=lambda k: -rows[k][2])):
        e, lat, m50 = rows[i]
        text = texts.get(i, e.label)
        colour = "black" if not e.reference else "0.3"
        boxes = _place_boxes(ax, renderer, text, (lat, m50), offsets, colour)
        others = np.delete(markers, i, axis=0)
        cost = (_overlaps(boxes, placed[:n_placed]) + _overlaps(boxes, others)
                + (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
                - _overlaps(boxes, inside[None, :]))  # the part outside the axes
        free = np.flatnonzero(cost == 0)
        k = int(free[0]) if len(free) else int(np.argmin(cost))  # argmin: the first of the least
        dx, dy, ha = _LABEL_PLACES[k]
        ann = _label(ax, text, (lat, m50), (dx, dy), ha, colour, leader=bool(np.hypot(dx, dy) > 12))
        b = ann.get_window_extent(renderer)
        placed[n_placed] = (b.x0, b.y0, b.x1, b.y1)


def _label(ax: Axes, text: str, xy: tuple[float, float], offset: tuple[float, float], ha: str, colour: str,
           *, leader: bool = False) -> Annotation:
    """One Fig. 5 point label, ``offset`` points from its point; ``leader``: a line joins them."""
    arrow = {"arrowstyle": "-", "lw": 0.5, "color": "0.45", "shrinkA": 0, "shrinkB": 3} if leader else None
    ann = ax.annotate(text, xy, xytext=offset, textcoords="offset points", ha=ha, fontsize=6.5,
                      color=colour, gid=f"label:{text}", zorder=5, arrowprops=arrow,
                      bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none", "alpha": 0.6})
    ann.set_parse_math(False)
    return ann


def _place_boxes(ax: Axes, renderer: RendererBase, text: str, xy: tuple[float, float], offsets: np.ndarray,
                 colour: str) -> np.ndarray:
    """The box (x0, y0, x1, y1, pixels) ``text`` would take at each place of
    :data:`_LABEL_PLACES`: measured once per alignment at the point, then shifted."""
    measured: dict[str, tuple[float, float, float, float]] = {}
    for ha in {ha for _, _, ha in _LABEL_PLACES}:
        probe = _label(ax, text, xy, (0, 0), ha, colour)
        b = probe.get_window_extent(renderer)
        probe.remove()
        measured[ha] = (b.x0, b.y0, b.x1, b.y1)
    at_point = np.array([measured[ha] for _, _, ha in _LABEL_PLACES], dtype=float)
    boxes: np.ndarray = at_point + np.hstack([offsets, offsets])
    return boxes


def _overlaps(boxes: np.ndarray, others: np.ndarray) -> np.ndarray:
    """For each of ``boxes`` (m, 4), the summed area it shares with ``others`` (k, 4), pixels²."""
    if len(others) == 0:
        return np.zeros(len(boxes))
    w = np.minimum(boxes[:, None, 2], others[None, :, 2]) - np.maximum(boxes[:, None, 0], others[None, :, 0])
    h = np.minimum(boxes[:, None, 3], others[None, :, 3]) - np.maximum(boxes[:, None, 1], others[None, :, 1])
    shared: np.ndarray = (np.clip(w, 0, None) * np.clip(h, 0, None)).sum(axis=1)
    return shared


def _family_connectors(ax: Axes, rows: list[tuple[Entry, float, float]]) -> bool:
    """Dotted lines joining scale variants of one architecture (same family, same source);
    whether any was drawn."""
    groups: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for e, lat, m50 in rows:
        if e.family:
            groups.setdefault((e.family, e.reference), []).append((lat, m50))
    drawn = False
    for (family, _ref), pts in groups.items():
        if len(pts) >= 2:
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ls=":", lw=1.0, color="0.5",
                    gid=f"family:{family}")
            drawn = True
    return drawn


def timeline_points(
    trace: list[dict[str, Any]], formulation: str, period_s: float
) -> dict[str, list[tuple[float, float]]]:
    """One formulation's frames of a replay trace as (seconds since its first frame, latency
    ms) by kind: ``answered``, ``warmup`` (answered warm-up frames), ``missed`` (latency
    None: not answered, or not credited). Sessions of a resumed run follow one another (a
    period apart), whatever time passed between them."""
    from probench.cache.trace import ANSWERED, latest_frames, warmup_frames

    recs = [r for r in [*warmup_frames(trace), *latest_frames(trace)] if r.get("formulation") == formulation]
    out: dict[str, list[tuple[float, float]]] = {"answered": [], "warmup": [], "missed": []}
    offset = 0.0
    by_session: dict[int, list[dict[str, Any]]] = {}
    for r in recs:
        by_session.setdefault(int(r.get("session", 0)), []).append(r)
    for session in sorted(by_session):
        rows = by_session[session]
        t0 = int(rows[0]["sent_ns"])
        for r in rows:
            t = offset + (int(r["sent_ns"]) - t0) / 1e9
            if r.get("status") != ANSWERED or r.get("latency_ms") is None:
                out["missed"].append((t, float("nan")))
            else:
                out["warmup" if r.get("warmup") else "answered"].append((t, float(r["latency_ms"])))
        offset += (int(rows[-1]["sent_ns"]) - t0) / 1e9 + period_s
    return out


def fig_latency_timeline(entries: list[Entry]) -> Plot:
    """Latency of every frame over the replay, one panel per formulation (columns) and run
    (rows): answered frames, warm-up frames apart, missed frames marked along the top, the
    real-time budget as a line. Drawn for runs that came through the ROS graph (their
    ``realtime_frames.jsonl``)."""
    notes = []
    rows = []
    for e in entries:
        if e.reference:
            continue
        if not e.trace:
            if e.metrics.realtime is not None:
                notes.append(f"{e.label}: left out of the latency timeline (no realtime_frames.jsonl)")
            continue
        forms = [f for f in FORMULATIONS if any(r.get("formulation") == f for r in e.trace)]
        if forms:
            rows.append((e, forms))
    if not rows:
        return Plot(None, notes)
    from matplotlib.transforms import blended_transform_factory

    n_cols = max(len(forms) for _, forms in rows)
    fig = _figure(PANEL_WIDTH_IN * n_cols + 0.6, 2.8 * len(rows) + 0.4)
    axes = fig.subplots(len(rows), n_cols, squeeze=False, sharey="row")
    for i, (e, forms) in enumerate(rows):
        rt = e.metrics.realtime
        budget = float((rt.budget_ms if rt else None) or BUDGET_MS)
        rate = float((rt.rate_hz if rt else None) or 30.0)
        row_pts = {f: timeline_points(e.trace, f, 1.0 / rate) for f in forms}
        # one y range for the row's shared axis, from every answered frame of every panel
        lat_all = [v for pts in row_pts.values() for kind in ("answered", "warmup") for _, v in pts[kind]]
        log = bool(lat_all) and max(lat_all) / max(min(lat_all), 1e-3) > 30
        hi = max([*lat_all, budget])
        if log:
            axes[i][0].set_yscale("log")
            y_range = (max(min([*lat_all, budget]), 1e-3) / 1.5, hi * 1.6)
        else:
            y_range = (0.0, hi * 1.15)
        for j in range(n_cols):
            ax = axes[i][j]
            if j >= len(forms):
                ax.set_visible(False)
                continue
            f = forms[j]
            pts = row_pts[f]
            key = f"{e.label}:{f}"
            for kind, style in (("answered", {"color": "tab:blue", "marker": "o", "ms": 3.0}),
                                ("warmup", {"color": "0.55", "marker": "o", "ms": 3.0, "mfc": "none"})):
                if pts[kind]:
                    ax.plot([t for t, _ in pts[kind]], [v for _, v in pts[kind]], ls="", gid=f"{kind}:{key}",
                            label="warm-up" if kind == "warmup" else "answered", **style)
            if pts["missed"]:  # along the top edge: they have no latency
                top = blended_transform_factory(ax.transData, ax.transAxes)
                ax.plot([t for t, _ in pts["missed"]], [0.96] * len(pts["missed"]), ls="", marker="x", ms=4.0,
                        color="tab:red", transform=top, gid=f"missed:{key}", label="missed")
            ax.axhline(budget, color="tab:green", ls="--", lw=1.0, gid=f"budget:{key}",
                       label=f"{budget:g} ms budget")
            ax.set_ylim(*y_range)  # set once the row's data is known: every answered frame inside
            times = [t for v in pts.values() for t, _ in v]
            if times:
                span = max(times) - min(times)
                pad = max(span * 0.03, 0.5 / rate)
                ax.set_xlim(min(times) - pad, max(times) + pad)
            # the title counts the measured frames; warm-up frames are apart (scored nowhere)
            n_missed, n_measured = len(pts["missed"]), len(pts["answered"]) + len(pts["missed"])
            warm = f", + {len(pts['warmup'])} warm-up" if pts["warmup"] else ""
            # wrapped to the panel's width: side by side, long run labels once ran into each other
            ax.set_title(wrap_title(f"{e.label}: {f} ({n_missed} of {n_measured} measured missed{warm})",
                                    PANEL_WIDTH_IN, 8), fontsize=8)
            ax.set_xlabel("replay time (s)", fontsize=8)
            if j == 0:
                ax.set_ylabel("latency (ms)", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
    handles, labels = [], []
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.suptitle("Latency per frame over the replay", fontsize=10)
    return Plot(fig, notes)


FORMULATION_COLOURS = {"orig": "tab:blue", "cat": "tab:orange", "tmpl": "tab:green", "policy": "tab:purple"}


def _curves_of(e: Entry) -> dict[str, Curve]:
    """metrics.json ``curves.by_formulation`` of a run ({} when it has none)."""
    return dict(e.metrics.curves.by_formulation) if e.metrics.curves is not None else {}


def _panels(n: int, width: float = 3.4, height: float = 2.9) -> tuple[Figure, list[Axes]]:
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig = _figure(width * cols + 0.4, height * rows + 0.5)
    axes = fig.subplots(rows, cols, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _curve_line(ax: Axes, label: str, f: str, c: Curve, what: str) -> bool:
    """One formulation's PR or F1 line in a run's panel; whether it has any point. The F1
    line's best point is a dot, its threshold in the legend (a label beside each dot merged
    with its neighbours': "0.54" and "0.57" read "0.5457")."""
    colour = FORMULATION_COLOURS.get(f, "0.3")
    if what == "pr":
        pts = [(r, p) for r, p in zip(c.recall, c.precision, strict=False) if r is not None and p is not None]
        text = f
    else:
        pts = [(s, v) for s, v in zip(c.score_thresholds, c.f1, strict=False) if v is not None]
        best, at = c.best_f1, c.best_f1_threshold
        text = f if best is None or at is None else f"{f} (best F1 {best:.2f} at {at:.2f})"
    if not pts:
        return False
    ax.plot([x for x, _ in pts], [y for _, y in pts], color=colour, lw=1.4, label=text,
            gid=f"{what}:{label}:{f}")
    if what == "f1" and c.best_f1 is not None and c.best_f1_threshold is not None:
        ax.plot([c.best_f1_threshold], [c.best_f1], marker="o", ms=4, color=colour, gid=f"best:{label}:{f}")
    return True


def _why_no_curve(c: Curve, what: str) -> str:
    if c.n_targets == 0:
        return "no ground truth in this formulation"
    if what == "pr":
        return "no prediction at any threshold"
    return "no F1 at any threshold"


def _empty_note(ax: Axes, text: str, gid: str, width_in: float) -> None:
    """A note in the middle of an axes (``width_in`` inches wide) that has nothing to draw: why
    it is empty."""
    ax.text(0.5, 0.5, wrap_title(text, width_in * 0.8, 7),
            transform=ax.transAxes, ha="center", va="center", fontsize=7, color="0.35", gid=gid)


def _curve_plot(entries: list[Entry], what: str) -> Plot:
    """PR (``what`` "pr") or F1-versus-confidence ("f1") curves, a panel per run, a line per
    formulation (metrics.json ``curves``)."""
    notes, rows = [], []
    name = "the PR curves" if what == "pr" else "the F1 curves"
    for e in entries:
        if e.reference:
            continue
        curves = _curves_of(e)
        if not curves:
            notes.append(f"{e.label}: left out of {name} (no curves in its metrics: score it again)")
            continue
        rows.append((e, curves))
    if not rows:
        return Plot(None, notes)
    fig, axes = _panels(len(rows), PANEL_WIDTH_IN)
    for ax, (e, curves) in zip(axes, rows, strict=True):
        empty: dict[str, str] = {}  # formulation -> why it has no curve
        for f, c in curves.items():
            if not _curve_line(ax, e.label, f, c, what):
                empty[f] = _why_no_curve(c, what)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("recall (IoU 0.5, queries pooled)" if what == "pr" else "score threshold", fontsize=8)
        ax.set_ylabel("precision" if what == "pr" else "F1", fontsize=8)
        ax.set_title(wrap_title(e.label, PANEL_WIDTH_IN, 8), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        if len(empty) == len(curves):  # an empty panel says why
            _empty_note(ax, f"no {'PR' if what == 'pr' else 'F1'} curve: " + "; ".join(
                f"{f}: {why}" for f, why in empty.items()), gid=f"empty:{e.label}", width_in=PANEL_WIDTH_IN)
            continue
        for f, why in empty.items():  # a legend line for each formulation drawn nowhere, with why
            ax.plot([], [], color=FORMULATION_COLOURS.get(f, "0.3"), lw=1.4, label=f"{f}: no curve ({why})")
        ax.legend(fontsize=6.5, loc="upper right" if what == "pr" else "lower left")
    title = ("Precision-recall per formulation" if what == "pr"
             else "F1 versus score threshold (dot: the operating point, the node's score_threshold)")
    fig.suptitle(wrap_title(title, fig.get_figwidth() - 0.2, 10), fontsize=10)
    return Plot(fig, notes)


def fig_pr_curves(entries: list[Entry]) -> Plot:
    """Precision-recall curves per formulation, a panel per run."""
    return _curve_plot(entries, "pr")


def fig_f1_curves(entries: list[Entry]) -> Plot:
    """F1 against the score threshold per formulation, its best point marked (the operating point)."""
    return _curve_plot(entries, "f1")


def fig_prompt_types(entries: list[Entry]) -> Plot:
    """mAP.5 (orig) per prompt type: grouped bars, one bar per run, n queries on each tick."""
    from probench.vocabulary import PROMPT_TYPES

    runs = [e for e in entries if not e.reference and e.metrics.by_prompt_type]
    notes = [f"{e.label}: left out of the prompt-type bars (no by_prompt_type)"
             for e in entries if not e.reference and e not in runs]  # fmt: skip
    if not runs:
        return Plot(None, notes)
    types: list[str] = []
    for e in runs:
        types += [t for t in e.metrics.by_prompt_type if t not in types]
    types.sort(key=lambda t: (PROMPT_TYPES.index(t) if t in PROMPT_TYPES else len(PROMPT_TYPES), t))
    fig_width = max(5.0, 0.9 * len(types) * max(1, len(runs)) ** 0.5 + 2.5)
    fig = _figure(fig_width, 3.6)
    ax = fig.add_subplot()
    width = 0.8 / len(runs)
    drawn = 0
    for k, (e, colour) in enumerate(zip(runs, _colours(len(runs)), strict=True)):
        by = e.metrics.by_prompt_type
        xs, ys = [], []
        for i, t in enumerate(types):
            v = by[t].map50 if t in by else None
            if v is not None:
                xs.append(i - 0.4 + width * (k + 0.5))
                ys.append(float(v))
        ax.bar(xs, ys, width=width * 0.95, color=colour, label=e.label, gid=f"bars:{e.label}")
        drawn += len(xs)
    ns = []
    for t in types:
        counts = {e.metrics.by_prompt_type[t].n_queries for e in runs if t in e.metrics.by_prompt_type}
        ns.append("/".join(str(c) for c in sorted(counts)) or "?")
    ax.set_xticks(range(len(types)))
    ax.set_xticklabels([f"{t}\n(n={n})" for t, n in zip(types, ns, strict=True)], fontsize=7)
    ax.set_ylabel("mAP.5 (orig)")
    ax.set_ylim(0, 1.02)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(wrap_title("mAP.5 per prompt type (n: queries of the type; a query can have several types)",
                            fig_width - 1.5, 9), fontsize=9)
    if not drawn:  # an empty panel says why
        _empty_note(ax, "no bar: the runs' metrics hold no mAP.5 (orig) for any prompt type "
                    "(none of its queries has ground truth)", gid="empty:prompt-types",
                    width_in=fig_width - 1.5)
    _legend(ax, len(runs))
    return Plot(fig, notes)


def save_png(fig: Figure, path: str | Path) -> Path:
    """Render at 150 dpi (every text plain but the formatters' tick labels:
    :func:`probench.report.layout.plain_text`) and write atomically."""
    plain_text(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    write_bytes_atomic(path, buf.getvalue())
    return Path(path)
