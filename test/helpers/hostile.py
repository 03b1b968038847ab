"""Hostile-input helpers: run a probench command in a fresh process and measure its peak
memory (the kernel's high-water mark of the process, VmHWM), and build hostile files."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

PEAK_LIMIT_MB = 500.0  # the bound: a hostile file costs less than this, in all

_RUNNER = r"""
import sys
from probench.cli import main
try:
    rc = main(sys.argv[2:])
finally:
    with open("/proc/self/status") as fh:
        hwm = next(line for line in fh if line.startswith("VmHWM:"))
    with open(sys.argv[1], "w") as out:
        out.write(hwm.split()[1])
sys.exit(rc)
"""


def run_measured(args: list[str], tmp: Path, *, timeout: float = 120.0) -> tuple[int, str, float]:
    """``probench ARGS`` in a subprocess: (exit code, its stdout and stderr, peak resident memory in MB).
    A hang fails the test at ``timeout`` (subprocess.TimeoutExpired)."""
    hwm = tmp / f"hwm-{os.getpid()}-{len(list(tmp.glob('hwm-*')))}.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("PROBENCH_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(hwm), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    peak_kb = float(hwm.read_text()) if hwm.exists() else float("nan")
    return proc.returncode, proc.stdout + proc.stderr, peak_kb / 1024.0


def nested_json(depth: int) -> str:
    """``[[[...]]]``, ``depth`` levels: deeper than any parser's recursion allows."""
    return "[" * depth + "]" * depth


def laughs_pickle(depth: int = 60) -> bytes:
    """A plain-data pickle of a "billion laughs" DAG: ``L = [L, L]``, ``depth`` levels. In
    memory it is ``depth`` small lists; the pickler memoizes the shared ones, so the file is
    about a kilobyte, yet a walk that follows every reference meets 2**depth lists."""
    import pickle

    node: list[object] = [0]
    for _ in range(depth):
        node = [node, node]
    return pickle.dumps(node, protocol=2)


def one_line(text: str) -> str:
    """The one line a refused hostile input costs (no traceback, nothing else printed)."""
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def returns_within(fn: Callable[[], T], seconds: float = 60.0) -> T | BaseException:
    """``fn()``'s result, or the exception it raised, run in a daemon thread: a call that
    blocks (a FIFO opened without ``O_NONBLOCK`` waits for ever) fails the test after
    ``seconds`` instead of hanging it."""
    out: list[T | BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"blocked for {seconds} s"
    return out[0]
