"""What `probench node watch` shows of each output, without rclpy (console/watch.py): the QoS
each watched topic needs, read from the node's TOPICS (the latched ones transient-local), the
records of each message kind and their one line, and the decoding of mask images and point
clouds as the node writes them (msgs/masks.py's encoders)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from probench.console import watch
from probench.msgs.masks import mono_image_to_cdr, points_to_cdr

HEADER = SimpleNamespace(stamp=SimpleNamespace(sec=3, nanosec=5), frame_id="cam")


def test_watched_topics_and_their_qos() -> None:
    assert watch.watched_topics(["detections"]) == ["detections"]
    every = watch.watched_topics()
    assert {"detections", "detections_3d", "target", "target_pose", "target_points",
            "segmentation/instances", "segmentation/label_info"} <= set(every)
    latched = {t for t in every if watch.topic_qos(t)[0]}
    assert latched == {"target", "segmentation/label_info"}  # the node's transient-local outputs
    assert watch.topic_qos("detections") == (False, 10) and watch.topic_qos("target_points") == (False, 1)
    assert watch.parse_kinds("3d, masks") == ["3d", "masks"] and watch.parse_kinds(None) is None
    with pytest.raises(ValueError, match="--only takes detections, 3d, masks, target"):
        watch.parse_kinds("boxes")


def test_records_and_lines() -> None:
    dets = watch.detections_record(3.000000005, np.array([[10.0, 20.0, 30.0, 60.0]]), np.array([0.875]),
                                   ["a \x1b[31mcup"], ["7"])
    assert dets["detections"] == [{"class": "a \x1b[31mcup", "score": 0.875, "id": "7",
                                   "centre": [20.0, 40.0], "size": [20.0, 40.0]}]
    line = watch.record_line(dets)
    assert line.startswith("3.000000 detections") and "#7 0.88 @(20,40)" in line and "\x1b" not in line
    d3 = watch.detections_3d_record(3.0, "cam", ["a cup"], [0.9], ["7"], np.array([[0.3, 0.0, 0.4]]),
                                    np.array([[0.1, 0.1, 0.1]]))
    assert d3["detections"][0]["distance"] == 0.5
    assert "'a cup' #7 at (0.30, 0.00, 0.40) m (0.50 m)" in watch.record_line(d3)
    tgt = watch.target_record(3.0, "7", "a cup", 0.9, (10.0, 20.0, 30.0, 60.0))
    assert watch.record_line(tgt).endswith("track 7: 'a cup' 0.90 @(20,40)")
    pose = watch.pose_record(3.0, "cam", (3, 0, 4))
    assert "(3.00, 0.00, 4.00) m in 'cam' (5.00 m away)" in watch.record_line(pose)
    pts = watch.points_record(3.0, "cam", np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 3.0], [np.nan, 0.0, 0.0]]))
    assert pts["points"] == 2 and pts["centre"] == [0.5, 0.0, 2.0] and pts["extent"] == [1.0, 0.0, 2.0]
    json.dumps([dets, d3, tgt, pts])  # every record is JSON as it is


def test_mask_records_name_instances_and_classes() -> None:
    inst = np.zeros((4, 6), np.uint16)
    inst[0, :3], inst[2:, 4:] = 1, 2
    dets = {"detections": [{"class": "a cup", "id": "7"}, {"class": "a door", "id": ""}]}
    rec = watch.mask_record("segmentation/instances", 3.0, inst, detections=dets)
    assert rec["instances"] == [{"instance": 1, "pixels": 3, "class": "a cup", "id": "7"},
                                {"instance": 2, "pixels": 4, "class": "a door", "id": ""}]
    assert "2 instances: 1 'a cup' #7 3 px; 2 'a door' 4 px" in watch.record_line(rec)
    sem = watch.mask_record("segmentation/semantic", 3.0, inst.astype(np.uint8), ["background", "a cup"])
    assert [c["class"] for c in sem["classes"]] == ["a cup", ""]  # value 2: not in the class map
    conf = watch.mask_record("segmentation/confidence", 3.0, np.array([[0, 255], [51, 0]], np.uint8))
    assert conf["pixels"] == 2 and conf["mean"] == 0.6
    assert "unreadable: bad" in watch.record_line({"topic": "target_points", "stamp": 1.0, "error": "bad"})


def _cdr_image_fields(data: bytes) -> tuple[int, int, str, int, int, bytes]:
    """(height, width, encoding, is_bigendian, step, pixels) of a serialized mono Image, read
    with the rosbags typestore (an independent reader)."""
    from probench.bags.typestore import typestore

    msg = typestore().deserialize_cdr(data, "sensor_msgs/msg/Image")
    return msg.height, msg.width, msg.encoding, msg.is_bigendian, msg.step, bytes(msg.data)


def test_decoding_what_the_node_writes() -> None:
    from probench.bags.typestore import typestore

    image = (np.arange(12, dtype=np.uint16).reshape(3, 4) * 1000)
    h, w, enc, big, step, data = _cdr_image_fields(mono_image_to_cdr(image, HEADER))
    assert np.array_equal(watch.mono_pixels(data, h, w, step, enc, bool(big)), image)
    with pytest.raises(ValueError, match="do not hold"):
        watch.mono_pixels(data[:-2], h, w, step, enc, bool(big))
    with pytest.raises(ValueError, match="not a mask image"):
        watch.mono_pixels(data, h, w, step, "rgb8", False)
    xyz = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, 3.0]], np.float32)
    cloud = typestore().deserialize_cdr(points_to_cdr(xyz, HEADER), "sensor_msgs/msg/PointCloud2")
    fields = {f.name: (f.offset, f.datatype) for f in cloud.fields}
    got = watch.xyz_points(bytes(cloud.data), fields, cloud.point_step, cloud.width * cloud.height,
                           bool(cloud.is_bigendian))
    assert np.array_equal(got, xyz.astype(np.float64))
