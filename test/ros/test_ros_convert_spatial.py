"""Track ids in Detection2D.id, and the 3D messages: the same message from rclpy's classes
(the node) and from the rosbags typestore (``probench ground``). Compared as rclpy reads the
bytes back (and by length): Fast CDR leaves alignment padding unset, so the bytes of two
serializations of one message may differ in the padding alone."""

from __future__ import annotations

import numpy as np
import pytest

from probench.detections import Detections
from probench.spatial.depth import Detections3D

PROMPTS = ["a red cup", "the door", "x"]


def _header(sec: int = 12, nanosec: int = 345, frame_id: str = "cam_optical") -> object:
    from std_msgs.msg import Header

    h = Header(frame_id=frame_id)
    h.stamp.sec, h.stamp.nanosec = sec, nanosec
    return h


def _dets(n: int, seed: int = 0) -> Detections:
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 100, (n, 2))
    return Detections.from_arrays(np.hstack([corner, corner + rng.uniform(1, 50, (n, 2))]),
                                  rng.uniform(0, 1, n), rng.integers(0, len(PROMPTS), n))


@pytest.mark.parametrize("n", [0, 1, 7, 60])
def test_track_ids_in_the_cdr_bytes_match_rclpy(requires_vision_msgs, n: int) -> None:
    from rclpy.serialization import deserialize_message, serialize_message
    from vision_msgs.msg import Detection2DArray

    from probench.ros import convert

    dets = _dets(n, seed=n)
    ids = np.arange(n, dtype=np.int64) * 37 - 1  # -1 (no id), then ids of growing length
    header = _header()
    msg = convert.detections_to_msg(dets, header, PROMPTS, max_detections=50, track_ids=ids)
    data = convert.detections_to_cdr(dets, header, PROMPTS, max_detections=50, track_ids=ids)
    assert len(data) == len(serialize_message(msg))
    assert deserialize_message(data, Detection2DArray) == msg
    order = convert.top_order(dets, 50)
    assert [d.id for d in msg.detections] == [str(i) if i >= 0 else "" for i in ids[order]]


def _est(dets: Detections) -> Detections3D:
    n = len(dets)
    rng = np.random.default_rng(1)
    rows = np.arange(0, n, 2)
    return Detections3D(rng.uniform(-2, 4, (len(rows), 3)), rng.uniform(0, 1, (len(rows), 3)), rows,
                        np.where(rows % 4 == 0, rows + 100, -1), without_depth=n - len(rows))


@pytest.mark.parametrize("n", [0, 1, 9])
def test_3d_messages_same_bytes_from_rclpy_and_the_typestore(requires_vision_msgs, n: int) -> None:
    from geometry_msgs.msg import PoseStamped
    from rclpy.serialization import deserialize_message, serialize_message
    from vision_msgs.msg import Detection3DArray

    from probench.bags.typestore import vision_typestore
    from probench.msgs.spatial import (
        DETECTION_3D_ARRAY,
        POSE_STAMPED,
        SPATIAL_TYPES,
        detections_3d_message,
        target_pose_message,
    )
    from probench.ros.convert.spatial import detections_3d_to_msg, target_pose_to_msg

    ts = vision_typestore()
    dets = _dets(n)
    est = _est(dets)
    header = _header()
    ros_msg = detections_3d_to_msg(est, dets, header, PROMPTS)
    store_types = {name: ts.types[name] for name in SPATIAL_TYPES}
    Time, Header = ts.types["builtin_interfaces/msg/Time"], ts.types["std_msgs/msg/Header"]
    store_header = Header(stamp=Time(sec=12, nanosec=345), frame_id="cam_optical")
    store_msg = detections_3d_message(store_types, est, dets, store_header, PROMPTS)
    store_bytes = bytes(ts.serialize_cdr(store_msg, DETECTION_3D_ARRAY))
    assert len(store_bytes) == len(serialize_message(ros_msg))
    assert deserialize_message(store_bytes, Detection3DArray) == ros_msg
    assert len(ros_msg.detections) == len(est)
    rows = zip(ros_msg.detections, est.centre, est.size, est.index, est.track_id, strict=True)
    for d, c, size, row, tid in rows:
        assert (d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.center.position.z) == tuple(c)
        assert (d.bbox.size.x, d.bbox.size.y, d.bbox.size.z) == tuple(size)
        assert d.id == (str(tid) if tid >= 0 else "")
        assert d.results[0].hypothesis.class_id == PROMPTS[dets.prompt_index[row]]
        assert d.results[0].hypothesis.score == dets.scores[row]
    pose = target_pose_to_msg(est, dets, header)
    store_pose = target_pose_message(store_types, est, dets, store_header)
    assert (pose is None) == (store_pose is None)
    if pose is not None:
        assert deserialize_message(bytes(ts.serialize_cdr(store_pose, POSE_STAMPED)), PoseStamped) == pose
        first = [i for i in range(len(est)) if dets.prompt_index[est.index[i]] == 0]
        best = max(first, key=lambda i: dets.scores[est.index[i]])
        assert pose.pose.position.z == est.centre[best, 2]


def test_markers_box_and_label_per_estimate(requires_vision_msgs) -> None:
    from probench.ros.convert.spatial import markers_to_msg

    dets = _dets(5)
    est = _est(dets)
    msg = markers_to_msg(est, dets, _header(), PROMPTS)
    assert msg.markers[0].action == msg.markers[0].DELETEALL
    boxes = [m for m in msg.markers if m.ns == "boxes"]
    labels = [m for m in msg.markers if m.ns == "labels"]
    assert len(boxes) == len(labels) == len(est) == 3
    assert labels[0].text == f"{PROMPTS[dets.prompt_index[0]]} #100 {np.linalg.norm(est.centre[0]):.2f} m"
    assert "#" not in labels[1].text  # no track id
