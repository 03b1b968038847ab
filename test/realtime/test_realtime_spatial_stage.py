"""The node's spatial stage without ROS: depth paired by stamp (StampedMap with a tolerance),
tracking in the frame's timings (the track ids on the detections), and the reasons 3D waits.
Waits run on a stepped clock (a WaitClock whose time moves only while the map waits)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.stepped_clock import SteppedClock
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
    clock = SteppedClock()
    m: StampedMap[str] = StampedMap(clock=clock)
    clock.map = m
    m.put(0, "first")  # the stream is in use
    clock.arrive(0.05, 200 * MS, "late")
    t0 = clock.now
    assert m.take(200 * MS, wait_s=2.0, tolerance_ns=5 * MS) == "late"
    assert clock.now - t0 == pytest.approx(0.05)  # returned when it came, not at the timeout
    t0 = clock.now
    assert m.take(300 * MS, wait_s=0.2, tolerance_ns=5 * MS) is None  # never comes
    assert clock.now - t0 == pytest.approx(0.2)  # gave up after exactly wait_s
    assert m.bound == 1 and m.unbound == 1
    # a stream that sends no stamped values never waits
    idle_clock = SteppedClock()
    idle: StampedMap[str] = StampedMap(clock=idle_clock, in_use_s=5.0)
    assert idle.take(400 * MS, wait_s=2.0) is None and idle_clock.waits == []


def _depth(stamp_ns: int, h: int = 48, w: int = 64, encoding: str = "16UC1", mm: int = 2000) -> DepthFields:
    data = np.full((h, w), mm, np.uint16).tobytes()
    return DepthFields(stamp_ns, h, w, encoding, 0, w * 2, data)


DETS = Detections(np.array([[10.0, 10, 30, 30], [40, 20, 60, 40]]), np.array([0.9, 0.5]), np.array([0, 1]))


def test_track_then_locate():
    st = SpatialStage(SpatialSettings(depth=True, tracking=True, tolerance_s=0.01, min_depth_pixels=10))
    assert st.put_camera_info(K, 64, 48) is None
    for i in range(2):
        dets = st.track(DETS, ("a", "b"), i * 33 * MS)
        assert TRACK_STAGE in dets.timings_ms
        st.put_depth(_depth(i * 33 * MS + 2 * MS))
        est, ms, problem = st.locate(dets, i * 33 * MS, (48, 64))
        assert problem is None and est is not None and ms > 0
    ids = dets.tracker_id
    assert ids is not None and list(ids) == list(est.track_id) and (ids >= 0).all()
    assert est.centre[:, 2] == pytest.approx([2.0, 2.0])
    assert st.diagnostics()["coverage_3d"] == 1.0 and DEPTH_STAGE == "depth_3d"


def test_why_3d_waits_said_once_each():
    st = SpatialStage(SpatialSettings(depth=True, tracking=False, tolerance_s=0.0))
    dets = st.track(DETS, ("a", "b"), 0)
    assert dets.tracker_id is not None and list(dets.tracker_id) == [-1, -1]  # tracking off: no ids
    st.put_depth(_depth(0))
    assert st.locate(dets, 0, (48, 64))[2] == "no CameraInfo received yet"
    st.put_depth(_depth(1))
    assert st.locate(dets, 1, (48, 64))[2] is None  # said already
    assert st.waiting == "no CameraInfo received yet"
    assert "not calibrated" in (st.put_camera_info([0.0] * 9, 64, 48) or "")
    assert st.put_camera_info([0.0] * 9, 64, 48) is None  # once
    st.put_camera_info(K, 64, 48)
    st.put_depth(_depth(2, 24, 32))
    assert "sizes differ: colour 64x48, depth 32x24" in st.locate(dets, 2, (48, 64))[2]
    st.put_depth(_depth(3, encoding="bgr8"))
    assert "depth encoding 'bgr8' is not supported" in st.locate(dets, 3, (48, 64))[2]
    assert "no depth image within 0.0 s" in st.locate(dets, 4, (48, 64))[2]
    d = st.diagnostics()
    assert d["depth_errors"] == 1 and d["frames_without_depth"] == 1 and d["coverage_3d"] == 0.0


def test_spatial_labels_for_drawing():
    from probench.realtime.spatial_stage import spatial_labels
    from probench.spatial.depth import Detections3D

    est = Detections3D(np.array([[0.0, 0.0, 2.0]]), np.ones((1, 3)), np.array([1]), np.array([4]))
    three = Detections(np.tile([1.0, 1, 5, 5], (3, 1)), np.full(3, 0.5), np.zeros(3, np.int64))
    assert spatial_labels(three.with_tracker_id([-1, 4, 9]), est) == ["", "#4 2.00 m", "#9"]
    assert spatial_labels(DETS, est) == ["", "2.00 m"]
    assert spatial_labels(DETS, None) is None
