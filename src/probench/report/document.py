"""``report.md``: one file that embeds Table II, the figures and what each row is."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

from probench import __version__
from probench.cache.records import METRICS_FILE, TIDE_ERROR_TYPES, AbsenceScores, GroupScores, TideScores
from probench.report.load import Entry
from probench.report.table import format_number, md_text
from probench.vocabulary import PROMPT_TYPES

GROUP_ORDER: dict[str, tuple[str, ...]] = {
    "by_prompt_type": PROMPT_TYPES,
    "by_domain": ("subterranean", "industrial", "indoor", "outdoor", "urban"),
    "by_size": ("small", "medium", "large"),
}
FIGURE_CAPTIONS: dict[str, str] = {
    "fig3": "Fig. 3 - mAP (orig formulation) versus IoU threshold, 0.1 to 0.95.",
    "fig4": "Fig. 4 - prompt-induced variation: Δmax at each IoU threshold "
            "(max - min over the formulations of AP at that threshold).",
    "fig5": "Fig. 5 - accuracy-latency trade-off: x end-to-end latency (ms, log scale), y mAP.5; "
            "vertical connectors go down to mAP.5:.95, horizontal bars are the latency std, dotted "
            "lines join scale variants, the shaded region is 0-33.3 ms (30 Hz). Paper rows were "
            "measured on an RTX 4090; your rows on the device named in the runs table. Diamonds: the "
            "end-to-end latency `probench eval` measured through ROS 2 at camera rate (labelled so), "
            "beside the offline protocol's point; hollow grey: random weights (a pipeline test), "
            "never on the Pareto frontier, which is drawn over the offline protocol's points.",
    "pr": "Precision-recall - per formulation, every query pooled, IoU 0.5: each point one score "
          "threshold (0 to 1, step 0.01) (docs/METRICS.md, Curves).",
    "f1": "F1 versus confidence - F1 at each score threshold per formulation (queries pooled, IoU 0.5); "
          "the dot and its label: the threshold of the best F1, the operating point to give the grounding "
          "node as score_threshold.",
    "prompt_types": "Prompt types - mAP.5 (orig) per prompt type, a bar per run; n on each tick: the "
                    "queries of the type (a query can carry several types, so the n add up to more than "
                    "the queries).",
    "fig6": "Fig. 6 - qualitative grounding: rows are scenes (one per domain, then one per prompt type not "
            "covered yet, or --scenes), columns runs; in each cell the ground truth of every target query "
            "(dashed) and the run's top-confidence prediction per target prompt, labelled with the prompt "
            "text and its score.",
    "fig_absence": "Absent targets - per run (colour) and formulation (marker): the share of negative pairs "
               "(the query has no target in the image) with a box at the operating threshold (hallucination "
               "rate, x) against the share of positive pairs with one (presence TPR, y); the dashed diagonal "
               "is chance (MCC 0) (docs/METRICS.md, Absence).",
    "timeline": "Latency timeline - the latency of every replayed frame over time (one panel per "
                "formulation and run; hollow: warm-up frames, red crosses along the top: missed "
                "frames, dashed: the real-time budget).",
}  # fmt: skip


GALLERY_CAPTION = (
    "Per run, the (image, query) pairs whose top-confidence prediction fails, most confident first, "
    "as crops (dashed green: the target, red: the prediction): missed (no prediction for the query in "
    "the image), mislocalised (IoU < 0.5 with every target of the query), wrong target (IoU >= 0.5 "
    "with another query's target) and, for runs replayed through ROS 2, dropped (the node never answered "
    "the frame: not the model's miss)."
)


def _md(text: object) -> str:  # a string from a file: inert in Markdown and HTML
    return md_text(text)


def _runs_table(runs: list[Entry]) -> list[str]:
    lines = [
        "| row | run folder | source | device | dataset | formulations | metrics |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in runs:
        info = e.info
        ds = info.dataset
        ds_text = str(ds.path or (f"bag {ds.bag}" if ds.bag else "?"))  # a bag run: its bag
        if ds.n_images is not None:
            ds_text += f" ({ds.n_images} images, {'?' if ds.n_queries is None else ds.n_queries} queries)"
        forms = e.metrics.formulations or info.formulations
        source = f"scored now (no {METRICS_FILE})" if e.scored_now else METRICS_FILE
        lines.append(
            "| " + " | ".join(_md(x) for x in (
                e.label, e.path, info.source or "?", info.device or "?", ds_text, ", ".join(forms), source,
            )) + " |"
        )  # fmt: skip
    return lines


def _groups(e: Entry, key: str) -> dict[str, GroupScores]:
    """One breakdown of a run's metrics (``by_prompt_type``, ``by_domain``, ``by_size``)."""
    by: dict[str, GroupScores] = getattr(e.metrics, key)
    return by


