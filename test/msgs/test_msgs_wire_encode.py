"""probench.msgs.wire's encoder, the one writer of every message probench builds itself
(Detection2DArray, LabelInfo): its bytes equal rclpy's ``serialize_message`` and the rosbags
typestore's ``serialize_cdr`` of the same message built field by field here, independently
of probench (every field of Detection2D set explicitly).

rosbags zeroes the CDR alignment padding, as the encoder does: equal byte for byte. rclpy
(the rmw's Fast CDR) leaves padding bytes uninitialized (they hold whatever the heap held,
seen here: 'pp' left over from an earlier message), so against rclpy every byte but the
padding is compared; the padding positions are found by encoding again with a marker byte
as padding (:func:`_padding`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from probench.detections import Detections
from probench.msgs.errors import MessageConversionError
from probench.msgs.wire import detections_to_cdr, label_info_to_cdr

Classes = Callable[[str], Any]  # "pkg/msg/Name" -> message class


def _rclpy_classes(name: str) -> Any:
    pkg, _, cls = name.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), cls)


def _rosbags_classes(name: str) -> Any:
    from probench.bags.typestore import vision_typestore

    return vision_typestore().types[name]


def _padding(encode: Callable[[], bytes]) -> np.ndarray:
    """Which bytes of ``encode()``'s output are alignment padding: those that change when
    the encoder pads with 0xAA instead of 0x00."""
    from probench.msgs import wire

    plain = encode()
    saved = wire._PAD
    wire._PAD = tuple(b"\xaa" * n for n in range(8))
    try:
        marked = encode()
    finally:
        wire._PAD = saved
    assert len(marked) == len(plain)
    return np.frombuffer(plain, np.uint8) != np.frombuffer(marked, np.uint8)


def _assert_same(encode: Callable[[], bytes], reference: bytes, serializer: str) -> None:
    ours = encode()
    assert len(ours) == len(reference)
    if serializer == "rosbags":
        assert ours == reference
        return
    differ = np.frombuffer(ours, np.uint8) != np.frombuffer(reference, np.uint8)
    assert not np.any(differ & ~_padding(encode)), "a field's bytes differ from rclpy's"


def _rclpy_bytes(msg: Any, name: str) -> bytes:
    from rclpy.serialization import serialize_message

    return bytes(serialize_message(msg))


def _rosbags_bytes(msg: Any, name: str) -> bytes:
    from probench.bags.typestore import vision_typestore

    return bytes(vision_typestore().serialize_cdr(msg, name))


# (message classes, serializer); the rclpy side needs the ROS message packages
SERIALIZERS = {"rclpy": (_rclpy_classes, _rclpy_bytes), "rosbags": (_rosbags_classes, _rosbags_bytes)}


@pytest.fixture(params=sorted(SERIALIZERS))
def serializer(request: pytest.FixtureRequest) -> tuple[str, Classes, Callable[[Any, str], bytes]]:
    if request.param == "rclpy":
        request.getfixturevalue("requires_vision_msgs")
    return (request.param, *SERIALIZERS[request.param])


def _header(sec: int = 1_700_000_000, nanosec: int = 999_999_999, frame_id: str = "camera") -> Any:
    return SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=nanosec), frame_id=frame_id)


def _ref_header(c: Classes, h: Any) -> Any:
    time = c("builtin_interfaces/msg/Time")(sec=h.stamp.sec, nanosec=h.stamp.nanosec)
    return c("std_msgs/msg/Header")(stamp=time, frame_id=h.frame_id)


def _ref_detections(c: Classes, dets: Detections, h: Any, prompts: Sequence[str],
                    limit: int | None = None) -> Any:
    """The Detection2DArray the encoder promises, every field of every Detection2D set."""
    scores = dets.scores.tolist()
    order = sorted(range(len(dets)), key=lambda i: -scores[i])[:limit]  # stable: ties keep order
    out = []
    for i in order:
        x1, y1, x2, y2 = dets.xyxy[i].tolist()
        pose = c("geometry_msgs/msg/PoseWithCovariance")(
            pose=c("geometry_msgs/msg/Pose")(
                position=c("geometry_msgs/msg/Point")(x=0.0, y=0.0, z=0.0),
                orientation=c("geometry_msgs/msg/Quaternion")(x=0.0, y=0.0, z=0.0, w=1.0)),
            covariance=np.zeros(36))
        hyp = c("vision_msgs/msg/ObjectHypothesis")(
            class_id=prompts[int(dets.prompt_index[i])], score=scores[i])
        center = c("vision_msgs/msg/Pose2D")(
            position=c("vision_msgs/msg/Point2D")(x=(x1 + x2) / 2, y=(y1 + y2) / 2), theta=0.0)
        out.append(c("vision_msgs/msg/Detection2D")(
            header=_ref_header(c, h),
            results=[c("vision_msgs/msg/ObjectHypothesisWithPose")(hypothesis=hyp, pose=pose)],
            bbox=c("vision_msgs/msg/BoundingBox2D")(center=center, size_x=x2 - x1, size_y=y2 - y1),
            id=""))
    return c("vision_msgs/msg/Detection2DArray")(header=_ref_header(c, h), detections=out)


def _random(n: int, n_prompts: int, seed: int = 0) -> Detections:
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 1000, (n, 2))
    return Detections.from_arrays(np.hstack([corner, corner + rng.uniform(0, 300, (n, 2))]),
                                  rng.uniform(0, 1, n), rng.integers(0, max(n_prompts, 1), n))


UNICODE = ["eine Tür", "杯子", "🙂 a mug", "", "ß" * 3, "naïve café"]
CASES = {
    "empty": (0, ["a"], _header()),
    "empty, no prompts": (0, [], _header(frame_id="")),
    "one": (1, ["a cup"], _header(sec=-3, nanosec=0)),
    "500": (500, ["p", "pp", "ppp", "pppp", "ppppp", "pppppp", "ppppppp", "pppppppp"], _header()),
    "long class ids": (40, ["x" * 10_000, "y" * 4097, "z"], _header(frame_id="f" * 3001)),
    "unicode": (60, UNICODE, _header(frame_id="cäm_😀")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_detections_bytes_equal_the_reference_serializers(case: str, serializer: Any) -> None:
    name, classes, to_bytes = serializer
    n, prompts, header = CASES[case]
    dets = _random(n, len(prompts), seed=n)
    ref = to_bytes(_ref_detections(classes, dets, header, prompts), "vision_msgs/msg/Detection2DArray")
    _assert_same(lambda: detections_to_cdr(dets, header, prompts), ref, name)


@pytest.mark.parametrize("limit", [0, 1, 7, 100])
def test_max_detections_keeps_the_best_with_ties_in_order(limit: int, serializer: Any) -> None:
    name, classes, to_bytes = serializer
    dets = _random(120, 3, seed=1)
    dets = Detections.from_arrays(dets.xyxy, np.round(dets.scores, 1), dets.prompt_index)  # ties
    prompts, header = ["a", "bb", "ccc"], _header()
    ref = to_bytes(_ref_detections(classes, dets, header, prompts, limit), "vision_msgs/msg/Detection2DArray")
    _assert_same(lambda: detections_to_cdr(dets, header, prompts, max_detections=limit), ref, name)


def test_every_field_of_a_detection_reads_back() -> None:
    """The bytes read by rosbags: each field of Detection2D holds what the docstring says."""
    from probench.bags.typestore import vision_typestore

    dets = Detections.from_arrays([[1.5, 2.0, 11.0, 22.25], [0, 0, 4, 4]], [0.625, 0.75], [1, 0])
    header = _header(sec=12, nanosec=34, frame_id="cam")
    msg = vision_typestore().deserialize_cdr(
        detections_to_cdr(dets, header, ["door", "eine Tür"]), "vision_msgs/msg/Detection2DArray")
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (12, 34, "cam")
    second, first = msg.detections  # best first
    assert first.id == "" and second.id == ""
    assert (first.header.stamp.sec, first.header.stamp.nanosec, first.header.frame_id) == (12, 34, "cam")
    center = first.bbox.center
    assert (center.position.x, center.position.y, center.theta) == (6.25, 12.125, 0.0)
    assert (first.bbox.size_x, first.bbox.size_y) == (9.5, 20.25)
    (result,) = first.results
    assert (result.hypothesis.class_id, result.hypothesis.score) == ("eine Tür", 0.625)
    pose = result.pose.pose
    assert (pose.position.x, pose.position.y, pose.position.z) == (0.0, 0.0, 0.0)
    assert (pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w) == (0, 0, 0, 1)
    assert not np.any(result.pose.covariance) and result.pose.covariance.shape == (36,)
    assert second.results[0].hypothesis.class_id == "door"


def test_a_detection_answering_no_active_prompt_is_an_error() -> None:
    dets = Detections.from_arrays([[0, 0, 1, 1]], [0.5], [3])
    with pytest.raises(MessageConversionError, match="prompt 3 but only 1"):
        detections_to_cdr(dets, _header(), ["x"])


def _ref_label_info(c: Classes, prompts: Sequence[str], h: Any, threshold: float) -> Any:
    vc = c("vision_msgs/msg/VisionClass")
    return c("vision_msgs/msg/LabelInfo")(
        header=_ref_header(c, h), class_map=[vc(class_id=i, class_name=p) for i, p in enumerate(prompts)],
        threshold=threshold)


@pytest.mark.parametrize(("prompts", "threshold"), [
    ([], 0.0),
    (["a cup"], 0.25),
    (UNICODE, 0.1),
    (["x" * 5000, "y", "zz"], 1.0),
    ([f"prompt {i}" * (i % 5) for i in range(300)], 0.3333),
])
def test_label_info_bytes_equal_the_reference_serializers(prompts: list[str], threshold: float,
                                                          serializer: Any) -> None:
    name, classes, to_bytes = serializer
    header = _header(frame_id="é")
    ref = to_bytes(_ref_label_info(classes, prompts, header, threshold), "vision_msgs/msg/LabelInfo")
    _assert_same(lambda: label_info_to_cdr(prompts, header, threshold), ref, name)


def test_label_info_holds_at_most_a_uint16_of_classes() -> None:
    with pytest.raises(MessageConversionError, match="at most 65536"):
        label_info_to_cdr(["p"] * 65537, _header())


def test_rclpy_objects_are_the_encoders_bytes(requires_vision_msgs: None) -> None:
    """probench.ros.convert builds no message of its own: its objects serialize back to the
    encoder's bytes."""
    from rclpy.serialization import serialize_message

    from probench.ros import convert

    dets, prompts, header = _random(9, 2), ["a", "b"], _header()
    msg = convert.detections_to_msg(dets, header, prompts, max_detections=5)
    _assert_same(lambda: detections_to_cdr(dets, header, prompts, max_detections=5),
                 bytes(serialize_message(msg)), "rclpy")
    info = convert.prompts_to_label_info(prompts, header, 0.5)
    _assert_same(lambda: label_info_to_cdr(prompts, header, 0.5), bytes(serialize_message(info)), "rclpy")
