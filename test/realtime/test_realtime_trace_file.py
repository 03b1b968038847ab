"""The node's ``trace_file`` under the writer rule (any participant on the ROS domain can set
it): created new with its header line, appended to only when it is a probench node trace;
an existing file of another kind, a link, a FIFO or a device is refused at once, naming
``trace_file``, and left as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.hostile import returns_within
from probench.cache.output import OutputPathError
from probench.realtime.grounding_trace import TRACE_HEADER, NodeTrace


def _frame(trace: NodeTrace, stamp: int) -> None:
    trace.begin()
    trace.end(stamp, prompt_wait_ms=0.0, bound=False)


def test_a_trace_is_created_with_its_header_and_appended_to_only_when_it_is_one(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    trace = NodeTrace(path)
    _frame(trace, 1)
    trace.close()
    trace = NodeTrace(path)  # a probench trace: appended to (the evaluator resumes)
    _frame(trace, 2)
    trace.replaced(b"\x00\x01\x00\x00" + (3).to_bytes(4, "little") + (0).to_bytes(4, "little"))
    trace.close()
    assert path.read_bytes().startswith(TRACE_HEADER)
    assert [r["stamp_ns"] for r in NodeTrace.read(path)] == [1, 2]
    idle = NodeTrace.read(path, idle=True)
    assert [r.get("stamp_ns", r.get("replaced_idle")) for r in idle] == [1, 2, 3_000_000_000]


@pytest.mark.parametrize("kind", ["other file", "empty file", "link", "fifo", "device", "in a run folder"])
def test_a_trace_file_that_is_not_ours_is_refused_and_left_alone(tmp_path: Path, kind: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    path = tmp_path / "trace.jsonl"
    if kind == "other file":
        path = victim
    elif kind == "empty file":
        path.touch()
    elif kind == "link":
        path.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/null")
    else:
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "run.json").write_text("{}")
        path = tmp_path / "run" / "trace.jsonl"
    error = returns_within(lambda: NodeTrace(path).close(), 20.0)  # a FIFO's blocking open never returns
    assert isinstance(error, OutputPathError), error
    text = str(error)
    assert text.startswith(f"trace_file {path}:") and "\n" not in text and "root:x" not in text
    assert victim.read_bytes() == b"root:x:0:0:root:/root:/bin/bash\n"
    if kind == "empty file":
        assert path.read_bytes() == b""
