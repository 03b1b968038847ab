"""The CPU threads of a process's model work: the ``threads`` setting (node parameter,
``--threads`` of ``ground``, ``infer``, ``latency`` and ``eval``), applied in one place.

:func:`apply_threads` sets torch's intra-op and inter-op thread pools and OpenCV's, once per
process, once the model is built and before it runs (the grounding node at configure, the
commands after they load the model). ``0`` means the default, :func:`default_threads`:
half the CPUs this process may use (its affinity and its cgroup's CPU quota), at least 1.
torch's own default, one thread per CPU, oversubscribes a CPU that other work shares: every
parallel region waits for its slowest thread, and a thread that has to wait for a core
holds up the whole operator. On 2 cores with other work running, `probench ground` on
tiny-owlv2 had a p95 of 658 ms with torch's default and 61 ms with one thread
(docs/BENCHMARKS.md, issue 35).

Light at import (no torch): the parameter tables and the flags' checks read the range here.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from pathlib import Path

from probench.limits import MAX_THREADS, THREADS_DEFAULT, check_flag

DEFAULT = THREADS_DEFAULT  # the setting's default value, 0: half the usable CPUs (default_threads)
CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))

_applied: int | None = None  # what this process runs with (None: not applied yet)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, capped by its cgroup's CPU quota
    (a container limited to 1.5 CPUs: 2), at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def _cgroup_quota() -> float | None:
    """The cgroup's CPU quota in CPUs (v2 ``cpu.max``, else v1 ``cfs_quota_us``), None when unlimited."""
    try:
        quota, _, period = CGROUP_V2.read_text().strip().partition(" ")
        if quota != "max":
            return float(quota) / float(period or 100_000)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = float(CGROUP_V1[0].read_text())
        period_us = float(CGROUP_V1[1].read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def default_threads(cpus: int | None = None) -> int:
    """The default thread count: half of ``cpus`` (default: :func:`usable_cpus`), at least 1:
    the model leaves the other half to the rest of the robot (drivers, the ROS executors)."""
    n = usable_cpus() if cpus is None else cpus
    return max(1, n // 2)


def check_threads(value: int, flag: str = "--threads") -> int:
    """``value`` checked (0 = the default, else 1..MAX_THREADS; a one-line UsageError) and resolved."""
    check_flag(flag, value, low=0, high=MAX_THREADS)
    return int(value) or default_threads()


def apply_threads(value: int, flag: str = "--threads") -> int:
    """Set this process's torch intra-op and inter-op threads and OpenCV's threads to the
    ``threads`` setting ``value`` (0: :func:`default_threads`); returns the count set.

    Call it once the model is built, before it runs. It imports nothing: a model that runs
    without torch (a scripted test model) does not pay torch's import for it. torch not yet
    imported gets ``OMP_NUM_THREADS``, which it reads when it is; its inter-op pool can be
    sized only before its first use (a later call leaves it as it is). OpenCV likewise:
    ``setNumThreads``, or ``OPENCV_FOR_THREADS_NUM`` before it is imported."""
    global _applied
    n = check_threads(value, flag)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
        if _applied is None:
            with contextlib.suppress(RuntimeError):  # inter-op work already ran here: its pool stays
                torch.set_num_interop_threads(n)
    else:
        os.environ["OMP_NUM_THREADS"] = str(n)  # torch, imported later in this process, starts with n
    cv2 = sys.modules.get("cv2")
    if cv2 is not None:
        cv2.setNumThreads(n)
    else:
        os.environ["OPENCV_FOR_THREADS_NUM"] = str(n)  # read by OpenCV when it is imported
    _applied = n
    return n


def add_threads_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--threads N``, the same flag for every command that runs a model."""
    parser.add_argument("--threads", type=int, default=DEFAULT, metavar="N",
                        help="CPU threads of the model work (torch, OpenCV); 0 (default): half the CPUs "
                        "this process may use, at least 1 (the grounding node's `threads`)")


def applied_threads() -> int | None:
    """The thread count :func:`apply_threads` set in this process (None: never applied)."""
    return _applied
