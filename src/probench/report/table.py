"""Table II: the paper's columns, as CSV (data) and Markdown (top five marked per column).

The CSV has exactly the paper's columns (``pcr50`` / ``plc`` are recall@100 consistency,
docs/METRICS.md). The Markdown says which PCR each column is and adds the top-1 variants
(``pcr50_top1`` / ``plc_top1``, a robot's operating point) after them. ``best_formulation``
reads "tie" when every formulation has the same mAP.5.

Rows are sorted by ``map50`` descending (rows without it last, ties by label). In the
Markdown, each numeric column's best value is **bold** and ranks 2-5 carry a superscript
rank (²³⁴⁵), the paper's "top five shaded from darkest to lightest". Ranking is over all
rows shown (reference rows included) except rows with random weights, which are never
marked nor ranked; ties share a rank (1, 2, 2, 4...). Higher is better except for
``latency_ms`` and ``delta_max`` (prompt sensitivity), where lower is better.

The Markdown's ``latency ROS 2`` column (after ``latency_ms``, the offline protocol's
figure) is the mean end-to-end latency ``probench eval`` measured through the ROS 2 graph
at camera rate; it is a different measurement, never ranked. Every empty cell is explained
in the notes under the table.
"""

from __future__ import annotations

import csv
import html
import io
import re

from probench.cache.records import Intervals
from probench.report.load import COLUMNS, NUMERIC, ROS_LATENCY, Entry
from probench.scoring.bootstrap import SIGNIFICANT_SUPPORT
from probench.scoring.suite import best_formulation_text

LOWER_IS_BETTER: frozenset[str] = frozenset({"latency_ms", "delta_max"})
_AT = COLUMNS.index("latency_ms") + 1
MARKDOWN_COLUMNS: tuple[str, ...] = (*COLUMNS[:_AT], ROS_LATENCY, *COLUMNS[_AT:], "pcr50_top1", "plc_top1")
MARKDOWN_NUMERIC: tuple[str, ...] = (*NUMERIC, "pcr50_top1", "plc_top1")
HEADERS: dict[str, str] = {  # what the Markdown header says where the key alone would not
    "pcr50": "pcr50 any-of-100",
    "plc": "plc any-of-100",
    "pcr50_top1": "pcr50 top-1",
    "plc_top1": "plc top-1",
    ROS_LATENCY: "latency ROS 2 (ms)",
}
POLICY_COLUMN = "m_policy"
UNRANKED: frozenset[str] = frozenset({ROS_LATENCY})  # another measurement than the paper's column
TOP_K = 5
_SUPERSCRIPT = {2: "²", 3: "³", 4: "⁴", 5: "⁵"}


def sort_entries(entries: list[Entry]) -> list[Entry]:
    """By mAP.5 descending; rows without one go last; ties keep a stable, readable order."""

    def key(e: Entry) -> tuple[bool, float, str]:
        v = e.number("map50")
        return (v is None, -(v or 0.0), e.label)

    return sorted(entries, key=key)


def ranks(entries: list[Entry], column: str) -> list[int | None]:
    """Competition rank (1 = best) of each row's value in ``column``; None where missing, for
    rows with random weights (never ranked, and they push no other row down) and for
    :data:`UNRANKED` columns."""
    # rank what is shown: values equal after rounding share a rank
    digits = 1 if column == "latency_ms" else 3
    values = [None if column in UNRANKED or e.random_weights or (v := e.number(column)) is None
              else round(v, digits) for e in entries]
    sign = 1.0 if column in LOWER_IS_BETTER else -1.0
    present = sorted(sign * v for v in values if v is not None)
    out: list[int | None] = []
    for v in values:
        out.append(None if v is None else 1 + present.index(sign * v))
    return out


def format_number(column: str, v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:.1f}" if column in ("latency_ms", ROS_LATENCY) else f"{v:.3f}"


