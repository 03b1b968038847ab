"""The grounding node's own per-frame trace (parameter ``trace_file``): the node's evidence
for why a replay missed a frame (:func:`probench.realtime.eval_realtime.explain_misses`),
independent of the evaluator's clock.

One JSON line per frame the worker took: ``stamp_ns`` (the frame's header stamp),
``start_ns`` / ``end_ns`` (the node's monotonic clock: taken from the mailbox, answer
published or given up), ``prompt_wait_ms`` (waiting for its stamped prompt set),
``bound`` (answered with its own stamped set) and ``replaced`` (stamps of the frames that
replaced one another in the mailbox while this one was in flight: the frames the node
dropped). A frame replaced while the worker was idle is recorded as ``{"replaced_idle":
stamp}``. Lines are flushed as written (pure Python, no rclpy).

Any participant on the ROS domain can set ``trace_file``, so the file follows the writer
rule (:func:`probench.cache.output.open_appendable`): it is created new in an existing
folder (its first line :data:`TRACE_HEADER`), or appended to only if it is such a trace;
never a link, a FIFO or a device, never inside a run folder, and opened without blocking.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from probench.cache.output import open_appendable
from probench.files import read_user_bytes
from probench.msgs.errors import MessageConversionError
from probench.msgs.wire import header_stamp_ns

__all__ = ["TRACE_HEADER", "NodeTrace"]

TRACE_HEADER = b'{"probench_node_trace": 1}\n'  # a trace's first line: what may be appended to


class NodeTrace:
    def __init__(self, path: str | Path) -> None:
        """The trace at ``path``, opened under the writer rule (module doc); an
        :class:`probench.cache.output.OutputPathError` naming ``trace_file`` otherwise."""
        self.path = Path(path)
        fd = open_appendable(self.path, TRACE_HEADER, flag="trace_file", what="node trace")
        self._file = os.fdopen(fd, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._current: dict[str, Any] | None = None

    def begin(self) -> None:
        """The worker took a frame from the mailbox."""
        with self._lock:
            self._current = {"start_ns": time.monotonic_ns(), "replaced": []}

    def replaced(self, data: bytes) -> None:
        """A waiting frame (its serialized bytes) was replaced in the mailbox."""
        try:
            stamp = header_stamp_ns(data)
        except MessageConversionError:
            return  # a truncated message: the node reports it when it decodes one
        with self._lock:
            if self._current is not None:
                self._current["replaced"].append(stamp)
            else:
                self._write({"replaced_idle": stamp})

    def end(self, stamp_ns: int, *, prompt_wait_ms: float, bound: bool) -> None:
        """The frame in flight is done (answered, or given up without its prompt set)."""
        with self._lock:
            rec, self._current = self._current, None
            if rec is None:
                return
            self._write({"stamp_ns": int(stamp_ns), "start_ns": rec["start_ns"],
                         "end_ns": time.monotonic_ns(), "prompt_wait_ms": round(float(prompt_wait_ms), 3),
                         "bound": bool(bound), "replaced": rec["replaced"]})

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    @staticmethod
    def read(path: str | Path, *, idle: bool = False) -> list[dict[str, Any]]:
        """The frame records of a trace file; with ``idle``, the idle replacements too."""
        lines = read_user_bytes(path, what="node trace", kind="run", text=True).decode("utf-8").splitlines()
        records = (json.loads(x) for x in lines if x.strip())
        return [r for r in records if "stamp_ns" in r or (idle and "replaced_idle" in r)]