def _breakdown(runs: list[Entry], key: str, title: str) -> list[str]:
    """mAP.5 per group (prompt type, domain, size) with rows = groups, columns = runs."""
    groups: list[str] = []
    for e in runs:
        groups += [g for g in _groups(e, key) if g not in groups]
    canonical = GROUP_ORDER.get(key, ())  # the paper's order where there is one
    groups.sort(key=lambda g: (canonical.index(g) if g in canonical else len(canonical), g))
    if not groups:
        return []
    lines = [f"### mAP.5 by {title} (orig formulation)", ""]
    lines.append("| " + " | ".join([title, *(_md(e.label) for e in runs)]) + " |")
    lines.append("|" + "|".join(["---"] + [":-:"] * len(runs)) + "|")
    for g in groups:
        cells = [_md(g)]
        for e in runs:
            rec = _groups(e, key).get(g)
            text = format_number("map50", None if rec is None else rec.map50) or "-"
            cells.append(f"{text} (n={rec.n_queries})" if rec is not None else text)
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, "", _breakdown_n(runs, key), ""]


_N_MEANS = {
    "by_prompt_type": ("queries of the prompt type with ground truth",
                       "a query can carry several prompt types"),
    "by_domain": ("queries with ground truth in the domain's images",
                  "a query with targets in several domains counts in each"),
    "by_size": ("queries with ground truth of that size",
                "a query with targets of several sizes counts in each"),
}  # fmt: skip


def _breakdown_n(runs: list[Entry], key: str) -> str:
    """What a breakdown's n counts, and why the n can add up to more than the queries."""
    means, why = _N_MEANS.get(key, ("queries in the group", "a query can be in several groups"))
    sums = []
    for e in runs:
        total = e.metrics.n_queries_with_gt
        n_sum = sum(r.n_queries for r in _groups(e, key).values())
        if n_sum > total:
            sums.append(f"{_md(e.label)}: {n_sum} over {total} queries")
    tail = f" (here {'; '.join(sums)})" if sums else ""
    return f"n: {means}; {why}, so the n can add up to more than the queries with ground truth{tail}."