def cell(entry: Entry, column: str) -> str:
    if column == "model":
        return entry.label
    if column == "best_formulation":
        return best_formulation_text(entry.metrics) or ""
    return format_number(column, entry.number(column))


# Table II's columns with a bootstrap interval, and the deltas the intervals CSV adds
INTERVAL_COLUMNS: tuple[str, ...] = ("map50", "map75", "map50_95", "m_cat", "m_tmpl", "m_policy", "delta_max",
                                     "pcr50", "plc", "pcr50_top1", "plc_top1")
DELTA_COLUMNS: tuple[str, ...] = ("delta_orig_cat", "delta_tmpl_orig")
NOT_SIGNIFICANT = "†"  # a k* best in < 95% of the resamples; a delta whose interval holds 0


def interval_text(entry: Entry, column: str) -> str:
    iv = entry.interval(column) if column in INTERVAL_COLUMNS else None
    return "" if iv is None else f" [{iv[0]:.3f}, {iv[1]:.3f}]"


def not_significant(entry: Entry, column: str) -> bool:
    """k* best in fewer than 95% of the resamples; a delta whose 95% interval holds 0."""
    if column == "best_formulation":
        support = entry.best_support()
        return support is not None and support < SIGNIFICANT_SUPPORT and entry.text(column) is not None
    if column in ("delta_max", *DELTA_COLUMNS):
        iv = entry.interval(column)
        return iv is not None and iv[0] <= 0.0 <= iv[1]
    return False


def _text(v: object) -> str:
    return "" if v is None else str(v)


def md_cell(entry: Entry, column: str, rank: int | None) -> str:
    """A Markdown cell: the value (escaped), its rank mark, its interval, † when not significant."""
    text = cell(entry, column)
    text = mark(text, rank) if column not in ("model", "best_formulation") else md_text(text)
    if text and not_significant(entry, column):
        text += NOT_SIGNIFICANT
    if column == "best_formulation" and text and (support := entry.best_support()) is not None:
        text += f" ({support:.0%})"
    return text + interval_text(entry, column) if text else text


def intervals_csv(entries: list[Entry]) -> str | None:
    """The intervals beside Table II (table2_intervals.csv): per row, each column's 95%
    bootstrap interval (``<column>_low``, ``<column>_high``), the deltas orig-cat and
    tmpl-orig with theirs, and k*'s support; None when no row has intervals."""
    rows = [e for e in sort_entries(entries) if e.metrics.intervals is not None]
    if not rows:
        return None
    cols = (*INTERVAL_COLUMNS, *DELTA_COLUMNS)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", *(f"{c}_{end}" for c in cols for end in ("low", "high")), "delta_orig_cat",
                "delta_tmpl_orig", "best_formulation", "best_formulation_support", "resamples", "seed"])
    for e in rows:
        cells = [e.label]
        for c in cols:
            iv = e.interval(c)
            cells += ["", ""] if iv is None else [f"{iv[0]:.4f}", f"{iv[1]:.4f}"]
        iv_all = e.metrics.intervals or Intervals()
        support = e.best_support()
        cells += [format_number(c, e.number(c)) for c in DELTA_COLUMNS]
        cells += [cell(e, "best_formulation"), "" if support is None else f"{support:.3f}",
                  _text(iv_all.resamples), _text(iv_all.seed)]
        w.writerow(cells)
    return buf.getvalue()


