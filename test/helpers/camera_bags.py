"""Robot-like bags written with ``rosbags`` itself (not by probench), and reading what
``probench ground`` wrote."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

T0 = 1_700_000_000 * 1_000_000_000  # the bag's first message
PERIOD = 33_333_333  # 30 Hz
STAMP_OFFSET = 7_000_000  # header stamps are 7 ms before the log times, as a driver's would be
CAMERA = "/camera/color/image_raw"


def frame_rgb(i: int, h: int = 48, w: int = 64) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 255 // w, yy * 255 // h, np.full_like(xx, (37 * i) % 256)], axis=2).astype(np.uint8)


def write_camera_bag(
    path: Path,
    n: int = 6,
    *,
    raw: bool = True,
    compressed: bool = False,
    encoding: str = "bgr8",
    prompts: Sequence[tuple[int, str]] = (),
    prompt_topic: str = "/grounding_node/prompt",
    storage: str = "mcap",
    extra_camera: bool = False,
    bad_frame: int | None = None,
) -> Path:
    """A bag like a robot's: ``/camera/color/image_raw`` (``encoding``) and/or its
    ``/compressed`` twin (jpeg), ``n`` frames at 30 Hz from T0, header stamps 7 ms earlier,
    and ``prompts``: (log time offset in ns, text) on ``prompt_topic`` (std_msgs/String).
    ``bad_frame``: that raw frame's data is cut short (a corrupt message mid-bag)."""
    import cv2
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    Image = ts.types["sensor_msgs/msg/Image"]
    Compressed = ts.types["sensor_msgs/msg/CompressedImage"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    String = ts.types["std_msgs/msg/String"]
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as w:
        c_raw = w.add_connection(CAMERA, "sensor_msgs/msg/Image", typestore=ts) if raw else None
        c_jpg = (w.add_connection(f"{CAMERA}/compressed", "sensor_msgs/msg/CompressedImage", typestore=ts)
                 if compressed else None)
        c_depth = (w.add_connection("/camera/depth/image_rect_raw", "sensor_msgs/msg/Image", typestore=ts)
                   if extra_camera else None)
        c_prompt = w.add_connection(prompt_topic, "std_msgs/msg/String", typestore=ts) if prompts else None
        messages: list[tuple[int, Any, bytes]] = []
        for i in range(n):
            t = T0 + i * PERIOD
            stamp = t - STAMP_OFFSET
            header = Header(stamp=Time(sec=stamp // 10**9, nanosec=stamp % 10**9),
                            frame_id="camera_color_optical")
            rgb = frame_rgb(i)
            h, wd = rgb.shape[:2]
            if c_raw is not None:
                if encoding == "bgr8":
                    data = np.ascontiguousarray(rgb[:, :, ::-1]).reshape(-1)
                    step = wd * 3
                else:  # an encoding the node does not know: 4 bytes per pixel
                    data = np.zeros(h * wd * 4, dtype=np.uint8)
                    step = wd * 4
                if i == bad_frame:
                    data = data[: len(data) // 2]
                msg = Image(header=header, height=h, width=wd, encoding=encoding, is_bigendian=0, step=step,
                            data=data)
                messages.append((t, c_raw, ts.serialize_cdr(msg, "sensor_msgs/msg/Image")))
            if c_jpg is not None:
                _, buf = cv2.imencode(".jpg", rgb[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])
                msg = Compressed(header=header, format="rgb8; jpeg compressed bgr8", data=buf.reshape(-1))
                messages.append((t, c_jpg, ts.serialize_cdr(msg, "sensor_msgs/msg/CompressedImage")))
            if c_depth is not None:
                msg = Image(header=header, height=4, width=4, encoding="16UC1", is_bigendian=0, step=8,
                            data=np.zeros(32, dtype=np.uint8))
                messages.append((t, c_depth, ts.serialize_cdr(msg, "sensor_msgs/msg/Image")))
        for offset, text in prompts:
            raw_prompt = ts.serialize_cdr(String(data=text), "std_msgs/msg/String")
            messages.append((T0 + offset, c_prompt, raw_prompt))
        for t, conn, raw_bytes in sorted(messages, key=lambda m: m[0]):
            w.write(conn, t, raw_bytes)
    return path


@dataclass
class Output:
    """What a ground run wrote: the messages of its bag by topic as (log time, message)."""

    path: Path
    topics: dict[str, list[tuple[int, Any]]]
    msgtypes: dict[str, str]
    custom_data: dict[str, str]

    def class_ids(self, topic: str = "/ground/detections") -> list[list[str]]:
        return [[d.results[0].hypothesis.class_id for d in m.detections] for _, m in self.topics[topic]]


def read_output(path: Path) -> Output:
    from rosbags.rosbag2 import Reader
    from ruamel.yaml import YAML

    from probench.bags.typestore import vision_typestore

    ts = vision_typestore()
    topics: dict[str, list[tuple[int, Any]]] = {}
    with Reader(path) as reader:
        msgtypes = {c.topic: c.msgtype for c in reader.connections}
        for conn, t, raw in reader.messages():
            topics.setdefault(conn.topic, []).append((t, ts.deserialize_cdr(raw, conn.msgtype)))
    meta = YAML(typ="safe").load((path / "metadata.yaml").read_text())
    custom = dict(meta["rosbag2_bagfile_information"].get("custom_data") or {})
    return Output(path, topics, msgtypes, custom)