def _realtime(runs: list[Entry]) -> list[str]:
    failures: list[str] = []
    rows = [(e, e.metrics.realtime) for e in runs if e.metrics.realtime is not None]
    if not rows:
        return []
    lines = [
        "## Real-time (ROS graph)", "",
        "| row | rate (Hz) | frames sent | received | missed | within budget | p50 (ms) | p95 (ms) "
        "| sent at (Hz) | delivered (Hz) | output jitter p95 (ms) | cold start (ms) | warm-up frames |",
        "|---|:-:|:-:|:-:|:-:|:-:|:-:|:-:|:-:|:-:|:-:|:-:|:-:|",
    ]  # fmt: skip
    for e, rt in rows:
        within = rt.within_budget
        lines.append("| " + " | ".join(_md(x) for x in (
            e.label, "" if rt.rate_hz is None else rt.rate_hz, rt.frames_sent, rt.frames_received,
            rt.frames_missed, f"{within:.1%}" if within is not None else "",
            _fmt(rt.latency_ms.p50), _fmt(rt.latency_ms.p95), _fmt(rt.achieved_send_rate_hz),
            _fmt(rt.delivered_rate_hz), _fmt(rt.output_jitter_ms.p95), _fmt(rt.cold_start_ms),
            "" if rt.warmup is None else rt.warmup.frames,
        )) + " |")  # fmt: skip
        if rt.frames_failed:
            failures.append(f"{_md(e.label)}: {rt.frames_failed} frame(s) failed in the model (counted apart "
                            f"from the missed ones), the first with {_md(rt.first_error)}")
    if failures:  # frames whose model call raised: the run is not complete
        lines += ["", *(f"- {f}." for f in failures)]
    lines += ["", "Warm-up frames (sent one at a time before each session's first measured stream) are "
              "scored nowhere and counted apart; the delivered rate is answered / sent x send rate. "
              "Definitions: docs/EVALUATION.md."]  # fmt: skip
    return [*lines, ""]


def _latency(runs: list[Entry]) -> list[str]:
    """How each row's latency was measured (latency.json): protocol and isolation."""
    rows = [(e, e.latency) for e in runs if e.latency is not None and e.latency.to_json()]
    if not rows:
        return []
    lines = [
        "## How latency was measured", "",
        "The paper's protocol (`probench latency`): end-to-end time of one image with its label "
        "space's prompts, decoding excluded, warm-up inferences excluded.", "",
        "| row | device | images x runs (+ warm-up) | CUDA-synchronised | alone on the device? |",
        "|---|---|:-:|:-:|---|",
    ]  # fmt: skip
    for e, lat in rows:
        p = lat.protocol
        how = (lat.isolation.how if lat.isolation
               else "not recorded (measured by `probench latency`: keep the device idle)")
        lines.append("| " + " | ".join(_md(x) for x in (
            e.label, lat.device or "?", f"{_or_q(p.n_images)} x {_or_q(p.runs)} (+ {_or_q(p.warmup)})",
            "yes" if p.cuda_synchronized else "no", how,
        )) + " |")  # fmt: skip
    return [*lines, ""]


ERROR_TYPES = TIDE_ERROR_TYPES
ERROR_NAMES = {"cls": "wrong query", "loc": "mislocalised", "both": "wrong query and mislocalised",
               "dupe": "duplicates", "bkg": "background", "missed": "missed targets"}  # fmt: skip


def _errors(runs: list[Entry]) -> list[str]:
    """The TIDE table (metrics.json ``errors``): per run and formulation, the mAP.5 each
    error type costs (its count in brackets), and what each reformulation changes."""
    rows = [(e, e.metrics.errors.by_formulation) for e in runs if e.metrics.errors is not None]
    rows = [(e, by) for e, by in rows if by]
    if not rows:
        return []
    lines = [
        "## Error analysis (TIDE)", "",
        "What each error type costs: the mAP.5 gained if exactly those errors were fixed (TIDE's "
        "oracles; the count of errors in brackets). cls: a prediction on another query's target "
        "(IoU >= 0.5); loc: the right query, 0.1 <= IoU < 0.5; both: wrong query and 0.1 <= IoU < 0.5; "
        "dupe: a second prediction on a target already taken; bkg: IoU < 0.1 with every target; "
        "missed: a target nothing recovers. Only predictions inside an image's label space are "
        "counted. Definitions: docs/METRICS.md.", "",
        "| row | formulation | mAP.5 | " + " | ".join(ERROR_TYPES) + " |",
        "|---|---|:-:|" + ":-:|" * len(ERROR_TYPES),
    ]  # fmt: skip
    changes: list[str] = []
    for e, by in rows:
        for f, rec in by.items():
            delta = rec.delta_ap or {}
            cells = [f"{_fmt3(delta.get(t))} ({rec.counts.get(t, '-')})" for t in ERROR_TYPES]
            lines.append("| " + " | ".join([_md(e.label), _md(f), _fmt3(rec.ap50), *cells]) + " |")
        changes += _error_changes(e, by)
    lines.append("")
    if changes:
        lines += ["What a reformulation changes (against orig, the largest change of each sign):", "",
                  *(f"- {c}" for c in changes), ""]  # fmt: skip
    return lines