def to_csv(entries: list[Entry]) -> str:
    """Table II as CSV: exactly the paper's columns, its rounding (3 decimals, latency 1)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for e in sort_entries(entries):
        w.writerow([cell(e, c) for c in COLUMNS])
    return buf.getvalue()


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_MD_SPECIAL = re.compile(r"([\\`*|])")


def md_text(text: object) -> str:
    """A string from a file (a label, a path, a reason) made inert in Markdown and HTML:
    line breaks and control characters become a space (a newline would end a table row or
    start a heading), ``& < >`` become entities (no raw HTML: ``<img onerror=...>`` is shown,
    never run), ``\\ ` * |`` are escaped and ``](`` is broken (no link or image syntax)."""
    s = _CONTROL.sub(" ", str(text))
    s = html.escape(s, quote=False)
    return _MD_SPECIAL.sub(r"\\\1", s).replace("](", "]\\(")


def mark(text: str, rank: int | None) -> str:
    if not text or rank is None or rank > TOP_K:
        return text
    return f"**{text}**" if rank == 1 else text + _SUPERSCRIPT[rank]


def _columns(entries: list[Entry]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The Markdown's columns (and numeric ones): m_policy after m_tmpl when a row has a
    prompt policy's formulation (docs/PROMPTING.md)."""
    if not any(e.number(POLICY_COLUMN) is not None for e in entries):
        return MARKDOWN_COLUMNS, MARKDOWN_NUMERIC
    at = MARKDOWN_COLUMNS.index("m_tmpl") + 1
    cols = (*MARKDOWN_COLUMNS[:at], POLICY_COLUMN, *MARKDOWN_COLUMNS[at:])
    return cols, tuple(c for c in cols if c in MARKDOWN_NUMERIC or c == POLICY_COLUMN)


def to_markdown(entries: list[Entry]) -> str:
    """Table II as a Markdown table plus a one-paragraph legend."""
    rows = sort_entries(entries)
    columns, numeric = _columns(rows)
    rank_by_col = {c: ranks(rows, c) for c in numeric}
    header = [HEADERS.get(c, c) for c in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + [":-:"] * (len(header) - 1)) + "|"]
    for i, e in enumerate(rows):
        cells = []
        cells = [md_cell(e, c, rank_by_col[c][i] if c in rank_by_col else None) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    legend = (
        "Sorted by map50 (mAP.5 under the orig formulation). Top five per column: **bold** = best, "
        "² ³ ⁴ ⁵ = 2nd-5th (ties share a rank); lower is better for latency_ms (mean, ms) and "
        "delta_max, higher for the rest. Rows with random weights are never marked or ranked: they "
        "test the pipeline, not the model. latency_ms: the paper's offline protocol (`probench "
        "latency`); latency ROS 2: the mean end-to-end latency `probench eval` measured through the "
        "ROS 2 graph at camera rate (camera to detections, warm-up frames excluded), another "
        "measurement, not ranked. m_cat / m_tmpl: mAP.5 under the cat / tmpl formulations; "
        "best_formulation: the formulation with the highest mAP.5 (tie: all formulations equal). "
        "pcr50: prompt-consistent recall at IoU 0.5, plc: prompt localisation consistency; "
        "any-of-100: a target counts as recovered when any of the up to 100 predictions kept per image "
        "and query matches it, at any score (recall@100; the paper's columns, whose operating point "
        "the paper does not name, are shown there); top-1: only the highest-scoring prediction for the "
        "query in the image counts, the one a robot acts on. Empty cell: not measured, or for PCR/PLC "
        "not computable; the notes under the table say which and why."
    )
    if POLICY_COLUMN in columns:
        legend += (" m_policy: mAP.5 of the run's prompt policy (orig through the policy, scored against "
                   "the same targets; not one of the paper's formulations, so not in delta_max, "
                   "best_formulation, pcr50 or plc; docs/PROMPTING.md).")
    if any(e.metrics.intervals is not None for e in rows):
        legend += (
            " [low, high]: the 95% paired bootstrap interval over images (metrics.json `intervals`; the "
            "resamples redraw the images with replacement, the same draw for every formulation). "
            f"{NOT_SIGNIFICANT} on delta_max: its interval holds 0 (no formulation reliably differs); on "
            f"best_formulation: k* is the best in fewer than 95% of the resamples (its support, in "
            "brackets), so not significant. Intervals of every column, and of the deltas orig-cat and "
            "tmpl-orig: [`table2_intervals.csv`](table2_intervals.csv)."
        )
    notes = "".join(f"- {n}\n" for n in table_notes(rows))
    return "\n".join(lines) + "\n\n" + legend + "\n" + (f"\n{notes}" if notes else "")


