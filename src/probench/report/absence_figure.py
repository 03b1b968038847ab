"""The absence figure (issue 37; docs/METRICS.md, "Absence"): per run and formulation, the
share of absent targets the model answers (hallucination rate, x) against the share of
present targets it answers (presence TPR, y), at the operating threshold of metrics.json's
``absence``. The diagonal is chance (MCC 0): above it, the model tells present from absent.

Kept in its own module (the report's other figures are :mod:`probench.report.figures`,
whose helpers it uses)."""

from __future__ import annotations

from probench.cache.records import AbsenceScores
from probench.report.figures import Plot, _colours, _figure
from probench.report.load import Entry
from probench.vocabulary import RUN_FORMULATIONS

MARKERS = {"orig": "o", "cat": "s", "tmpl": "^", "policy": "D"}


def _drawn(e: Entry) -> dict[str, AbsenceScores]:
    """The run's formulations with both rates (a run without negative pairs has no x)."""
    ab = e.metrics.absence
    if ab is None:
        return {}
    return {f: s for f, s in ab.by_formulation.items()
            if s.presence_tpr is not None and s.hallucination_rate is not None}  # fmt: skip


def fig_absence(entries: list[Entry]) -> Plot:
    """Presence TPR versus hallucination rate: a colour per run, a marker per formulation."""
    runs = [e for e in entries if not e.reference and _drawn(e)]
    notes = []
    for e in entries:
        if e.reference or any(e is r for r in runs):
            continue
        why = ("no absence block in its metrics.json (scored by an older probench)"
               if e.metrics.absence is None
               else "no negative pairs (every query asked has a target): no hallucination rate")
        notes.append(f"{e.label}: left out of the absence figure ({why})")
    if not runs:
        return Plot(None, notes)
    fig = _figure(6.4, 4.4)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=0.8, gid="chance")
    thresholds = set()
    for e, colour in zip(runs, _colours(len(runs)), strict=True):
        ab = e.metrics.absence
        if ab is not None and ab.score_threshold is not None:
            thresholds.add(ab.score_threshold)
        for f, s in _drawn(e).items():  # both rates are numbers here (_drawn)
            x, y = float(s.hallucination_rate or 0.0), float(s.presence_tpr or 0.0)
            ax.scatter([x], [y], color=colour, marker=MARKERS.get(f, "x"), s=36, gid=f"run:{e.label}:{f}",
                       zorder=3)  # fmt: skip
    # no text beside the points (they would overlap): a legend says what each is
    from matplotlib.lines import Line2D

    run_handles = [Line2D([], [], color=c, marker="o", linestyle="", label=e.label)
                   for e, c in zip(runs, _colours(len(runs)), strict=True)]  # fmt: skip
    forms = [f for f in RUN_FORMULATIONS if any(f in _drawn(e) for e in runs)]
    form_handles = [Line2D([], [], color="0.3", marker=MARKERS[f], linestyle="", label=f) for f in forms]
    # one legend (the layout makes room for it): the runs' colours, then the formulations' markers
    ax.legend(handles=[*run_handles, *form_handles], loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7,
              frameon=False, title="colour: run\nmarker: formulation", title_fontsize=7)  # fmt: skip
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("hallucination rate (negative pairs with a box)")
    ax.set_ylabel("presence TPR (positive pairs with a box)")
    ax.grid(True, alpha=0.3)
    at = ", ".join(f"{t:g}" for t in sorted(thresholds))
    ax.set_title(f"Absent targets: a box at score >= {at}", fontsize=9)
    return Plot(fig, notes)
