"""``probench score --dataset D --run RUN [--out F] [--pcr-score-threshold T]
[--allow-dataset-mismatch] [--allow-unknown] [--bootstrap N]``: the full metric suite of a run,
with paired bootstrap confidence intervals (``intervals``, scoring/bootstrap.py).

Reads annotations only (no image files), writes RUN/metrics.json (or ``--out``) atomically
and prints a short summary table. A dataset whose content hash differs from the one in
run.json is refused unless ``--allow-dataset-mismatch``, predictions for images or queries
the dataset lacks unless ``--allow-unknown``; predictions with a width or height
<= 0 are counted and said on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from probench.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="dataset folder (annotations.json is enough)")
    parser.add_argument("--run", required=True, help="run folder with predictions/<formulation>.json")
    parser.add_argument("--out", help="metrics file to write (default: RUN/metrics.json); never inside a run "
                        "folder but as RUN/metrics.json")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --out file (RUN/metrics.json is always rewritten)")
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
    parser.add_argument(
        "--bootstrap", type=resamples, default=1000, metavar="N",
        help="paired bootstrap resamples over images for the confidence intervals (default 1000; 0: none)",
    )  # fmt: skip
    parser.add_argument("--bootstrap-seed", type=int, default=0, metavar="S",
                        help="the bootstrap's seed (default 0)")
    parser.add_argument("--no-errors", action="store_true",
                        help="skip the TIDE error analysis (metrics.json `errors`)")
    parser.add_argument("--quiet", action="store_true", help="do not print the summary table")


def resamples(text: str) -> int:
    """A ``--bootstrap`` value: a whole number of resamples, 0 (off) to 100000."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of resamples") from exc
    if not 0 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"{value} resamples is outside 0-100000 (0 turns the bootstrap off)")
    return value


def _threshold(text: str) -> float:
    from probench.scoring.errors import ScoringUsageError
    from probench.scoring.suite import check_score_threshold

    try:
        value = float(text)
        check_score_threshold(value)  # NaN fails too
    except (ValueError, ScoringUsageError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a score in [0, 1]") from exc
    return value


def _metrics_path(out: str | None, run_path: Path, overwrite: bool) -> Path | None:
    """``--out`` checked under the writer rule (:mod:`probench.cache.output`), or None for the
    run's own RUN/metrics.json (the default, and an ``--out`` naming that same file)."""
    from probench.cache.output import check_output_file
    from probench.cache.records import METRICS_FILE

    own = run_path.resolve() / METRICS_FILE
    if out is None or Path(out).absolute().parent.resolve() / Path(out).name == own:
        return None
    return check_output_file(out, overwrite=overwrite)


def run(args: argparse.Namespace) -> int:
    from probench.cache.atomic import write_json_atomic
    from probench.cache.output import write_output_json
    from probench.cache.records import METRICS_FILE
    from probench.data.dataset import load_dataset
    from probench.scoring.printed import degenerate_lines, summary_table
    from probench.scoring.suite import score_run

    ds_path, run_path = Path(args.dataset), Path(args.run)
    if not ds_path.exists():
        raise UsageError(f"{ds_path}: no such dataset folder")
    if not run_path.is_dir():
        raise UsageError(f"{run_path}: no such run folder")
    out = _metrics_path(args.out, run_path, args.overwrite)  # before the work: the writer rule
    ds = load_dataset(ds_path, check_files=False)
    metrics = score_run(
        ds, run_path, pcr_score_threshold=args.pcr_score_threshold,
        dataset_check="allow" if args.allow_dataset_mismatch else "refuse", progress=not args.quiet,
        allow_unknown=args.allow_unknown, bootstrap=args.bootstrap, bootstrap_seed=args.bootstrap_seed,
        errors=not args.no_errors,
    )  # fmt: skip
    if metrics.n_unknown_predictions:
        print(f"probench score: warning: {metrics.n_unknown_predictions} prediction(s) name images or "
              "queries the dataset does not have; scored anyway as --allow-unknown asks (they never match)",
              file=sys.stderr)
    if metrics.dataset_hash_matches is False:
        print(
            "probench score: warning: the dataset differs from the run's (content hash); scored anyway "
            "as --allow-dataset-mismatch asks (recorded as dataset_mismatch_allowed)",
            file=sys.stderr,
        )
    for line in degenerate_lines(metrics):
        print(line, file=sys.stderr)
    try:
        if out is None:  # the run's own file, rewritten by each scoring
            out = run_path / METRICS_FILE
            write_json_atomic(out, metrics.to_json())
        else:
            write_output_json(out, metrics.to_json(), overwrite=args.overwrite)
    except OSError as exc:
        raise UsageError(f"{out}: cannot write metrics: {exc}") from exc
    if not args.quiet:
        print(summary_table(metrics))
    print(f"wrote {out}", file=sys.stderr)
    return 0
