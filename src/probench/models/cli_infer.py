"""``probench infer``: offline inference into the prediction cache (resumable).

Bad arguments exit 2 before anything heavy loads; a run folder holding another experiment
exits 1 (unless ``--overwrite``); an image that cannot be decoded stops the run with
exit 1, naming the file (never skipped: a skipped image would silently change the scores).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from probench.errors import UsageError
from probench.limits import MAX_COUNT, IntRange
from probench.models.spec import RUNTIMES
from probench.vocabulary import PREPROCESS_PATHS

if TYPE_CHECKING:
    from probench.models.base import Detector


def add_common_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model/dataset/run flags ``infer`` and ``latency`` share (``--threads`` among them)."""
    parser.add_argument("--model", required=True, help="zoo name (`probench models`), e.g. tiny-owlv2")
    parser.add_argument("--dataset", required=True, help="dataset folder (with annotations.json)")
    parser.add_argument("--out", required=True, help="run folder (created if missing)")
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1 (default cpu)")
    parser.add_argument("--precision", default="fp32", help="fp32 (default), fp16, ... as the model supports")
    parser.add_argument(
        "--weights", default=None, metavar="DIR", help="local folder with the model's weights"
    )
    parser.add_argument(
        "--runtime", default="torch", choices=RUNTIMES,
        help="inference runtime (default torch; compiled: torch.compile on a CPU, CUDA graphs on a GPU, "
        "for every model with an image head; onnxruntime on CPU and tensorrt on an NVIDIA GPU for the "
        "models whose capabilities list them; see docs/ACCELERATION.md)",
    )
    parser.add_argument(
        "--preprocess", default="device", choices=PREPROCESS_PATHS,
        help="image preprocessing: torch ops on the model's device (default) or the library's own "
        "processor (transformers / ultralytics), the reference the device path is tested against",
    )
    parser.add_argument(
        "--random-weights", action="store_true",
        help="build the real-size architecture with random weights (no checkpoint needed)",
    )
    parser.add_argument(
        "--overwrite", action="store_true",
        help="replace a run folder that holds another model/dataset/settings instead of refusing",
    )
    from probench.models.progress import add_progress_arguments
    from probench.models.threads import add_threads_argument

    add_threads_argument(parser)
    add_progress_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_model_arguments(parser)
    parser.add_argument(
        "--formulations", default="orig,cat,tmpl",
        help="comma-separated subset of orig,cat,tmpl (default all three)",
    )
    parser.add_argument(
        "--score-threshold", type=float, default=0.0,
        help="drop boxes scoring below this (default 0.0: keep what the model's post-processing keeps)",
    )
    parser.add_argument("--limit", type=IntRange(1, MAX_COUNT),
                        default=None, metavar="N", help="only the first N images by id")
    from probench.prompting.options import add_policy_arguments
    from probench.scale.options import add_ray_arguments

    add_policy_arguments(parser)  # --prompt-policy P [--profile PROFILE]: the fourth formulation `policy`
    from probench.data.negatives import add_negatives_arguments

    add_negatives_arguments(parser)  # --negatives K --negatives-seed S: absent prompts (data/negatives.py)

    add_ray_arguments(parser)  # --ray [ADDRESS], --workers N, ... (docs/SCALE.md)


def check_paths(args: argparse.Namespace) -> Path:
    """Usage errors about paths, before any model is built: also a run folder that cannot
    be created, or that another process is writing (its PID named)."""
    from probench.cache.lock import check_out_folder
    from probench.models.threads import check_threads

    check_threads(args.threads)
    dataset = Path(args.dataset)
    if not dataset.exists():
        raise UsageError(f"--dataset {dataset}: no such folder")
    out = Path(args.out)
    check_out_folder(out)
    if args.weights is not None and not Path(args.weights).exists():
        raise UsageError(f"--weights {args.weights}: no such file or folder")
    return out


def requested_model(args: argparse.Namespace) -> dict[str, object]:
    """The run's model record from the flags alone (the registry's, before any load)."""
    from probench.models.zoo import model_record

    return dict(model_record(args.model, weights=args.weights, random_weights=args.random_weights,
                             runtime=args.runtime, preprocess=args.preprocess))


def load_model(args: argparse.Namespace, score_threshold: float = 0.0) -> tuple[Detector, float]:
    """The detector the flags name, and the seconds it took to build (this process's
    ``--threads`` applied once it is built)."""
    from probench.models.threads import apply_threads
    from probench.models.zoo import load_detector

    t0 = time.perf_counter()
    detector = load_detector(
        args.model, device=args.device, precision=args.precision, score_threshold=score_threshold,
        weights=args.weights, random_weights=args.random_weights, runtime=args.runtime,
        preprocess=args.preprocess,
    )
    load_s = time.perf_counter() - t0
    apply_threads(args.threads)  # the model is built, it has not run
    return detector, load_s


def run(args: argparse.Namespace) -> int:
    from probench.cache.identity import check_folder
    from probench.data.dataset import load_dataset
    from probench.data.negatives import negatives_from_args
    from probench.models.infer import (
        check_something_to_ask,
        offline_identity,
        run_formulations,
        run_inference,
        select_images,
    )
    from probench.prompting.options import policy_from_args

    policy = policy_from_args(args, requested_model(args), "infer")
    negatives = negatives_from_args(args)
    formulations = run_formulations(args.formulations, policy)
    if not 0.0 <= args.score_threshold <= 1.0:
        raise UsageError(f"--score-threshold must lie in [0, 1], got {args.score_threshold}")
    out = check_paths(args)
    dataset = load_dataset(args.dataset)
    image_ids = select_images(dataset, args.limit)
    empty = check_something_to_ask(dataset, image_ids)  # before a slow model load
    if empty:
        print(f"probench infer: {len(empty)} of {len(image_ids)} image(s) have an empty label space (no "
              "query_ids, no annotations): recorded with no predictions", file=sys.stderr)
    if not args.overwrite:  # refused before a slow model load, naming the field
        check_folder(out, offline_identity(
            requested_model(args), dataset, device=args.device, precision=args.precision,
            score_threshold=args.score_threshold, limit=args.limit,
            prompt_policy=None if policy is None else policy.record(), negatives=negatives,
        ))
    from probench.scale.options import RayOptions

    ray = RayOptions.from_args(args)
    if ray.requested:  # --ray and its flags: the same run on Ray workers (docs/SCALE.md)
        from probench.scale.ray_infer import infer_on_ray
        from probench.scale.worker import ModelArgs

        if policy is not None:
            raise UsageError("--prompt-policy is not yet supported with --ray (run without --ray)")
        if negatives is not None:
            raise UsageError("--negatives is not yet supported with --ray (run without --ray)")
        model = ModelArgs(name=args.model, device=args.device, precision=args.precision,
                          score_threshold=float(args.score_threshold), weights=args.weights,
                          random_weights=bool(args.random_weights), runtime=args.runtime,
                          preprocess=args.preprocess)  # fmt: skip
        return infer_on_ray(model, ray, dataset, out, formulations, limit=args.limit,
                            overwrite=args.overwrite, progress=args.progress)
    detector, load_s = load_model(args, args.score_threshold)
    info = run_inference(
        detector, dataset, out, formulations, progress=args.progress,
        device=args.device, precision=args.precision, limit=args.limit, overwrite=args.overwrite,
        model_load_s=load_s, policy=policy, negatives=negatives,
    )
    print(
        f"{out}: {info.model.name} on {info.n_images_evaluated} image(s), formulations "
        f"{','.join(info.formulations)}, {info.timings.infer_s or 0.0:.1f} s of inference",
        file=sys.stdout,
    )
    return 0
