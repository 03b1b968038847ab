"""``probench sweep --models M1,M2,... --dataset D --out DIR [--ray [ADDRESS]]``: infer, latency
and score for each model, then one report with the paper's rows (:mod:`probench.scale.sweep`).

Bad arguments (an unknown model, a missing dataset, a bad number) exit 2 before anything
runs; a model whose step fails is reported and the others go on (exit 1 at the end).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probench.errors import UsageError
from probench.limits import MAX_COUNT, IntRange
from probench.models.spec import RUNTIMES
from probench.scale.options import RayOptions, add_ray_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", required=True, metavar="M1,M2,...",
                        help="comma-separated zoo names (`probench models`), e.g. tiny-owlv2,tiny-owlvit")
    parser.add_argument("--dataset", required=True, help="dataset folder (with annotations.json)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="sweep folder: runs/<model>/, report/, sweep.json, sweep.md")
    parser.add_argument("--formulations", default="orig,cat,tmpl",
                        help="comma-separated subset of orig,cat,tmpl (default all three)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--precision", default="fp32", help="fp32 (default), fp16, ... as the models support")
    parser.add_argument("--runtime", default="torch", choices=RUNTIMES,
                        help="inference runtime for every model (default torch)")
    parser.add_argument("--weights", action="append", default=[], metavar="MODEL=PATH",
                        help="local weights of one model (a checkpoint folder or file), repeatable: "
                             "--weights owlv2-b=/models/owlv2 (default: the local caches, `probench fetch`)")
    parser.add_argument("--limit", type=IntRange(1, MAX_COUNT),
                        default=None, metavar="N", help="only the first N images by id")
    parser.add_argument("--latency-images", type=IntRange(1, MAX_COUNT), default=50, metavar="N",
                        help="latency: size of the fixed image subset (default 50, the paper's)")
    parser.add_argument("--warmup", type=IntRange(0, MAX_COUNT),
                        default=3, help="latency: warm-up inferences (default 3)")
    parser.add_argument("--runs", type=IntRange(1, MAX_COUNT),
                        default=10, help="latency: timed passes (default 10)")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency step")
    parser.add_argument("--reference", default="paper", metavar="paper|CSV|none",
                        help="published rows in the report (default: the paper's Table II; none: no rows)")
    add_ray_arguments(parser)
    from probench.prompting.options import add_policy_arguments

    add_policy_arguments(parser)  # --prompt-policy P [--profile PROFILE]: the formulation `policy` per model
    from probench.models.progress import add_progress_arguments

    add_progress_arguments(parser, "progress bars")


def _models(text: str) -> list[str]:
    from probench.models.zoo import check_model_name

    names = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    if not names:
        raise UsageError("--models: give at least one model name, e.g. --models tiny-owlv2,tiny-owlvit")
    for name in names:
        check_model_name(name)  # UnknownModelError (exit 2) names it
    return names


def _weights(items: list[str], models: list[str]) -> dict[str, str]:
    """``--weights MODEL=PATH`` flags as {model: path}, checked (a model of the sweep, a path
    that exists, one each)."""
    out: dict[str, str] = {}
    for item in items:
        model, sep, path = item.partition("=")
        model, path = model.strip(), path.strip()
        if not sep or not model or not path:
            raise UsageError(f"--weights {item!r}: expected MODEL=PATH, e.g. --weights owlv2-b=/models/owlv2")
        if model not in models:
            raise UsageError(f"--weights {item!r}: {model} is not one of --models ({', '.join(models)})")
        if model in out:
            raise UsageError(f"--weights: {model} given twice")
        if not Path(path).exists():
            raise UsageError(f"--weights {item!r}: no such file or folder {path}")
        out[model] = path
    return out


def run(args: argparse.Namespace) -> int:
    from probench.cache.lock import check_out_folder
    from probench.data.dataset import load_dataset
    from probench.scale.sweep import LatencyProtocol, SweepConfig, run_folder, run_sweep, summary_text
    from probench.vocabulary import parse_formulations

    models = _models(args.models)
    formulations = parse_formulations(args.formulations)
    weights = _weights(args.weights, models)
    if args.device not in ("cpu", "cuda"):
        raise UsageError(f"--device {args.device}: a sweep runs on cpu or cuda (--ray: one GPU per worker)")
    ray = RayOptions.from_args(args)
    ray.check(args.device)
    if args.prompt_policy is not None or args.profile is not None:
        from probench.models.zoo import model_record
        from probench.prompting.options import policy_from_args

        if ray.requested:
            raise UsageError("--prompt-policy is not yet supported with --ray (run without --ray)")
        for name in models:  # every model's policy resolves (best: its profile entry), before anything runs
            policy_from_args(args, model_record(name, runtime=args.runtime), "sweep")
    if not Path(args.dataset).exists():
        raise UsageError(f"--dataset {args.dataset}: no such folder")
    check_out_folder(args.out)  # not a folder, cannot be created, or another sweep writes it
    for name in models:
        run_folder(args.out, name)
    reference = None if args.reference == "none" else args.reference
    if reference is not None:
        from probench.report.load import load_reference
        from probench.report.paper import resolve_reference

        load_reference(resolve_reference(reference))  # a bad --reference fails now, not after hours
    dataset = load_dataset(args.dataset)
    cfg = SweepConfig(
        models=models, out=args.out, formulations=formulations,
        device=args.device, precision=args.precision, runtime=args.runtime, limit=args.limit,
        latency=None if args.no_latency else LatencyProtocol(args.latency_images, args.warmup, args.runs),
        reference=reference, ray=ray, weights=weights, progress=args.progress,
        prompt_policy=args.prompt_policy, prompt_profile=args.profile,
    )  # fmt: skip
    summary = run_sweep(cfg, dataset)
    print(summary_text(summary))
    return 1 if summary["failed"] else 0
