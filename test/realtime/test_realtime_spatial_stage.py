"""The node's spatial stage without ROS: depth paired by stamp (StampedMap with a tolerance),
tracking in the frame's timings, and the reasons 3D waits."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from probench.detections import Detections
from probench.realtime.grounding_worker import StampedMap
from probench.realtime.spatial_stage import (
    DEPTH_STAGE,
    TRACK_STAGE,
    DepthFields,
    SpatialSettings,
    SpatialStage,
)

MS = 1_000_000
K = [50.0, 0, 31.5, 0, 50.0, 23.5, 0, 0, 1]


def test_stamped_map_pairs_the_nearest_within_the_tolerance():
    m: StampedMap[str] = StampedMap(capacity=8)
    for stamp in (100 * MS, 133 * MS, 166 * MS):
        m.put(stamp, f"d{stamp // MS}")
    assert m.take(140 * MS, tolerance_ns=10 * MS) == "d133"  # nearest, 7 ms off
    assert len(m) == 1  # the older one (100) is forgotten, as is the one taken
    assert m.take(190 * MS, tolerance_ns=10 * MS) is None  # 24 ms off: no pair
    assert m.take(1, tolerance_ns=0) is None


def test_stamped_map_waits_for_a_late_value_and_gives_up_after_wait_s():
    m: StampedMap[str] = StampedMap()
    m.put(0, "first")  # the stream is in use
    threading.Timer(0.05, lambda: m.put(200 * MS, "late")).start()
    t0 = time.monotonic()
    assert m.take(200 * MS, wait_s=2.0, tolerance_ns=5 * MS) == "late"
    assert time.monotonic() - t0 < 1.0
    t0 = time.monotonic()
    assert m.take(300 * MS, wait_s=0.2, tolerance_ns=5 * MS) is None  # never comes
    assert 0.15 < time.monotonic() - t0 < 1.0
    assert m.bound == 1 and m.unbound == 1


def _depth(stamp_ns: int, h: int = 48, w: int = 64, encoding: str = "16UC1", mm: int = 2000) -> DepthFields:
    data = np.full((h, w), mm, np.uint16).tobytes()
    return DepthFields(stamp_ns, h, w, encoding, 0, w * 2, data)


DETS = Detections(np.array([[10.0, 10, 30, 30], [40, 20, 60, 40]]), np.array([0.9, 0.5]), np.array([0, 1]))


def test_track_then_locate():
    st = SpatialStage(SpatialSettings(depth=True, tracking=True, tolerance_s=0.01, min_depth_pixels=10))
    assert st.put_camera_info(K, 64, 48) is None
    for i in range(2):
        dets, ids = st.track(DETS, ("a", "b"), i * 33 * MS)
        assert TRACK_STAGE in dets.timings_ms
        st.put_depth(_depth(i * 33 * MS + 2 * MS))
        est, ms, problem = st.locate(dets, ids, i * 33 * MS, (48, 64))
        assert problem is None and est is not None and ms > 0
    assert list(ids) == list(est.track_id) and (ids >= 0).all()
    assert est.centre[:, 2] == pytest.approx([2.0, 2.0])
    assert st.diagnostics()["coverage_3d"] == 1.0 and DEPTH_STAGE == "depth_3d"


def test_why_3d_waits_said_once_each():
    st = SpatialStage(SpatialSettings(depth=True, tracking=False, tolerance_s=0.0))
    _, ids = st.track(DETS, ("a", "b"), 0)
    assert list(ids) == [-1, -1]
    st.put_depth(_depth(0))
    assert st.locate(DETS, ids, 0, (48, 64))[2] == "no CameraInfo received yet"
    st.put_depth(_depth(1))
    assert st.locate(DETS, ids, 1, (48, 64))[2] is None  # said already
    assert st.waiting == "no CameraInfo received yet"
    assert "not calibrated" in (st.put_camera_info([0.0] * 9, 64, 48) or "")
    assert st.put_camera_info([0.0] * 9, 64, 48) is None  # once
    st.put_camera_info(K, 64, 48)
    st.put_depth(_depth(2, 24, 32))
    assert "sizes differ: colour 64x48, depth 32x24" in st.locate(DETS, ids, 2, (48, 64))[2]
    st.put_depth(_depth(3, encoding="bgr8"))
    assert "depth encoding 'bgr8' is not supported" in st.locate(DETS, ids, 3, (48, 64))[2]
    assert "no depth image within 0.0 s" in st.locate(DETS, ids, 4, (48, 64))[2]
    d = st.diagnostics()
    assert d["depth_errors"] == 1 and d["frames_without_depth"] == 1 and d["coverage_3d"] == 0.0


def test_spatial_labels_for_drawing():
    from probench.realtime.spatial_stage import spatial_labels
    from probench.spatial.depth import Detections3D

    est = Detections3D(np.array([[0.0, 0.0, 2.0]]), np.ones((1, 3)), np.array([1]), np.array([4]))
    assert spatial_labels(3, np.array([-1, 4, 9]), est) == ["", "#4 2.00 m", "#9"]
    assert spatial_labels(2, None, est) == ["", "2.00 m"]
    assert spatial_labels(2, None, None) is None