_HOW_TO_MEASURE = {
    "latency_ms": "`probench latency` measures it",
    "pcr50": "needs two formulations", "plc": "needs two formulations",
    "pcr50_top1": "not in metrics.json: score the run again with `probench score`",
    "plc_top1": "not in metrics.json: score the run again with `probench score`",
    "m_cat": "no cat predictions", "m_tmpl": "no tmpl predictions",
    "delta_max": "needs two formulations",
}


def _why_empty(e: Entry, column: str) -> str:
    count = {"plc": e.metrics.n_plc_targets, "plc_top1": e.metrics.n_plc_top1_targets}.get(column)
    if count == 0:  # PLC averages over targets recovered by every formulation
        return "no target was recovered under every formulation"
    return _HOW_TO_MEASURE.get(column, "not in metrics.json")


def table_notes(entries: list[Entry]) -> list[str]:
    """The notes under the table: every empty cell's reason (published rows together),
    rows left unranked (random weights), how each ROS 2 latency was taken, and the PCR at a
    score threshold when one was asked."""
    out: list[str] = []
    published: list[str] = []
    for e in entries:
        label = md_text(e.label)
        empty = [c for c in MARKDOWN_NUMERIC if e.number(c) is None]
        if e.number("pcr50") is None and e.metrics.pcr_null_reason is not None:
            empty = [c for c in empty if c not in ("pcr50", "plc", "pcr50_top1", "plc_top1")]  # said below
        if e.reference:
            published += [c for c in empty if c not in published]
        elif empty:
            why = "; ".join(f"{c} ({_why_empty(e, c)})" for c in empty)
            out.append(f"{label}: empty: {why}.")
        ros = e.ros_latency()
        if ros is not None:
            p95 = f", p95 {format_number(ROS_LATENCY, ros.p95)} ms" if ros.p95 is not None else ""
            how = md_text(e.ros_latency_text())
            out.append(f"{label}: latency ROS 2 {format_number(ROS_LATENCY, ros.mean)} ms (mean{p95}) "
                       f"end-to-end through the ROS 2 graph ({how}, `probench eval`); "
                       "not the offline protocol's latency_ms.")
        if e.random_weights and not e.reference:
            out.append(f"{label}: random weights: not marked or ranked in any column.")
    if published:
        out.append(f"Published rows (paper): the paper gives no {', '.join(published)}.")
    out += pcr_notes(entries)
    return out


def pcr_notes(entries: list[Entry]) -> list[str]:
    """Per row: why its PCR/PLC is empty, and the PCR at a score threshold when one was asked."""
    out = []
    for e in entries:
        label = md_text(e.label)
        reason = e.metrics.pcr_null_reason
        if e.number("pcr50") is None and reason is not None:
            out.append(f"{label}: PCR/PLC not computed: {md_text(reason)}.")
        policy = e.info.settings.get("prompt_policy")
        if isinstance(policy, dict) and e.number(POLICY_COLUMN) is not None:
            given = policy.get("gives")
            gives = "+".join(map(str, given if isinstance(given, list) else []))
            out.append(f"{label}: m_policy under prompt policy {md_text(policy.get('name'))} "
                       f"(gives {md_text(gives)}).")
        threshold = e.metrics.pcr_score_threshold
        if threshold is not None and e.number("pcr50_at") is not None:
            plc = format_number("plc", e.number("plc_at")) or "-"
            out.append(
                f"{label}: at score >= {threshold:g}, pcr50 {format_number('pcr50', e.number('pcr50_at'))}, "
                f"plc {plc}."
            )
    return out
