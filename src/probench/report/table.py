"""Table II: the paper's columns, as CSV (data) and Markdown (top five marked per column).

The CSV has exactly the paper's columns (``pcr50`` / ``plc`` are recall@100 consistency,
docs/METRICS.md). The Markdown says which PCR each column is and adds the top-1 variants
(``pcr50_top1`` / ``plc_top1``, a robot's operating point) after them. ``best_formulation``
reads "tie" when every formulation has the same mAP.5.

Rows are sorted by ``map50`` descending (rows without it last, ties by label). In the
Markdown, each numeric column's best value is **bold** and ranks 2-5 carry a superscript
rank (²³⁴⁵), the paper's "top five shaded from darkest to lightest". Ranking is over all
rows shown (reference rows included), ties share a rank (1, 2, 2, 4...). Higher is better
except for ``latency_ms`` and ``delta_max`` (prompt sensitivity), where lower is better.
"""

from __future__ import annotations

import csv
import io

from probench.report.load import COLUMNS, NUMERIC, Entry
from probench.scoring.suite import best_formulation_text

LOWER_IS_BETTER: frozenset[str] = frozenset({"latency_ms", "delta_max"})
MARKDOWN_COLUMNS: tuple[str, ...] = (*COLUMNS, "pcr50_top1", "plc_top1")
MARKDOWN_NUMERIC: tuple[str, ...] = (*NUMERIC, "pcr50_top1", "plc_top1")
HEADERS: dict[str, str] = {  # what the Markdown header says where the key alone would not
    "pcr50": "pcr50 any-of-100",
    "plc": "plc any-of-100",
    "pcr50_top1": "pcr50 top-1",
    "plc_top1": "plc top-1",
}
POLICY_COLUMN = "m_policy"
TOP_K = 5
_SUPERSCRIPT = {2: "²", 3: "³", 4: "⁴", 5: "⁵"}


def sort_entries(entries: list[Entry]) -> list[Entry]:
    """By mAP.5 descending; rows without one go last; ties keep a stable, readable order."""

    def key(e: Entry) -> tuple[bool, float, str]:
        v = e.number("map50")
        return (v is None, -(v or 0.0), e.label)

    return sorted(entries, key=key)


def ranks(entries: list[Entry], column: str) -> list[int | None]:
    """Competition rank (1 = best) of each row's value in ``column``; None where missing."""
    # rank what is shown: values equal after rounding share a rank
    digits = 1 if column == "latency_ms" else 3
    values = [None if (v := e.number(column)) is None else round(v, digits) for e in entries]
    sign = 1.0 if column in LOWER_IS_BETTER else -1.0
    present = sorted(sign * v for v in values if v is not None)
    out: list[int | None] = []
    for v in values:
        out.append(None if v is None else 1 + present.index(sign * v))
    return out


def format_number(column: str, v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:.1f}" if column == "latency_ms" else f"{v:.3f}"


def cell(entry: Entry, column: str) -> str:
    if column == "model":
        return entry.label
    if column == "best_formulation":
        return best_formulation_text(entry.metrics) or ""
    return format_number(column, entry.number(column))


def to_csv(entries: list[Entry]) -> str:
    """Table II as CSV: exactly the paper's columns, its rounding (3 decimals, latency 1)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for e in sort_entries(entries):
        w.writerow([cell(e, c) for c in COLUMNS])
    return buf.getvalue()


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
        for c in columns:
            text = cell(e, c)
            if c in rank_by_col:
                text = mark(text, rank_by_col[c][i])
            cells.append(text.replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    legend = (
        "Sorted by map50 (mAP.5 under the orig formulation). Top five per column: **bold** = best, "
        "² ³ ⁴ ⁵ = 2nd-5th (ties share a rank); lower is better for latency_ms (mean, ms) and "
        "delta_max, higher for the rest. m_cat / m_tmpl: mAP.5 under the cat / tmpl formulations; "
        "best_formulation: the formulation with the highest mAP.5 (tie: all formulations equal). "
        "pcr50: prompt-consistent recall at IoU 0.5, plc: prompt localisation consistency; "
        "any-of-100: a target counts as recovered when any of the up to 100 predictions kept per image "
        "and query matches it, at any score (recall@100; the paper's columns, whose operating point "
        "the paper does not name, are shown there); top-1: only the highest-scoring prediction for the "
        "query in the image counts, the one a robot acts on. Empty cell: not measured, or for PCR/PLC "
        "not computable (see the notes under the table)."
    )
    if POLICY_COLUMN in columns:
        legend += (" m_policy: mAP.5 of the run's prompt policy (orig through the policy, scored against "
                   "the same targets; not one of the paper's formulations, so not in delta_max, "
                   "best_formulation, pcr50 or plc; docs/PROMPTING.md).")
    notes = "".join(f"- {n}\n" for n in pcr_notes(rows))
    return "\n".join(lines) + "\n\n" + legend + "\n" + (f"\n{notes}" if notes else "")


def pcr_notes(entries: list[Entry]) -> list[str]:
    """Per row: why its PCR/PLC is empty, and the PCR at a score threshold when one was asked."""
    out = []
    for e in entries:
        label = e.label.replace("|", "\\|")
        reason = e.metrics.get("pcr_null_reason")
        if e.number("pcr50") is None and isinstance(reason, str):
            out.append(f"{label}: PCR/PLC not computed: {reason}.")
        settings = e.info.get("settings")
        policy = settings.get("prompt_policy") if isinstance(settings, dict) else None
        if isinstance(policy, dict) and e.number(POLICY_COLUMN) is not None:
            out.append(f"{label}: m_policy under prompt policy {policy.get('name')} "
                       f"(gives {'+'.join(policy.get('gives') or [])}).")
        threshold = e.metrics.get("pcr_score_threshold")
        if isinstance(threshold, (int, float)) and e.number("pcr50_at") is not None:
            plc = format_number("plc", e.number("plc_at")) or "-"
            out.append(
                f"{label}: at score >= {threshold:g}, pcr50 {format_number('pcr50', e.number('pcr50_at'))}, "
                f"plc {plc}."
            )
    return out
