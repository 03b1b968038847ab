"""The synthetic RGB-D camera's scene and its recorded bag: panels at their known depths,
colour and depth registered (same pixels, same K), K scaled to the frame size, noise
reproducible per frame, and a bag that holds colour, 16UC1 depth and CameraInfo with one
header per frame (read back with rosbags)."""

from __future__ import annotations

import numpy as np
import pytest

from probench.spatial.errors import SpatialError
from probench.spatial.rgbd_scene import (
    PANELS,
    WALL_Z,
    RgbdCamera,
    camera_intrinsics,
    camera_scene,
    write_rgbd_bag,
)


def test_panels_at_their_depths_registered_to_the_colour() -> None:
    scene = camera_scene(640, 480)
    frame = RgbdCamera(scene).frame(0)
    assert frame.rgb.shape == (480, 640, 3) and frame.depth_mm.shape == (480, 640)
    assert frame.depth_mm.dtype == np.uint16
    for (_, colour, _, z), box in zip(PANELS, scene.boxes(), strict=True):
        x1, y1, x2, y2 = (round(float(v)) for v in box)
        inner = (slice(y1 + 2, y2 - 2), slice(x1 + 2, x2 - 2))
        assert np.all(frame.depth_mm[inner] == round(z * 1000))  # the panel's depth, in mm
        assert np.all(frame.rgb[inner] == colour)  # ... where the colour image shows the panel
    assert frame.depth_mm[5, 320] == WALL_Z * 1000 and tuple(frame.rgb[5, 320]) == scene.wall_colour
    assert np.array_equal(np.unique(frame.depth_mm), [1500, 2500, 3200, 4000])


def test_k_scales_with_the_frame_size() -> None:
    k = camera_intrinsics(320, 240)
    assert (k.fx, k.fy, k.cx, k.cy) == (262.5, 262.5, 159.5, 119.5)
    small, big = camera_scene(320, 240).boxes(), camera_scene(640, 480).boxes()
    assert small == pytest.approx(big / 2, abs=1.0)  # the same view, half the pixels


def test_noise_and_holes_reproducible_per_frame() -> None:
    cam = RgbdCamera(camera_scene(160, 120), noise_rel=0.01, invalid_share=0.05)
    a, b, again = cam.frame(3).depth_mm, cam.frame(4).depth_mm, cam.frame(3).depth_mm
    assert np.array_equal(a, again) and not np.array_equal(a, b)
    assert 0.03 < float(np.mean(a == 0)) < 0.07
    clean = RgbdCamera(camera_scene(160, 120)).frame(3).depth_mm.astype(float)
    valid = a > 0
    rel = np.abs(a[valid] - clean[valid]) / clean[valid]
    assert 0.005 < float(np.std(rel)) < 0.015
    for bad in ({"noise_rel": -0.1}, {"noise_rel": 0.5}, {"invalid_share": 1.0}):
        with pytest.raises(SpatialError):
            RgbdCamera(camera_scene(160, 120), **bad)  # type: ignore[arg-type]


def test_recorded_bag_holds_registered_colour_depth_and_info(tmp_path) -> None:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    cam = RgbdCamera(camera_scene(128, 96))
    out = write_rgbd_bag(tmp_path / "rgbd", cam, 5, 10.0, colour_topic="/cam/color/image_raw",
                         depth_topic="/cam/depth/image_raw", info_topic="/cam/depth/camera_info")
    ts = get_typestore(Stores.ROS2_HUMBLE)
    seen: dict[str, list] = {}
    with Reader(out) as r:
        for conn, t, raw in r.messages():
            seen.setdefault(conn.topic, []).append((t, ts.deserialize_cdr(raw, conn.msgtype)))
    assert {k: len(v) for k, v in seen.items()} == {"/cam/color/image_raw": 5, "/cam/depth/image_raw": 5,
                                                     "/cam/depth/camera_info": 5}
    for (tc, colour), (td, depth), (_, info) in zip(*seen.values(), strict=True):
        assert tc == td and colour.header.stamp == depth.header.stamp == info.header.stamp
        assert depth.encoding == "16UC1" and (depth.width, depth.height) == (colour.width, colour.height)
        assert list(info.k) == [105.0, 0.0, 63.5, 0.0, 105.0, 47.5, 0.0, 0.0, 1.0]
        mm = np.frombuffer(depth.data.tobytes(), np.uint16).reshape(96, 128)
        assert np.array_equal(mm, cam.frame(0).depth_mm)
    assert seen["/cam/color/image_raw"][1][0] - seen["/cam/color/image_raw"][0][0] == 100_000_000  # 10 Hz
    with pytest.raises(SpatialError, match="exists"):
        write_rgbd_bag(out, cam, 5, 10.0, colour_topic="/a", depth_topic="/b", info_topic="/c")
