"""probench.msgs.wire's readers of what the grounding node sends the evaluator: a
Detection2DArray read back as Detections (track ids on ``tracker_id``), the inverse of the one
encoder and a reader of any node's message (built field by field with rosbags' and rclpy's
classes here); a failed frame's report (diagnostic_msgs/DiagnosticArray), its bytes equal to
the reference serializers'; one header-stamp reader that names what it cannot read."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from helpers.cdr_reference import REFERENCES, check_bytes, header
from probench.detections import Detections
from probench.msgs.errors import MessageConversionError
from probench.msgs.wire import (
    FAILED_FRAME_STATUS,
    detections_from_cdr,
    detections_to_cdr,
    frame_failure_from_cdr,
    frame_failure_to_cdr,
    header_stamp_ns,
)

HEADER = SimpleNamespace(stamp=SimpleNamespace(sec=1_700_000_123, nanosec=456_789), frame_id="camera_optical")
PROMPTS = ("a red backpack", "the open door", "a valve")


@pytest.fixture(params=sorted(REFERENCES))
def ref(request: pytest.FixtureRequest) -> tuple[str, Callable[[str], Any], Callable[[Any, str], bytes]]:
    if request.param == "rclpy":
        request.getfixturevalue("requires_vision_msgs")
    return (request.param, *REFERENCES[request.param])


def _dets(n: int, seed: int = 0) -> Detections:
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 500, (n, 2))
    wh = rng.uniform(1, 80, (n, 2))
    return Detections(np.hstack([xy, xy + wh]), rng.uniform(0, 1, n), rng.integers(0, len(PROMPTS), n))


@pytest.mark.parametrize("n", [0, 1, 7, 60])
@pytest.mark.parametrize("tracked", [False, True])
def test_the_reader_inverts_the_encoder(n: int, tracked: bool) -> None:
    dets = _dets(n, seed=n)
    if tracked:
        dets = dets.with_tracker_id(np.arange(n) * 37 - 1)  # -1 (no id), then ids of growing length
    read = detections_from_cdr(detections_to_cdr(dets, HEADER, PROMPTS))
    stamp = read.header.stamp
    assert (stamp.sec, stamp.nanosec, read.header.frame_id) == (1_700_000_123, 456_789, "camera_optical")
    order = np.argsort(-dets.scores, kind="stable")  # published best first
    assert read.class_ids == [PROMPTS[i] for i in dets.prompt_index[order]]
    np.testing.assert_allclose(read.detections.xyxy, dets.xyxy[order], atol=1e-9)
    assert read.detections.scores.tolist() == dets.scores[order].tolist()
    if dets.tracker_id is not None and (dets.tracker_id >= 0).any():
        assert read.detections.tracker_id is not None
        assert read.detections.tracker_id.tolist() == dets.tracker_id[order].tolist()
    else:
        assert read.detections.tracker_id is None  # no detection carries an id ("" is none)


def test_any_nodes_message_is_read(ref: Any) -> None:
    """A foreign node's Detection2DArray: several results (the first counts), none (class "",
    score 0), ids that are no track id ("a7", "-3": none), one that is."""
    _, c, to_bytes = ref

    def hyp(class_id: str, score: float) -> Any:
        pose = c("geometry_msgs/msg/Pose")(position=c("geometry_msgs/msg/Point")(x=1.0, y=2.0, z=3.0),
                                           orientation=c("geometry_msgs/msg/Quaternion")(x=0.0, y=0.0, z=0.0,
                                                                                         w=1.0))
        return c("vision_msgs/msg/ObjectHypothesisWithPose")(
            hypothesis=c("vision_msgs/msg/ObjectHypothesis")(class_id=class_id, score=score),
            pose=c("geometry_msgs/msg/PoseWithCovariance")(pose=pose, covariance=np.arange(36.0)))

    def det(cx: float, results: list[Any], det_id: str) -> Any:
        bbox = c("vision_msgs/msg/BoundingBox2D")(
            center=c("vision_msgs/msg/Pose2D")(position=c("vision_msgs/msg/Point2D")(x=cx, y=20.0),
                                               theta=0.0),
            size_x=10.0, size_y=4.0)
        return c("vision_msgs/msg/Detection2D")(header=header(c, 3, 4, "cam"), results=results, bbox=bbox,
                                                id=det_id)

    msg = c("vision_msgs/msg/Detection2DArray")(header=header(c, 3, 4, "cam"), detections=[
        det(50.0, [hyp("door", 0.75), hyp("wall", 0.9)], "12"),
        det(80.0, [], "a7"),
        det(90.0, [hyp("door", 0.5)], "-3"),
    ])
    read = detections_from_cdr(to_bytes(msg, "vision_msgs/msg/Detection2DArray"))
    assert header_stamp_ns(to_bytes(msg, "vision_msgs/msg/Detection2DArray")) == 3_000_000_004
    assert read.class_ids == ["door", "", "door"] and read.labels == ("door", "")
    assert read.detections.scores.tolist() == [0.75, 0.0, 0.5]
    assert read.detections.xyxy[0].tolist() == [45.0, 18.0, 55.0, 22.0]
    assert read.detections.tracker_id is not None and read.detections.tracker_id.tolist() == [12, -1, -1]


def test_big_endian_bytes_are_read() -> None:
    """XCDR1 in either byte order (what another middleware may send)."""
    from probench.bags.typestore import vision_typestore

    ts = vision_typestore()
    little = detections_to_cdr(_dets(3).with_tracker_id([5, 6, 7]), HEADER, PROMPTS)
    msg = ts.deserialize_cdr(little, "vision_msgs/msg/Detection2DArray")
    big = bytes(ts.serialize_cdr(msg, "vision_msgs/msg/Detection2DArray", little_endian=False))
    assert big[:2] == b"\x00\x00" and big != little
    a, b = detections_from_cdr(little), detections_from_cdr(big)
    assert a.class_ids == b.class_ids and a.detections.xyxy.tolist() == b.detections.xyxy.tolist()
    assert b.detections.tracker_id is not None and a.detections.tracker_id is not None
    assert sorted(b.detections.tracker_id.tolist()) == [5, 6, 7]
    assert b.detections.tracker_id.tolist() == a.detections.tracker_id.tolist()


def test_what_cannot_be_read_is_named() -> None:
    data = detections_to_cdr(_dets(4).with_tracker_id([1, 2, 3, 4]), HEADER, PROMPTS)
    for cut in (3, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(MessageConversionError, match=r"truncated|too short"):
            detections_from_cdr(data[:cut])
    with pytest.raises(MessageConversionError, match="encapsulation"):
        detections_from_cdr(b"\x07\x07" + data[2:])
    huge = bytearray(data)
    count_at = 4 + 8 + 4 + len(HEADER.frame_id) + 1  # the detections' count follows the header
    count_at += -(count_at - 4) % 4
    huge[count_at:count_at + 4] = (10**9).to_bytes(4, "little")
    with pytest.raises(MessageConversionError, match="1000000000 elements"):
        detections_from_cdr(bytes(huge))  # a corrupt length is named, never allocated
    with pytest.raises(MessageConversionError, match=r"truncated|too short"):
        header_stamp_ns(b"\x00\x01\x00\x00\x01")


def test_detections_that_are_no_detections_are_refused() -> None:
    """A box with a negative size or a score far outside [0, 1] is not read as a detection."""
    from probench.bags.typestore import vision_typestore

    ts = vision_typestore()
    msg = ts.deserialize_cdr(detections_to_cdr(_dets(2), HEADER, PROMPTS), "vision_msgs/msg/Detection2DArray")
    msg.detections[1].results[0].hypothesis.score = 7.5
    with pytest.raises(MessageConversionError, match="no valid detections: scores must lie in"):
        detections_from_cdr(bytes(ts.serialize_cdr(msg, "vision_msgs/msg/Detection2DArray")))


@pytest.mark.parametrize("error", ["ValueError: Expected more than 1 value per channel", "", "ümlaut: ✓"])
def test_a_failed_frames_report_equals_the_reference_serializers(ref: Any, error: str) -> None:
    name, c, to_bytes = ref
    for frame_id in ("camera_optical", "", "cäm"):  # header lengths move every later field's alignment
        h = SimpleNamespace(stamp=HEADER.stamp, frame_id=frame_id)
        status = c("diagnostic_msgs/msg/DiagnosticStatus")(level=bytes([2]) if name == "rclpy" else 2,
                                                           name=FAILED_FRAME_STATUS, message=error,
                                                           hardware_id="tiny-owlv2", values=[])
        hdr = header(c, h.stamp.sec, h.stamp.nanosec, frame_id)
        msg = c("diagnostic_msgs/msg/DiagnosticArray")(header=hdr, status=[status])
        reference = to_bytes(msg, "diagnostic_msgs/msg/DiagnosticArray")
        check_bytes(lambda h=h: frame_failure_to_cdr(h, error, "tiny-owlv2"), reference, name)
        got_header, got = frame_failure_from_cdr(reference)
        assert got == (error or "an error without a message")
        assert (got_header.stamp.sec, got_header.stamp.nanosec, got_header.frame_id) == (
            h.stamp.sec, h.stamp.nanosec, frame_id)


def test_a_diagnostic_array_without_an_error_is_no_failure() -> None:
    from probench.bags.typestore import vision_typestore

    ts = vision_typestore()
    c = ts.types
    values = [c["diagnostic_msgs/msg/KeyValue"](key="k", value="v")]
    ok = c["diagnostic_msgs/msg/DiagnosticStatus"](level=0, name="x", message="fine", hardware_id="",
                                                   values=values)
    msg = c["diagnostic_msgs/msg/DiagnosticArray"](header=header(ts.types.get, 1, 2, ""), status=[ok])
    with pytest.raises(MessageConversionError, match="without an ERROR status"):
        frame_failure_from_cdr(bytes(ts.serialize_cdr(msg, "diagnostic_msgs/msg/DiagnosticArray")))
    with pytest.raises(MessageConversionError):
        frame_failure_from_cdr(frame_failure_to_cdr(HEADER, "boom")[:-3])


@pytest.mark.parametrize("ns", [0, 1, 999_999_999, 1_700_000_123_000_456_789,
                                (2**31 - 1) * 10**9 + 999_999_999])
def test_one_stamp_conversion_both_ways(ns: int) -> None:
    """msgs.shapes.stamp_ns / stamp_at: the one stamp <-> nanoseconds conversion, exact."""
    from probench.msgs.shapes import stamp_at, stamp_ns

    stamp = stamp_at(ns)
    assert 0 <= stamp.nanosec < 10**9 and stamp_ns(stamp) == ns
    header = SimpleNamespace(stamp=stamp, frame_id="")
    assert header_stamp_ns(detections_to_cdr(Detections.empty(), header, ())) == ns
