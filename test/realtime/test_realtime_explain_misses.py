"""explain_misses on the grounding node's real trace: the node times every frame's take of
its stamped prompt set, a few microseconds when the set was already there (the trace keeps
3 decimals of a millisecond). Such a wait is no cause; a wait is the cause only when it made
the frame in flight outlast a period."""

from __future__ import annotations

from probench.cache.trace import frame_record
from probench.realtime.eval_realtime import MAILBOX, explain_misses

PERIOD_MS = 1000 / 30


def _causes(busy_ms: float, wait_ms: float, bound: bool = True) -> set[str]:
    """The causes given to frames 20 and 30, replaced while frame 10 was in flight for
    ``busy_ms`` of processing plus ``wait_ms`` of waiting for its set."""
    flight = {"stamp_ns": 10, "start_ns": 0, "end_ns": round((busy_ms + wait_ms) * 1e6),
              "prompt_wait_ms": wait_ms, "bound": bound, "replaced": [20, 30]}
    missed = [frame_record("orig", i, sent_ns=i, received_ns=None, status="missed", stamp_ns=s)
              for i, s in ((1, 20), (2, 30))]
    return {cause for cause, _ in explain_misses(missed, [flight], period_ms=PERIOD_MS).values()}


def test_the_nodes_microsecond_take_is_no_prompt_wait() -> None:
    # what the e2e test met on a loaded machine: a frame of the instant model took longer than a
    # period (the CPU was elsewhere) after a 0.002 ms take of its set: the mailbox, not a late set
    assert _causes(busy_ms=45.0, wait_ms=0.002) == {MAILBOX}
    assert _causes(busy_ms=12.0, wait_ms=0.002) == {"mailbox within a period"}


def test_a_wait_that_made_the_frame_outlast_a_period_is_a_late_prompt_set() -> None:
    assert _causes(busy_ms=5.0, wait_ms=200.0) == {"late prompt set"}
    assert _causes(busy_ms=20.0, wait_ms=20.0) == {"late prompt set"}
    assert _causes(busy_ms=5.0, wait_ms=0.002, bound=False) == {"late prompt set"}  # answered without its set


def test_a_frame_slower_than_a_period_by_itself_is_the_mailbox_whatever_it_waited() -> None:
    assert _causes(busy_ms=100.0, wait_ms=50.0) == {MAILBOX}


def test_a_frame_replaced_while_the_worker_was_idle_is_the_mailbox_while_idle(tmp_path) -> None:
    """The trace's idle replacements (NodeTrace.read(idle=True)) are the node's evidence too."""
    from probench.msgs.wire import header_stamp_ns
    from probench.realtime.eval_realtime import MAILBOX_IDLE
    from probench.realtime.grounding_trace import NodeTrace

    trace = NodeTrace(tmp_path / "node.jsonl")
    image = b"\x00\x01\x00\x00" + (7).to_bytes(4, "little") + (25).to_bytes(4, "little") + b"\x00" * 8
    stamp = header_stamp_ns(image)
    trace.replaced(image)  # no frame in flight
    trace.close()
    missed = [frame_record("orig", 1, sent_ns=1, received_ns=None, status="missed", stamp_ns=stamp)]
    assert NodeTrace.read(tmp_path / "node.jsonl") == []  # frame records only, by default
    node = NodeTrace.read(tmp_path / "node.jsonl", idle=True)
    assert node == [{"replaced_idle": stamp}]
    assert [c for c, _ in explain_misses(missed, node, period_ms=PERIOD_MS).values()] == [MAILBOX_IDLE]
    assert [c for c, _ in explain_misses(missed, [], period_ms=PERIOD_MS).values()] == ["no evidence"]
