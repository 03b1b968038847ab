"""The synthetic RGB-D camera's scene, to try 3D without a depth camera: what
``python -m probench.ros.synthetic_camera --depth`` publishes and ``--record`` writes into
a bag.

The scene (:func:`camera_scene`) is a grey wall 4 m away and three flat panels facing the
camera at known depths: red at 1.5 m (left), green at 2.5 m (middle), blue at 3.2 m
(right), each 0.5 m tall and wider than its lane, rendered by
:mod:`probench.spatial.synthetic` through a pinhole camera whose K scales with the frame size
(525 px focal length at 640x480). The depth image is registered to the colour image (same
size, same K, same header), ``16UC1`` millimetres, 0 where invalid; optional Gaussian noise
and invalid pixels are drawn from a generator seeded by the frame number, so every frame
is reproducible.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probench.spatial.depth import Intrinsics
from probench.spatial.errors import SpatialError
from probench.spatial.synthetic import Box3D, Scene, degrade, encode

DEPTH_ENCODING = "16UC1"
FRAME_ID = "synthetic_camera_optical_frame"
# (name, colour, lane centre as a share of the view's width from its centre, depth in m)
PANELS = (("red panel", (210, 40, 40), -0.3, 1.5), ("green panel", (40, 180, 60), 0.0, 2.5),
          ("blue panel", (50, 70, 220), 0.3, 3.2))
WALL_Z = 4.0


def camera_intrinsics(width: int, height: int) -> Intrinsics:
    """The synthetic camera's K for a frame size: 525 px focal length at 640 px wide, scaled."""
    f = 525.0 * width / 640.0
    return Intrinsics(fx=f, fy=f, cx=(width - 1) / 2.0, cy=(height - 1) / 2.0, width=width, height=height)


def camera_scene(width: int = 640, height: int = 480) -> Scene:
    """The scene of the module docstring, seen by :func:`camera_intrinsics` at ``width`` x ``height``."""
    k = camera_intrinsics(width, height)
    objects = []
    for _, colour, lane, z in PANELS:
        view_w = width / k.fx * z  # metres the view spans at depth z
        objects.append(Box3D((lane * view_w, 0.05 * z, z), 0.28 * view_w, 0.5, 0.0, colour))
    return Scene(tuple(objects), k, wall_z=WALL_Z)


@dataclass(frozen=True)
class RgbdFrame:
    """One frame: rgb8 (H, W, 3), depth 16UC1 (H, W) in millimetres, the scene's K."""

    index: int
    rgb: np.ndarray
    depth_mm: np.ndarray
    k: Intrinsics


class RgbdCamera:
    """Frames of a static scene: the render is done once, noise is added per frame."""

    def __init__(self, scene: Scene, *, noise_rel: float = 0.0, invalid_share: float = 0.0) -> None:
        if not (0.0 <= noise_rel <= 0.2) or not (0.0 <= invalid_share < 1.0):
            raise SpatialError(f"depth noise must be in [0, 0.2] and the invalid share in [0, 1), got "
                               f"{noise_rel:g} and {invalid_share:g}")
        self.scene = scene
        self.noise_rel, self.invalid_share = noise_rel, invalid_share
        self._rgb, self._depth_m = scene.render()

    def frame(self, i: int) -> RgbdFrame:
        depth = self._depth_m
        if self.noise_rel or self.invalid_share:
            depth = degrade(depth, self.noise_rel, self.invalid_share, seed=i)
        return RgbdFrame(i, self._rgb.copy(), encode(depth, DEPTH_ENCODING), self.scene.k)

    def frames(self, n: int) -> Iterator[RgbdFrame]:
        for i in range(n):
            yield self.frame(i)


def k_row_major(k: Intrinsics) -> list[float]:
    return [k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0]


def write_rgbd_bag(path: Path, camera: RgbdCamera, n: int, rate_hz: float, *, colour_topic: str,
                   depth_topic: str, info_topic: str, start_ns: int = 1_700_000_000 * 10**9,
                   label: object = None) -> Path:
    """``n`` frames of ``camera`` at ``rate_hz`` as a rosbag2 (MCAP, written with rosbags):
    colour (rgb8) on ``colour_topic``, depth (16UC1) on ``depth_topic`` and a CameraInfo
    (K, plumb_bob, no distortion) on ``info_topic``, all with the frame's header (stamps from
    ``start_ns``, logged at their stamps). ``label(rgb, i)``, if given, draws on each colour
    frame (the frame number). Refuses a folder that exists (rosbags would)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    if path.exists():
        raise SpatialError(f"{path} exists: give a new folder for the bag")
    if n < 1 or rate_hz <= 0:
        raise SpatialError(f"a bag needs n >= 1 frames at a rate > 0, got n={n}, rate={rate_hz:g}")
    ts = get_typestore(Stores.ROS2_HUMBLE)
    image_t, info_t = ts.types["sensor_msgs/msg/Image"], ts.types["sensor_msgs/msg/CameraInfo"]
    header_t, time_t = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    roi = ts.types["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0,
                                                       do_rectify=False)
    k = camera.scene.k
    period_ns = round(1e9 / rate_hz)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c_rgb = w.add_connection(colour_topic, "sensor_msgs/msg/Image", typestore=ts)
        c_depth = w.add_connection(depth_topic, "sensor_msgs/msg/Image", typestore=ts)
        c_info = w.add_connection(info_topic, "sensor_msgs/msg/CameraInfo", typestore=ts)
        for f in camera.frames(n):
            t = start_ns + f.index * period_ns
            header = header_t(stamp=time_t(sec=t // 10**9, nanosec=t % 10**9), frame_id=FRAME_ID)
            rgb = label(f.rgb, f.index) if callable(label) else f.rgb
            w.write(c_rgb, t, ts.serialize_cdr(image_t(header=header, height=k.height, width=k.width,
                                                       encoding="rgb8", is_bigendian=0, step=k.width * 3,
                                                       data=np.ascontiguousarray(rgb).reshape(-1)),
                                               "sensor_msgs/msg/Image"))
            w.write(c_depth, t, ts.serialize_cdr(image_t(header=header, height=k.height, width=k.width,
                                                         encoding=DEPTH_ENCODING, is_bigendian=0,
                                                         step=k.width * 2,
                                                         data=f.depth_mm.view(np.uint8).reshape(-1)),
                                                 "sensor_msgs/msg/Image"))
            info = info_t(header=header, height=k.height, width=k.width, distortion_model="plumb_bob",
                          d=np.zeros(5), k=np.array(k_row_major(k)), r=np.eye(3).reshape(-1),
                          p=np.array([k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0]),
                          binning_x=0, binning_y=0, roi=roi)
            w.write(c_info, t, ts.serialize_cdr(info, "sensor_msgs/msg/CameraInfo"))
    return path
