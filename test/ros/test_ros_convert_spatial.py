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
    dets = dets.with_tracker_id(ids)
    msg = convert.detections_to_msg(dets, header, PROMPTS, max_detections=50)
    data = convert.detections_to_cdr(dets, header, PROMPTS, max_detections=50)
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


def _typestore_3d(ts, est: Detections3D, dets: Detections, prompts: list[str]):
    """The same Detection3DArray built field by field with the rosbags typestore's classes."""
    T = ts.types
    header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=12, nanosec=345),
                                      frame_id="cam_optical")

    def pose(c):
        point = T["geometry_msgs/msg/Point"](x=c[0], y=c[1], z=c[2])
        identity = T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)
        return T["geometry_msgs/msg/Pose"](position=point, orientation=identity)

    out = []
    rows = zip(est.centre.tolist(), est.size.tolist(), est.index, est.track_id, strict=True)
    for c, size, row, tid in rows:
        hyp = T["vision_msgs/msg/ObjectHypothesis"](class_id=prompts[dets.prompt_index[row]],
                                                    score=float(dets.scores[row]))
        with_cov = T["geometry_msgs/msg/PoseWithCovariance"](pose=pose(c), covariance=np.zeros(36))
        res = T["vision_msgs/msg/ObjectHypothesisWithPose"](hypothesis=hyp, pose=with_cov)
        extent = T["geometry_msgs/msg/Vector3"](x=size[0], y=size[1], z=size[2])
        bbox = T["vision_msgs/msg/BoundingBox3D"](center=pose(c), size=extent)
        out.append(T["vision_msgs/msg/Detection3D"](header=header, results=[res], bbox=bbox,
                                                    id=str(tid) if tid >= 0 else ""))
    return header, T["vision_msgs/msg/Detection3DArray"](header=header, detections=out), pose


@pytest.mark.parametrize("n", [0, 1, 9])
def test_3d_bytes_equal_the_typestore_and_read_in_rclpy(requires_vision_msgs, n: int) -> None:
    from geometry_msgs.msg import PoseStamped
    from rclpy.serialization import deserialize_message, serialize_message
    from vision_msgs.msg import Detection3DArray

    from probench.bags.typestore import vision_typestore
    from probench.spatial.messages import DETECTION_3D_ARRAY, POSE_STAMPED, detections_3d_cdr, target_pose_cdr

    ts = vision_typestore()
    dets = _dets(n)
    est = _est(dets)
    data = detections_3d_cdr(est, dets, _header(), PROMPTS)
    store_header, store_msg, pose = _typestore_3d(ts, est, dets, PROMPTS)
    assert data == bytes(ts.serialize_cdr(store_msg, DETECTION_3D_ARRAY))  # exact
    msg = deserialize_message(data, Detection3DArray)
    assert len(data) == len(serialize_message(msg))  # rclpy leaves the padding unset: lengths
    assert len(msg.detections) == len(est)
    rows = zip(msg.detections, est.centre, est.size, est.index, est.track_id, strict=True)
    for d, c, size, row, tid in rows:
        assert (d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.center.position.z) == tuple(c)
        assert d.results[0].pose.pose.position == d.bbox.center.position
        assert (d.bbox.size.x, d.bbox.size.y, d.bbox.size.z) == tuple(size)
        assert d.id == (str(tid) if tid >= 0 else "") and d.header.frame_id == "cam_optical"
        assert d.results[0].hypothesis.class_id == PROMPTS[dets.prompt_index[row]]
        assert d.results[0].hypothesis.score == dets.scores[row]
    pose_bytes = target_pose_cdr(est, dets, _header())
    first = [i for i in range(len(est)) if dets.prompt_index[est.index[i]] == 0]
    assert (pose_bytes is None) == (not first)
    if pose_bytes is not None:
        best = max(first, key=lambda i: dets.scores[est.index[i]])
        store_pose = ts.types[POSE_STAMPED](header=store_header, pose=pose(est.centre[best].tolist()))
        assert pose_bytes == bytes(ts.serialize_cdr(store_pose, POSE_STAMPED))
        assert deserialize_message(pose_bytes, PoseStamped).pose.position.z == est.centre[best, 2]


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
