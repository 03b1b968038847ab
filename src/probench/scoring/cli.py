"""``probench score --dataset D --run RUN [--out F] [--pcr-score-threshold T]
[--allow-dataset-mismatch] [--allow-unknown]``: the full metric suite of a run.

Reads annotations only (no image files), writes RUN/metrics.json (or ``--out``) atomically
and prints a short summary table. A dataset whose content hash differs from the one in
run.json is refused unless ``--allow-dataset-mismatch``, predictions for images or queries
the dataset lacks unless ``--allow-unknown``; predictions with a width or height
<= 0 are counted and said on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probench.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="dataset folder (annotations.json is enough)")
    parser.add_argument("--run", required=True, help="run folder with predictions/<formulation>.json")
    parser.add_argument("--out", help="metrics file to write (default: RUN/metrics.json)")
    parser.add_argument(
        "--pcr-score-threshold", type=_threshold, metavar="T",
        help="also report pcr50_at / plc_at: a target is recovered only by a prediction scoring >= T (0-1)",
    )  # fmt: skip
    parser.add_argument(
        "--allow-dataset-mismatch", action="store_true",
        help="score even if the dataset's content hash differs from run.json's (recorded in metrics.json)",
    )  # fmt: skip
    parser.add_argument(
        "--allow-unknown", action="store_true",
        help="score even if predictions name images or queries the dataset does not have (they never "
        "match; counted in n_unknown_predictions)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="do not print the summary table")


def _threshold(text: str) -> float:
    from probench.scoring.errors import ScoringUsageError
    from probench.scoring.suite import check_score_threshold

    try:
        value = float(text)
        check_score_threshold(value)  # NaN fails too
    except (ValueError, ScoringUsageError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a score in [0, 1]") from exc
    return value


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def best_text(m: Mapping[str, Any]) -> str:
    """k* as printed: the formulation, "tie" when every formulation has the same mAP.5."""
    from probench.scoring.suite import best_formulation_text

    return _fmt(best_formulation_text(m))


def summary_table(m: Mapping[str, Any]) -> str:
    rows = ["formulation  mAP.5   mAP.75  mAP.5:.95"]
    for f, s in m["by_formulation"].items():
        rows.append(f"{f:<12} {_fmt(s['map50']):<7} {_fmt(s['map75']):<7} {_fmt(s['map50_95'])}")
    rows.append(
        f"delta_orig_cat {_fmt(m['delta_orig_cat'])}  delta_tmpl_orig {_fmt(m['delta_tmpl_orig'])}  "
        f"delta_max {_fmt(m['delta_max'])}  best {best_text(m)}"
    )
    rows += pcr_lines(m)
    if m["formulations_missing"]:
        rows.append(f"missing formulations: {', '.join(m['formulations_missing'])}")
    if "latency_ms" in m:
        lat = m["latency_ms"]
        rows.append(f"latency ms: mean {_fmt(lat.get('mean'))}  p95 {_fmt(lat.get('p95'))}")
    return "\n".join(rows)


def pcr_lines(m: Mapping[str, Any]) -> list[str]:
    """PCR@.5 and PLC as printed: any-of-100 (the paper's), top-1 (a robot's operating
    point), at the score threshold when one was given, and why they are null when they are."""
    rows = [
        f"PCR@.5 any-of-100 {_fmt(m.get('pcr50'))}  top-1 {_fmt(m.get('pcr50_top1'))}"
        + (f"  score>={m['pcr_score_threshold']:g} {_fmt(m['pcr50_at'])}" if "pcr50_at" in m else "")
        + f"  (targets {m.get('n_targets', '-')}, "
          f"single-formulation {m.get('pcr_single_formulation_targets', '-')})",
        f"PLC    any-of-100 {_fmt(m.get('plc'))}  top-1 {_fmt(m.get('plc_top1'))}"
        + (f"  score>={m['pcr_score_threshold']:g} {_fmt(m['plc_at'])}" if "plc_at" in m else ""),
    ]
    if m.get("pcr_null_reason"):
        rows.append(f"PCR/PLC null: {m['pcr_null_reason']}")
    return rows


def degenerate_lines(m: Mapping[str, Any]) -> list[str]:
    """One stderr line per formulation with boxes of width or height <= 0."""
    lines = []
    for f, s in m["by_formulation"].items():
        n, ignored = s.get("n_degenerate_boxes", 0), s.get("n_degenerate_ignored", 0)
        if n:
            lines.append(
                f"probench score: {f}: {n} of {s['n_predictions']} predictions have a width or height <= 0 "
                f"(they never match; {ignored} with a negative area are ignored, the rest are false "
                "positives, as in pycocotools)"
            )
    return lines


def run(args: argparse.Namespace) -> int:
    from probench.cache.atomic import write_json_atomic
    from probench.data.dataset import load_dataset
    from probench.scoring.suite import score_run

    ds_path, run_path = Path(args.dataset), Path(args.run)
    if not ds_path.exists():
        raise UsageError(f"{ds_path}: no such dataset folder")
    if not run_path.is_dir():
        raise UsageError(f"{run_path}: no such run folder")
    ds = load_dataset(ds_path, check_files=False)
    metrics = score_run(
        ds, run_path, pcr_score_threshold=args.pcr_score_threshold,
        dataset_check="allow" if args.allow_dataset_mismatch else "refuse", progress=not args.quiet,
        allow_unknown=args.allow_unknown,
    )  # fmt: skip
    if metrics.get("n_unknown_predictions"):
        print(f"probench score: warning: {metrics['n_unknown_predictions']} prediction(s) name images or "
              "queries the dataset does not have; scored anyway as --allow-unknown asks (they never match)",
              file=sys.stderr)
    if metrics.get("dataset_hash_matches") is False:
        print(
            "probench score: warning: the dataset differs from the run's (content hash); scored anyway "
            "as --allow-dataset-mismatch asks (recorded as dataset_mismatch_allowed)",
            file=sys.stderr,
        )
    for line in degenerate_lines(metrics):
        print(line, file=sys.stderr)
    out = Path(args.out) if args.out else run_path / "metrics.json"
    try:
        write_json_atomic(out, metrics)
    except OSError as exc:
        raise UsageError(f"{out}: cannot write metrics: {exc}") from exc
    if not args.quiet:
        print(summary_table(metrics))
    print(f"wrote {out}", file=sys.stderr)
    return 0
