"""RGB-D bags like a depth camera's (colour, aligned depth, CameraInfo), written with
``rosbags`` itself, from the synthetic scene of :mod:`probench.spatial.synthetic`: objects
moving in front of a wall at known 3D positions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from helpers.camera_bags import CAMERA, PERIOD, STAMP_OFFSET, T0
from probench.spatial.synthetic import Intrinsics, moving_scene

DEPTH = "/camera/aligned_depth_to_color/image_raw"
INFO = "/camera/aligned_depth_to_color/camera_info"
SECOND_CAMERA = "/camera/ir/image_raw"
K = Intrinsics(fx=80.0, fy=80.0, cx=63.5, cy=47.5, width=128, height=96)


def write_rgbd_bag(
    path: Path,
    n: int = 10,
    *,
    encoding: str = "16UC1",
    depth_delay_ns: int = 5_000_000,
    k_zero: bool = False,
    second_camera: bool = False,
    skip_depth: tuple[int, ...] = (),
    depth_size: tuple[int, int] | None = None,
) -> Path:
    """``n`` frames of :func:`moving_scene` (3 objects) at 30 Hz: colour (rgb8) on CAMERA,
    depth (``encoding``, same stamp, logged ``depth_delay_ns`` after the colour frame) on
    DEPTH, a CameraInfo (``k_zero``: K = 0) on INFO with every depth image. ``skip_depth``:
    frames without depth; ``depth_size``: (h, w) of the depth images when not the colour's."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from probench.spatial.synthetic import encode

    ts = get_typestore(Stores.ROS2_HUMBLE)
    Image, Info = ts.types["sensor_msgs/msg/Image"], ts.types["sensor_msgs/msg/CameraInfo"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    roi = ts.types["sensor_msgs/msg/RegionOfInterest"](
        x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
    )
    k = np.zeros(9) if k_zero else np.array([K.fx, 0, K.cx, 0, K.fy, K.cy, 0, 0, 1], dtype=np.float64)
    messages: list[tuple[int, Any, bytes]] = []
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c_rgb = w.add_connection(CAMERA, "sensor_msgs/msg/Image", typestore=ts)
        c_depth = w.add_connection(DEPTH, "sensor_msgs/msg/Image", typestore=ts)
        c_info = w.add_connection(INFO, "sensor_msgs/msg/CameraInfo", typestore=ts)
        c_ir = (
            w.add_connection(SECOND_CAMERA, "sensor_msgs/msg/Image", typestore=ts) if second_camera else None
        )
        for i in range(n):
            t = T0 + i * PERIOD
            stamp = t - STAMP_OFFSET
            header = Header(
                stamp=Time(sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id="camera_color_optical"
            )
            rgb, depth_m = moving_scene(i, 3, K).render()
            msg = Image(
                header=header,
                height=K.height,
                width=K.width,
                encoding="rgb8",
                is_bigendian=0,
                step=K.width * 3,
                data=rgb.reshape(-1),
            )
            messages.append((t, c_rgb, ts.serialize_cdr(msg, "sensor_msgs/msg/Image")))
            if c_ir is not None:
                messages.append((t, c_ir, ts.serialize_cdr(msg, "sensor_msgs/msg/Image")))
            if i in skip_depth:
                continue
            if depth_size is not None:
                depth_m = depth_m[: depth_size[0], : depth_size[1]]
            data = encode(depth_m, encoding)
            dmsg = Image(
                header=header,
                height=data.shape[0],
                width=data.shape[1],
                encoding=encoding,
                is_bigendian=0,
                step=data.shape[1] * data.itemsize,
                data=data.view(np.uint8).reshape(-1),
            )
            messages.append((t + depth_delay_ns, c_depth, ts.serialize_cdr(dmsg, "sensor_msgs/msg/Image")))
            info = Info(
                header=header,
                height=K.height,
                width=K.width,
                distortion_model="plumb_bob",
                d=np.zeros(5),
                k=k,
                r=np.eye(3).reshape(-1),
                p=np.zeros(12),
                binning_x=0,
                binning_y=0,
                roi=roi,
            )
            messages.append(
                (t + depth_delay_ns, c_info, ts.serialize_cdr(info, "sensor_msgs/msg/CameraInfo"))
            )
        for t, conn, raw in sorted(messages, key=lambda m: m[0]):
            w.write(conn, t, raw)
    return path
