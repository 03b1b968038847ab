"""Table II: the paper's columns, as CSV (data) and Markdown (top five marked per column).

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

LOWER_IS_BETTER: frozenset[str] = frozenset({"latency_ms", "delta_max"})
TOP_K = 5
_SUPERSCRIPT = {2: "²", 3: "³", 4: "⁴", 5: "⁵"}


def sort_entries(entries: list[Entry]) -> list[Entry]:
    """By mAP.5 descending; rows without one go last; ties keep a stable, readable order."""

    def key(e: Entry) -> tuple:
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
        return entry.text(column) or ""
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


def to_markdown(entries: list[Entry]) -> str:
    """Table II as a Markdown table plus a one-paragraph legend."""
    rows = sort_entries(entries)
    rank_by_col = {c: ranks(rows, c) for c in NUMERIC}
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] + [":-:"] * (len(COLUMNS) - 1)) + "|"]
    for i, e in enumerate(rows):
        cells = []
        for c in COLUMNS:
            text = cell(e, c)
            if c in rank_by_col:
                text = mark(text, rank_by_col[c][i])
            cells.append(text.replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    legend = (
        "Sorted by map50 (mAP.5 under the orig formulation). Top five per column: **bold** = best, "
        "² ³ ⁴ ⁵ = 2nd-5th (ties share a rank); lower is better for latency_ms (mean, ms) and "
        "delta_max, higher for the rest. m_cat / m_tmpl: mAP.5 under the cat / tmpl formulations; "
        "best_formulation: the formulation with the highest mAP.5; pcr50: prompt-consistent recall "
        "at IoU 0.5; plc: prompt localisation consistency. Empty cell: not measured."
    )
    return "\n".join(lines) + "\n\n" + legend + "\n"
