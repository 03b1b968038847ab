"""``probench latency``: the paper's latency protocol (§IV-B) into ``RUN/latency.json``.

Defaults are the paper's: 50 images, 3 warm-up inferences excluded, 10 timed runs.
"""

from __future__ import annotations

import argparse

from probench.limits import MAX_COUNT, IntRange
from probench.models.cli_infer import add_common_model_arguments, check_paths, load_model, requested_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_model_arguments(parser)
    parser.add_argument("--images", type=IntRange(1, MAX_COUNT),
                        default=50, help="size of the fixed image subset (default 50)")
    parser.add_argument("--warmup", type=IntRange(0, MAX_COUNT),
                        default=3, help="warm-up inferences, not timed (default 3)")
    parser.add_argument("--runs", type=IntRange(1, MAX_COUNT),
                        default=10, help="timed passes over the subset (default 10)")


def run(args: argparse.Namespace) -> int:
    from probench.cache.identity import check_folder
    from probench.cache.records import LATENCY_FILE
    from probench.cache.run import RunDir
    from probench.data.dataset import load_dataset
    from probench.models.latency import format_summary, latency_identity, run_latency
    from probench.models.threads import applied_threads

    out = check_paths(args)
    dataset = load_dataset(args.dataset)
    if not args.overwrite:  # refused before a slow model load, naming the field
        check_folder(out, latency_identity(requested_model(args), dataset, device=args.device,
                                           precision=args.precision), shared_only=True)
    detector, _load_s = load_model(args)
    result = run_latency(
        detector, dataset, RunDir(out), n_images=args.images, warmup=args.warmup, runs=args.runs,
        device=args.device, precision=args.precision, overwrite=args.overwrite,
        progress=args.progress, cpu_threads=applied_threads(),
    )
    print(format_summary(result))
    print(f"wrote {out / LATENCY_FILE}")
    return 0