def _operating_points(runs: list[Entry]) -> list[str]:
    """Per run and formulation, the score threshold of the best F1 (metrics.json ``curves``):
    what to give the grounding node as ``score_threshold``."""
    lines = []
    for e in runs:
        by = e.metrics.curves.by_formulation if e.metrics.curves is not None else {}
        for f, c in by.items():
            t, f1 = c.best_f1_threshold, c.best_f1
            if t is not None and f1 is not None:
                lines.append(f"| {_md(e.label)} | {_md(f)} | {t:.2f} | {f1:.3f} |")
    if not lines:
        return []
    return ["## Operating points", "",
            "The score threshold of the best F1 per run and formulation (IoU 0.5, every query pooled; "
            "`fig_f1_confidence.png`): the `score_threshold` to give the grounding node for that model.", "",
            "| row | formulation | score_threshold | F1 |", "|---|---|:-:|:-:|", *lines, ""]  # fmt: skip


def absence_table(runs: list[Entry]) -> list[str]:
    """Per run, formulation and prompt type: presence TPR, hallucination rate, MCC, positive F1
    and cgF1 at the operating threshold (metrics.json ``absence``; docs/METRICS.md, Absence)."""
    lines = []
    thresholds = set()
    for e in runs:
        ab = e.metrics.absence
        if ab is None:
            continue
        thresholds.add(f"{ab.score_threshold:g} ({ab.threshold_source})")
        for f, rec in ab.by_formulation.items():
            groups: list[tuple[str, AbsenceScores]] = [("all", rec), *rec.by_prompt_type.items()]
            for group, s in groups:
                cells = [_fmt3(s.presence_tpr), _fmt3(s.hallucination_rate), _fmt3(s.presence_mcc),
                         _fmt3(s.positive_f1), _fmt3(s.cgf1)]  # fmt: skip
                pairs = f"{s.n_positive_pairs}/{s.n_negative_pairs}"
                lines.append("| " + " | ".join([_md(e.label), _md(f), _md(group), pairs, *cells]) + " |")
    if not lines:
        return []
    return ["## Absent targets", "",
            "Does the model answer a target that is not there? Over the label-space pairs (image, query): "
            "positive when the query has a target in the image, negative when not; the model says present "
            "when it keeps a box scoring at least the threshold "
            f"({'; '.join(sorted(thresholds))}). cgF1 = positive F1 x MCC (SAM 3's SA-Co); "
            "'-': undefined (no negative or no positive pair). Definitions: docs/METRICS.md, Absence.", "",
            "| row | formulation | prompt type | pairs +/- | presence TPR | hallucination rate | MCC | "
            "positive F1 | cgF1 |", "|---|---|---|:-:|:-:|:-:|:-:|:-:|:-:|", *lines, ""]  # fmt: skip


def _delta_ap(by: Mapping[str, TideScores], f: str) -> dict[str, float | None]:
    rec = by.get(f)
    return (rec.delta_ap or {}) if rec is not None else {}


