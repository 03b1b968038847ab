"""probench.msgs.target: the latched ``target`` Detection2D, byte for byte what rclpy's
``serialize_message`` and the rosbags typestore write for the same message built field by
field (the padding rule of test_msgs_wire_encode: rosbags zeroes it, rclpy's is compared
everywhere but the padding)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from test_msgs_wire_encode import SERIALIZERS, _assert_same

from probench.detections import Detections
from probench.msgs.errors import MessageConversionError
from probench.msgs.target import DETECTION_2D, target_to_cdr
from probench.spatial.target import TargetSelector, target_cdr


def _header(frame_id: str = "camera_color_optical_frame") -> SimpleNamespace:
    return SimpleNamespace(stamp=SimpleNamespace(sec=12, nanosec=345), frame_id=frame_id)


def _reference(classes, header, xyxy, prompt: str, score: float, track_id: str) -> object:
    m = classes
    x1, y1, x2, y2 = xyxy
    hyp = m("vision_msgs/msg/ObjectHypothesisWithPose")()
    hyp.hypothesis = m("vision_msgs/msg/ObjectHypothesis")(class_id=prompt, score=score)
    det = m(DETECTION_2D)()
    hdr = m("std_msgs/msg/Header")()
    hdr.stamp = m("builtin_interfaces/msg/Time")(sec=header.stamp.sec, nanosec=header.stamp.nanosec)
    hdr.frame_id = header.frame_id
    det.header = hdr
    det.results = [hyp]
    det.bbox.center.position.x = (x1 + x2) / 2
    det.bbox.center.position.y = (y1 + y2) / 2
    det.bbox.center.theta = 0.0
    det.bbox.size_x = x2 - x1
    det.bbox.size_y = y2 - y1
    det.id = track_id
    return det


def _rosbags_reference(classes, header, xyxy, prompt, score, track_id):
    """rosbags' message classes are frozen dataclasses: built whole."""
    m = classes
    x1, y1, x2, y2 = xyxy
    time = m("builtin_interfaces/msg/Time")(sec=header.stamp.sec, nanosec=header.stamp.nanosec)
    hdr = m("std_msgs/msg/Header")(stamp=time, frame_id=header.frame_id)
    point = m("geometry_msgs/msg/Point")(x=0.0, y=0.0, z=0.0)
    quat = m("geometry_msgs/msg/Quaternion")(x=0.0, y=0.0, z=0.0, w=1.0)
    pose = m("geometry_msgs/msg/PoseWithCovariance")(pose=m("geometry_msgs/msg/Pose")(position=point,
                                                                                       orientation=quat),
                                                     covariance=np.zeros(36))
    hyp = m("vision_msgs/msg/ObjectHypothesisWithPose")(
        hypothesis=m("vision_msgs/msg/ObjectHypothesis")(class_id=prompt, score=score), pose=pose)
    middle = m("vision_msgs/msg/Point2D")(x=(x1 + x2) / 2, y=(y1 + y2) / 2)
    centre = m("vision_msgs/msg/Pose2D")(position=middle, theta=0.0)
    bbox = m("vision_msgs/msg/BoundingBox2D")(center=centre, size_x=x2 - x1, size_y=y2 - y1)
    return m(DETECTION_2D)(header=hdr, results=[hyp], bbox=bbox, id=track_id)


CASES = [
    ((10.5, 20.25, 110.0, 220.75), "a red backpack", 0.875, 7, "7"),
    ((0.0, 0.0, 1.0, 1.0), "ä ünïcode prompt – ok", 1.0, 123456789, "123456789"),
    ((3.0, 4.0, 5.0, 6.0), "x", 0.0, -1, ""),  # tracking off: id ""
]


