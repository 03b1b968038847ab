"""The output bag is what a ROS 2 system reads: every message deserializes with the real
ROS 2 message classes (what `ros2 bag play` publishes are these bytes), and the bag's type
hashes are the installed vision_msgs' own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.camera_bags import write_camera_bag

pytestmark = [pytest.mark.ros, pytest.mark.usefixtures("requires_vision_msgs")]


def test_messages_deserialize_with_rclpy(tmp_path: Path, ground) -> None:
    from rclpy.serialization import deserialize_message
    from rosbags.rosbag2 import Reader
    from sensor_msgs.msg import CompressedImage
    from std_msgs.msg import Header
    from vision_msgs.msg import Detection2DArray, LabelInfo

    bag = write_camera_bag(tmp_path / "bag", n=10)
    rc, _, err = ground("--bag", bag, "--model", "test-slow-100ms", "--prompt", "a cup; a door",
                        "--score-threshold", "0", "--out", tmp_path / "o", "--realtime")
    assert rc == 0, err
    classes = {"vision_msgs/msg/Detection2DArray": Detection2DArray, "vision_msgs/msg/LabelInfo": LabelInfo,
               "sensor_msgs/msg/CompressedImage": CompressedImage, "std_msgs/msg/Header": Header}
    seen: dict[str, int] = {}
    with Reader(tmp_path / "o") as reader:
        for conn, _, raw in reader.messages():
            msg = deserialize_message(raw, classes[conn.msgtype])
            seen[conn.msgtype] = seen.get(conn.msgtype, 0) + 1
            if conn.msgtype.endswith("Detection2DArray"):
                assert all(d.results[0].hypothesis.class_id in ("a cup", "a door") for d in msg.detections)
            if conn.msgtype.endswith("LabelInfo"):
                assert [c.class_name for c in msg.class_map] == ["a cup", "a door"]
    assert seen["vision_msgs/msg/Detection2DArray"] == 10 and seen["sensor_msgs/msg/CompressedImage"] == 10
    assert seen["std_msgs/msg/Header"] >= 1  # realtime: the dropped frames' marks


def test_type_hashes_are_the_installed_packages(tmp_path: Path, ground) -> None:
    import vision_msgs
    from rosbags.rosbag2 import Reader

    bag = write_camera_bag(tmp_path / "bag", n=1)
    rc, _, err = ground("--bag", bag, "--model", "test-instant", "--prompt", "a cup", "--out", tmp_path / "o")
    assert rc == 0, err
    share = Path(vision_msgs.__file__).resolve()
    found = next(p for p in share.parents if (p / "share" / "vision_msgs" / "msg").is_dir())
    checked = []
    with Reader(tmp_path / "o") as reader:
        for conn in reader.connections:
            if conn.msgtype.startswith("vision_msgs/"):
                checked.append(conn.msgtype)
                name = conn.msgtype.rsplit("/", 1)[1]
                desc = json.loads((found / "share/vision_msgs/msg" / f"{name}.json").read_text())
                hashes = {h["type_name"]: h["hash_string"] for h in desc["type_hashes"]}
                assert conn.digest == hashes[conn.msgtype], conn.msgtype
    assert sorted(checked) == ["vision_msgs/msg/Detection2DArray", "vision_msgs/msg/LabelInfo"]
