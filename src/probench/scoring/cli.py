"""``probench score --dataset D --run RUN [--out F] [--pcr-score-threshold T]
[--allow-dataset-mismatch]``: the full metric suite of a run.

Reads annotations only (no image files), writes RUN/metrics.json (or ``--out``) atomically
and prints a short summary table. A dataset whose content hash differs from the one in
run.json is refused unless ``--allow-dataset-mismatch``; predictions with a width or height
<= 0 are counted and said on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from probench.errors import UsageError
from probench.scoring.printed import degenerate_lines, summary_table


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
    )  # fmt: skip
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
