"""A metrics.json as printed: ``probench score``'s summary table, the PCR/PLC lines that
``probench eval`` prints too, and the degenerate-box warnings."""

from __future__ import annotations

from probench.cache.records import MetricsRecord
from probench.scoring.temporal import temporal_lines


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def best_text(m: MetricsRecord) -> str:
    """k* as printed: the formulation, "tie" when every formulation has the same mAP.5."""
    from probench.scoring.suite import best_formulation_text

    return _fmt(best_formulation_text(m))


def summary_table(m: MetricsRecord) -> str:
    rows = ["formulation  mAP.5   mAP.75  mAP.5:.95"]
    for f, s in m.by_formulation.items():
        rows.append(f"{f:<12} {_fmt(s.map50):<7} {_fmt(s.map75):<7} {_fmt(s.map50_95)}")
    rows.append(
        f"delta_orig_cat {_fmt(m.delta_orig_cat)}  delta_tmpl_orig {_fmt(m.delta_tmpl_orig)}  "
        f"delta_max {_fmt(m.delta_max)}  best {best_text(m)}"
    )
    if "delta_policy_orig" in m.model_fields_set:
        rows.append(f"delta_policy_orig {_fmt(m.delta_policy_orig)}  (prompt policy vs as typed)")
    rows += pcr_lines(m)
    rows += temporal_lines(m.temporal)  # a sequence dataset's run only
    if m.formulations_missing:
        rows.append(f"missing formulations: {', '.join(m.formulations_missing)}")
    if m.latency_ms is not None:
        rows.append(f"latency ms: mean {_fmt(m.latency_ms.mean)}  p95 {_fmt(m.latency_ms.p95)}")
    rows += operating_lines(m)
    rows += interval_lines(m)
    return "\n".join(rows)


def operating_lines(m: MetricsRecord) -> list[str]:
    """The best-F1 operating point per formulation (metrics.json ``curves``)."""
    by = m.curves.by_formulation if m.curves is not None else {}
    parts = [f"{f} {c.best_f1_threshold:.2f} (F1 {c.best_f1:.3f})" for f, c in by.items()
             if c.best_f1_threshold is not None and c.best_f1 is not None]  # fmt: skip
    if not parts:
        return []
    return [f"operating point (best F1, IoU .5, queries pooled): score_threshold {', '.join(parts)}"]


def _iv(v: list[float] | None) -> str:
    return f"[{v[0]:.3f}, {v[1]:.3f}]" if v is not None else "-"


def interval_lines(m: MetricsRecord) -> list[str]:
    """The bootstrap's 95% intervals (metrics.json ``intervals``), when there are any."""
    iv = m.intervals
    if iv is None:
        return []
    rows = [f"95% intervals ({iv.resamples} paired bootstrap resamples over images, seed {iv.seed}):"]
    for f, s in iv.by_formulation.items():
        rows.append(f"  {f:<10} mAP.5 {_iv(s.get('map50'))}  mAP.75 {_iv(s.get('map75'))}  "
                    f"mAP.5:.95 {_iv(s.get('map50_95'))}")
    rows.append(f"  delta_orig_cat {_iv(iv.delta_orig_cat)}  "
                f"delta_tmpl_orig {_iv(iv.delta_tmpl_orig)}  delta_max {_iv(iv.delta_max)}  "
                f"PCR@.5 {_iv(iv.pcr50)}  PLC {_iv(iv.plc)}")
    support = iv.best_formulation_support
    if support is not None:
        rows.append(f"  k* {best_text(m)} is best in {support:.1%} of the resamples"
                    + ("" if support >= 0.95 else " (not significant: below 95%)"))
    return rows


def pcr_lines(m: MetricsRecord) -> list[str]:
    """PCR@.5 and PLC as printed: any-of-100 (the paper's), top-1 (a robot's operating
    point), at the score threshold when one was given, and why they are null when they are."""
    at = m.pcr_score_threshold if "pcr50_at" in m.model_fields_set else None
    rows = [
        f"PCR@.5 any-of-100 {_fmt(m.pcr50)}  top-1 {_fmt(m.pcr50_top1)}"
        + (f"  score>={at:g} {_fmt(m.pcr50_at)}" if at is not None else "")
        + f"  (targets {m.n_targets}, single-formulation {m.pcr_single_formulation_targets})",
        f"PLC    any-of-100 {_fmt(m.plc)}  top-1 {_fmt(m.plc_top1)}"
        + (f"  score>={at:g} {_fmt(m.plc_at)}" if at is not None else ""),
    ]
    if m.pcr_null_reason:
        rows.append(f"PCR/PLC null: {m.pcr_null_reason}")
    return rows


def degenerate_lines(m: MetricsRecord) -> list[str]:
    """One stderr line per formulation with boxes of width or height <= 0."""
    lines = []
    for f, s in m.by_formulation.items():
        n, ignored = s.n_degenerate_boxes, s.n_degenerate_ignored
        if n:
            lines.append(
                f"probench score: {f}: {n} of {s.n_predictions} predictions have a width or height <= 0 "
                f"(they never match; {ignored} with a negative area are ignored, the rest are false "
                "positives, as in pycocotools)"
            )
    return lines
