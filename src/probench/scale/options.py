"""The Ray flags of ``probench infer`` and ``probench sweep`` (no Ray import here: ``--help``
stays fast and the flags exist where Ray is not installed)."""

from __future__ import annotations

import argparse

from probench.scale.cluster import CONNECT_TIMEOUT_S, MAX_CONNECT_TIMEOUT_S
from probench.scale.errors import RayUsageError

LOCAL = ""  # ``--ray`` without an address: RAY_ADDRESS if set, else a local cluster


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ray", nargs="?", const=LOCAL, default=None, metavar="ADDRESS",
        help="run on Ray: ADDRESS of a running cluster (e.g. 10.0.0.5:6379, auto, ray://host:10001); "
             "without it RAY_ADDRESS if set, else a local cluster on this machine (docs/SCALE.md)",
    )  # fmt: skip
    parser.add_argument(
        "--ray-timeout", type=float, default=None, metavar="S",
        help=f"give up on --ray ADDRESS when it has not answered as a Ray head within S seconds "
             f"(default {CONNECT_TIMEOUT_S:g}, at most {MAX_CONNECT_TIMEOUT_S:g})",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=None, metavar="N",
        help="Ray workers, each loading the model once (default: one per GPU with --device cuda, "
             "else one per 2 CPUs of the cluster)",
    )  # fmt: skip
    parser.add_argument(
        "--cpus-per-worker", type=int, default=None, metavar="K",
        help="CPUs each CPU worker reserves (and its torch threads; default: the cluster's CPUs / N)",
    )
    parser.add_argument(
        "--chunk-size", type=int, default=None, metavar="M",
        help="images per unit of work handed to a worker (default: adaptive, at most 16)",
    )


def _ray_flags(args: argparse.Namespace) -> dict[str, float | None]:
    return {"--workers": args.workers, "--cpus-per-worker": args.cpus_per_worker,
            "--chunk-size": args.chunk_size, "--ray-timeout": args.ray_timeout}  # fmt: skip


def ray_timeout(args: argparse.Namespace) -> float:
    """``--ray-timeout``, or its default."""
    return CONNECT_TIMEOUT_S if args.ray_timeout is None else float(args.ray_timeout)


def ray_requested(args: argparse.Namespace) -> bool:
    """``--ray`` or one of its flags was given (then :func:`check_ray_arguments` says what is wrong)."""
    return args.ray is not None or any(v is not None for v in _ray_flags(args).values())


def check_ray_arguments(args: argparse.Namespace) -> None:
    """Usage errors of the Ray flags, before anything starts."""
    ray_flags = _ray_flags(args)
    if args.ray is None:
        given = [name for name, value in ray_flags.items() if value is not None]
        if given:
            raise RayUsageError(f"{', '.join(given)} only apply with --ray; add --ray (docs/SCALE.md)")
        return
    timeout = ray_flags.pop("--ray-timeout")
    if timeout is not None and not 0 < timeout <= MAX_CONNECT_TIMEOUT_S:
        raise RayUsageError(
            f"--ray-timeout must lie in (0, {MAX_CONNECT_TIMEOUT_S:g}] seconds, got {timeout:g}"
        )
    for name, value in ray_flags.items():
        if value is not None and value < 1:
            raise RayUsageError(f"{name} must be >= 1, got {value}")
    device = str(args.device)
    if device.startswith("cuda:"):
        raise RayUsageError(
            f"--device {device} with --ray: each Ray worker is given its own GPU; pass --device cuda"
        )
    if device not in ("cpu", "cuda"):
        raise RayUsageError(f"--device {device} with --ray: use cpu or cuda")
