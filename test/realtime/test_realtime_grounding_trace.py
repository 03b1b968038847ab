"""The grounding node's own per-frame trace (trace_file): stamps read from the raw bytes,
replacements attached to the frame in flight, and what explain_misses makes of it."""

from __future__ import annotations

import numpy as np

from probench.cache.trace import frame_record
from probench.msgs.wire import header_stamp_ns
from probench.realtime.eval_realtime import MAILBOX, explain_misses
from probench.realtime.grounding_trace import NodeTrace


def _image_cdr(stamp_ns: int, compressed: bool = False) -> bytes:
    from probench.bags.typestore import typestore

    ts = typestore()
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    header = Header(stamp=Time(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9), frame_id="cam")
    if compressed:
        msg = ts.types["sensor_msgs/msg/CompressedImage"](header=header, format="jpeg",
                                                          data=np.zeros(8, np.uint8))
        return bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/CompressedImage"))
    msg = ts.types["sensor_msgs/msg/Image"](header=header, height=1, width=1, encoding="rgb8", is_bigendian=0,
                                            step=3, data=np.zeros(3, np.uint8))
    return bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/Image"))


def test_stamps_come_from_the_raw_bytes() -> None:
    stamp = 1_700_000_123_456_789_012
    assert header_stamp_ns(_image_cdr(stamp)) == stamp
    assert header_stamp_ns(_image_cdr(stamp, compressed=True)) == stamp


def test_the_trace_names_the_frames_replaced_while_one_was_in_flight(tmp_path) -> None:
    trace = NodeTrace(tmp_path / "node.jsonl")
    trace.replaced(_image_cdr(5))  # the worker idle: recorded apart
    trace.begin()
    trace.replaced(_image_cdr(20))
    trace.replaced(_image_cdr(30))
    trace.end(10, prompt_wait_ms=0.0, bound=True)
    trace.close()
    (rec,) = NodeTrace.read(tmp_path / "node.jsonl")
    assert rec["stamp_ns"] == 10 and rec["replaced"] == [20, 30] and rec["bound"]
    assert rec["end_ns"] >= rec["start_ns"]
    # the evaluator missed 20 and 30: excused only because frame 10 took longer than a period
    records = [frame_record("orig", i, sent_ns=i, received_ns=None, status="missed", stamp_ns=s)
               for i, s in ((1, 20), (2, 30))]
    slow = {**rec, "start_ns": 0, "end_ns": 50_000_000}
    assert {c for c, _ in explain_misses(records, [slow], period_ms=33.3).values()} == {MAILBOX}
    quick = {**rec, "start_ns": 0, "end_ns": 20_000_000}
    causes = {c for c, _ in explain_misses(records, [quick], period_ms=33.3).values()}
    assert causes == {"mailbox within a period"}
    waited = {**slow, "prompt_wait_ms": 40.0}
    assert {c for c, _ in explain_misses(records, [waited], period_ms=33.3).values()} == {"late prompt set"}
    assert {c for c, _ in explain_misses(records, [], period_ms=33.3).values()} == {"no evidence"}