@pytest.mark.parametrize("serializer", ["rclpy", "rosbags"])
@pytest.mark.parametrize(("xyxy", "prompt", "score", "track", "track_text"), CASES)
def test_target_bytes_equal_the_serializers(serializer, xyxy, prompt, score, track, track_text,
                                            requires_vision_msgs) -> None:
    classes, serialize = SERIALIZERS[serializer]
    header = _header(frame_id="cam" if track < 0 else "camera_color_optical_frame")
    build = _rosbags_reference if serializer == "rosbags" else _reference
    reference = serialize(build(classes, header, xyxy, prompt, score, track_text), DETECTION_2D)
    _assert_same(lambda: target_to_cdr(header, xyxy, prompt, score, track), reference, serializer)


def test_target_round_trips_through_rclpy(requires_vision_msgs) -> None:
    from rclpy.serialization import deserialize_message
    from vision_msgs.msg import Detection2D

    data = target_to_cdr(_header(), (10.0, 20.0, 50.0, 100.0), "a cup", 0.5, 9)
    msg = deserialize_message(data, Detection2D)
    assert msg.id == "9" and msg.results[0].hypothesis.class_id == "a cup"
    assert (msg.bbox.center.position.x, msg.bbox.center.position.y, msg.bbox.size_x, msg.bbox.size_y) == \
        (30.0, 60.0, 40.0, 80.0)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (12, 345)


def test_target_of_a_frame_choice(requires_vision_msgs) -> None:
    from rclpy.serialization import deserialize_message
    from vision_msgs.msg import Detection2D

    dets = Detections.from_arrays([[0, 0, 10, 10], [20, 20, 40, 60]], [0.9, 0.4], [0, 0])
    sel = TargetSelector()
    sel.select(7)
    dets = dets.with_tracker_id([5, 7])
    choice = sel.choose(dets, ["a backpack"], 0.0)
    msg = deserialize_message(target_cdr(choice, dets, _header()), Detection2D)
    assert msg.id == "7" and msg.results[0].hypothesis.class_id == "a backpack"
    assert msg.bbox.center.position.x == 30.0 and msg.results[0].hypothesis.score == pytest.approx(0.4)
    sel.select(8)
    assert target_cdr(sel.choose(dets, ["a backpack"], 0.0), dets, _header()) is None


def test_non_finite_target_refused() -> None:
    with pytest.raises(MessageConversionError):
        target_to_cdr(_header(), (0.0, 0.0, float("nan"), 1.0), "a", 0.5, 1)


def test_target_pose_follows_the_chosen_track(requires_vision_msgs) -> None:
    from geometry_msgs.msg import PoseStamped
    from rclpy.serialization import deserialize_message

    from probench.spatial.depth import Detections3D
    from probench.spatial.target import target_pose_cdr_for

    boxes = [[0, 0, 10, 10], [20, 20, 40, 60], [50, 0, 60, 10]]
    dets = Detections.from_arrays(boxes, [0.9, 0.4, 0.8], [0, 0, 0]).with_tracker_id([5, 7, 9])
    est = Detections3D(np.array([[0.1, 0.2, 1.5], [0.3, 0.4, 2.5]]), np.ones((2, 3)), np.array([0, 1]),
                       np.array([5, 7]))  # the third box got no depth
    sel = TargetSelector()

    def pose() -> PoseStamped:
        data = target_pose_cdr_for(sel.choose(dets, ["a"], 0.0), est, _header())
        return deserialize_message(data, PoseStamped)

    assert pose().pose.position.z == 1.5  # the default, the best: track 5
    sel.select(7)
    got = pose()
    assert (got.pose.position.x, got.pose.position.z) == (0.3, 2.5)
    assert got.header.frame_id == _header().frame_id
    sel.select(9)  # the operator's track has no 3D estimate: no pose (not another object's)
    assert target_pose_cdr_for(sel.choose(dets, ["a"], 0.0), est, _header()) is None
    sel.select(11)  # not in view: no target at all
    assert target_pose_cdr_for(sel.choose(dets, ["a"], 0.0), est, _header()) is None