def _error_changes(e: Entry, by: Mapping[str, TideScores]) -> list[str]:
    base = _delta_ap(by, "orig")
    out = []
    for f in ("cat", "tmpl", "policy"):
        other = _delta_ap(by, f)
        diffs = {t: o - b for t in ERROR_TYPES
                 if (b := base.get(t)) is not None and (o := other.get(t)) is not None}
        if not diffs:
            continue
        parts = []
        fixed = min(diffs, key=lambda t: diffs[t])
        if diffs[fixed] < -0.005:
            parts.append(f"recovers {ERROR_NAMES[fixed]} (their cost {_fmt3(base.get(fixed))} -> "
                         f"{_fmt3(other.get(fixed))})")
        added = max(diffs, key=lambda t: diffs[t])
        if diffs[added] > 0.005:
            parts.append(f"adds {ERROR_NAMES[added]} ({_fmt3(base.get(added))} -> {_fmt3(other.get(added))})")
        said = "; ".join(parts) if parts else "changes no error type's cost by more than 0.005"
        out.append(f"{_md(e.label)}: {f} {said}")
    return out


def _fmt3(v: object) -> str:
    return f"{v:.3f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _or_q(v: object) -> str:
    return "?" if v is None else str(v)


def _fmt(v: object) -> str:
    return f"{v:.1f}" if isinstance(v, (int, float)) else ""


def _warnings(runs: list[Entry]) -> list[str]:
    out = []
    hashes = {h for e in runs if (h := e.dataset_hash())}
    if len(hashes) > 1:
        out.append("The runs were scored on **different datasets** (their dataset hashes differ): "
                   "their rows are not comparable.")
    stale = [e.label for e in runs if e.metrics.dataset_hash_matches is False]
    if stale:
        out.append("Scored against a dataset that differs from the one inferred on: "
                   + ", ".join(map(_md, stale)))
    if any(e.info.model.random_weights is True for e in runs):
        out.append("Rows marked *(random weights)* come from models with random weights: they test the "
                   "pipeline and say nothing about the model's accuracy.")
    return out


def render(entries: list[Entry], table_md: str, figures: dict[str, str | None], notes: list[str],
           galleries: list[tuple[str, str]] | None = None) -> str:
    """The report as Markdown; ``figures`` maps fig3/fig4/fig5... to a PNG file name or None;
    ``galleries``: (run label, PNG) of each run's failure gallery."""
    runs = [e for e in entries if not e.reference]
    refs = [e for e in entries if e.reference]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    refs_text = f" and {len(refs)} published reference row(s) marked *(paper)*." if refs else "."
    head = f"Generated {stamp} by probench {__version__}: {len(runs)} run(s){refs_text}"
    out = ["# probench report", "", head, ""]
    for w in _warnings(runs):
        out += [f"> {w}", ""]
    if runs:
        out += ["## Runs", "", *_runs_table(runs), ""]
    out += ["## Table II", "", table_md.rstrip("\n"), "",
            "Also as [`table2.csv`](table2.csv) and [`table2.md`](table2.md).", ""]  # fmt: skip
    out += ["## Figures", ""]
    for key, caption in FIGURE_CAPTIONS.items():
        if key not in figures:  # not asked for (the timeline: no run came through ROS)
            continue
        name = figures.get(key)
        if name:
            out += [f"![{caption}]({name})", "", f"*{caption}*", ""]
        else:
            out += [f"*{caption.split(' - ')[0]}: not drawn (no row has the data it needs).*", ""]
    if galleries:
        out += ["### Failure galleries", "", GALLERY_CAPTION, ""]
        for label, name in galleries:
            out += [f"![failures of {_md(label)}]({name})", "", f"*{_md(label)}*", ""]
    if notes:
        out += ["Rows left out of a figure:", "", *(f"- {_md(n)}" for n in notes), ""]
    breakdown = []
    for key, title in (("by_prompt_type", "prompt type"), ("by_domain", "domain"), ("by_size", "size")):
        breakdown += _breakdown(runs, key, title)
    if breakdown:
        out += ["## Breakdowns", "", *breakdown]
    out += _operating_points(runs)
    out += absence_table(runs)
    out += _errors(runs)
    out += _latency(runs)
    out += _realtime(runs)
    return "\n".join(out).rstrip("\n") + "\n"
