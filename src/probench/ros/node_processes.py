"""The eval graph's node processes, supervised: :class:`NodeSupervisor` starts the grounding
node and the evaluator, waits on their exits (each exit is an event: no polling), stops them
as ``ros2 launch`` does, and names a crash.

The children stay in this process's group (so killing the group kills all) and get SIGTERM
if this process dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

from probench.errors import CheckFailed

SIGTERM_GRACE_S = 5.0
GROUNDING, EVALUATOR = 0, 1  # the graph's order: the grounding node first (probench.ros.graph)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux), so none is orphaned."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop_escalating(proc: subprocess.Popen[bytes], *, signalled: bool = False) -> None:
    """Stop a node as ``ros2 launch`` does: SIGINT (a ROS node's clean shutdown), then
    SIGTERM, then SIGKILL, each after a grace period (kept here: the ``probench eval`` path
    needs no ros2cli/launch). ``signalled``: the child got the terminal's Ctrl-C already; a
    second SIGINT would cut its clean-up short."""
    if signalled:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=SIGTERM_GRACE_S)
    for sig, grace in ((signal.SIGINT, SIGTERM_GRACE_S), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


@dataclass(frozen=True)
class NodeExits:
    """How the graph ended: the evaluator's exit code (None: still running when the grounding
    node had gone and the grace period passed) and whether the grounding node exited first."""

    evaluator: int | None
    grounding: int | None
    grounding_first: bool

    def check(self) -> None:
        """A crash named in one line: the grounding node gone while the evaluator failed or
        ran on, or the evaluator failing."""
        if self.grounding_first and self.evaluator != 0:
            raise self.grounding_gone()
        if self.evaluator != 0:
            raise CheckFailed(f"evaluator_node exited with code {self.evaluator} (its error is printed "
                              "above); rerun the same command to resume")

    def grounding_gone(self) -> CheckFailed:
        return CheckFailed(f"grounding_node failed (exit code {self.grounding}) before the evaluation "
                           "finished, e.g. its model did not load: its error is printed above")


class NodeSupervisor:
    """``with NodeSupervisor(commands, env) as nodes: exits = nodes.wait(timeout_s)``: the
    processes of ``commands`` (grounding node first, evaluator second), one thread each
    waiting on its exit and reporting it, stopped on leaving (escalating; after Ctrl-C
    without a second SIGINT)."""

    def __init__(self, commands: Sequence[Sequence[str]], env: Mapping[str, str]) -> None:
        self._commands = [list(c) for c in commands]
        self._env = dict(env)
        self._procs: list[subprocess.Popen[bytes]] = []
        self._exited: queue.Queue[int] = queue.Queue()

    def __enter__(self) -> NodeSupervisor:
        try:
            for index, cmd in enumerate(self._commands):
                proc = subprocess.Popen(cmd, env=self._env, preexec_fn=_die_with_parent)
                self._procs.append(proc)
                threading.Thread(target=self._watch, args=(index, proc), name=f"eval-node-{index}",
                                 daemon=True).start()
        except BaseException:
            self._stop(signalled=False)
            raise
        return self

    def _watch(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        proc.wait()
        self._exited.put(index)

    def wait(self, timeout_s: float) -> NodeExits:
        """Until the evaluator exits (or, when the grounding node exits first, a grace period
        for the evaluator to record it); a :class:`CheckFailed` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        grounding, evaluator = self._procs[GROUNDING], self._procs[EVALUATOR]
        while evaluator.poll() is None:
            if grounding.poll() is not None:
                # both were told to stop (a signal to the whole group): let the evaluator record it
                with contextlib.suppress(subprocess.TimeoutExpired):
                    evaluator.wait(timeout=SIGTERM_GRACE_S)
                return NodeExits(evaluator.poll(), grounding.returncode, grounding_first=True)
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckFailed(f"evaluation did not finish within --timeout {timeout_s:g} s; "
                                  "rerun the same command to resume")
            with contextlib.suppress(queue.Empty):
                self._exited.get(timeout=left)  # an exit (either node's), or the deadline
        return NodeExits(evaluator.returncode, grounding.poll(), grounding_first=False)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop(signalled=kind is not None and issubclass(kind, KeyboardInterrupt))

    def _stop(self, *, signalled: bool) -> None:
        for proc in reversed(self._procs):
            stop_escalating(proc, signalled=signalled)
