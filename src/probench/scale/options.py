"""The Ray flags of ``probench infer`` and ``probench sweep`` (no Ray import here: ``--help``
stays fast and the flags exist where Ray is not installed)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from probench.limits import MAX_COUNT, IntRange
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
        "--workers", type=IntRange(1, MAX_COUNT), default=None, metavar="N",
        help="Ray workers, each loading the model once (default: one per GPU with --device cuda, "
             "else one per 2 CPUs of the cluster)",
    )  # fmt: skip
    parser.add_argument(
        "--cpus-per-worker", type=IntRange(1, MAX_COUNT), default=None, metavar="K",
        help="CPUs each CPU worker reserves (and its torch threads; default: the cluster's CPUs / N)",
    )
    parser.add_argument(
        "--chunk-size", type=IntRange(1, MAX_COUNT), default=None, metavar="M",
        help="images per unit of work handed to a worker (default: adaptive, at most 16)",
    )


@dataclass(frozen=True)
class RayOptions:
    """Where and how a run goes on Ray (``--ray [ADDRESS]`` and its flags), typed: what
    :func:`probench.scale.ray_infer.infer_on_ray` and the sweep take."""

    address: str | None = None  # None: this process; LOCAL: RAY_ADDRESS or a local cluster
    workers: int | None = None
    cpus_per_worker: int | None = None
    chunk_size: int | None = None
    timeout_s: float | None = None  # --ray-timeout; None: CONNECT_TIMEOUT_S

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RayOptions:
        """From the flags :func:`add_ray_arguments` defines."""
        return cls(address=args.ray, workers=args.workers, cpus_per_worker=args.cpus_per_worker,
                   chunk_size=args.chunk_size, timeout_s=args.ray_timeout)  # fmt: skip

    @property
    def connect_timeout_s(self) -> float:
        """How long ``--ray ADDRESS`` may take to answer (probench.scale.cluster.ray_cluster)."""
        return CONNECT_TIMEOUT_S if self.timeout_s is None else float(self.timeout_s)

    def _flags(self) -> dict[str, int | None]:
        return {"--workers": self.workers, "--cpus-per-worker": self.cpus_per_worker,
                "--chunk-size": self.chunk_size}  # fmt: skip

    @property
    def requested(self) -> bool:
        """``--ray`` or one of its flags was given (then :meth:`check` says what is wrong)."""
        return (self.address is not None or self.timeout_s is not None
                or any(v is not None for v in self._flags().values()))

    def check(self, device: str) -> None:
        """Usage errors of the Ray flags (with ``--device``), before anything starts."""
        flags = self._flags()
        if self.address is None:
            given = [name for name, value in flags.items() if value is not None]
            given += ["--ray-timeout"] if self.timeout_s is not None else []
            if given:
                raise RayUsageError(f"{', '.join(given)} only apply with --ray; add --ray (docs/SCALE.md)")
            return
        for name, value in flags.items():
            if value is not None and value < 1:
                raise RayUsageError(f"{name} must be >= 1, got {value}")
        if self.timeout_s is not None and not 0 < self.timeout_s <= MAX_CONNECT_TIMEOUT_S:
            raise RayUsageError(
                f"--ray-timeout must lie in (0, {MAX_CONNECT_TIMEOUT_S:g}] seconds, got {self.timeout_s:g}"
            )
        if device.startswith("cuda:"):
            raise RayUsageError(
                f"--device {device} with --ray: each Ray worker is given its own GPU; pass --device cuda"
            )
        if device not in ("cpu", "cuda"):
            raise RayUsageError(f"--device {device} with --ray: use cpu or cuda")
