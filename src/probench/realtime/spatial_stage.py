"""The grounding node's spatial stage (no rclpy): track ids after detection, then the frame's
depth image paired by stamp and one 3D estimate per detection.

The node hands over depth images as they come (:meth:`SpatialStage.put_depth`, executor
thread) and the colour camera's CameraInfo (:meth:`SpatialStage.put_camera_info`); the
worker thread calls :meth:`SpatialStage.track` before it publishes the 2D detections and
:meth:`SpatialStage.locate` after. Pairing uses the node's stamp map
(:class:`~probench.realtime.grounding_worker.StampedMap`): the depth image nearest the
colour frame's stamp within ``tolerance_s``, waiting up to ``tolerance_s`` for one still in
transit. Nothing here stops 2D: a frame without depth, without usable CameraInfo, or with a
depth image that cannot be read gets no 3D output, is counted, and :attr:`SpatialStage.waiting`
says why (for /diagnostics); each new reason is returned once for a log line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probench.detections import Detections
from probench.errors import ProbenchError
from probench.realtime.grounding_worker import StampedMap
from probench.spatial.depth import (
    DEFAULT_MAX_DEPTH_M,
    DepthImage,
    Detections3D,
    Intrinsics,
    depth_from_bytes,
    estimate_3d,
)
from probench.spatial.errors import IntrinsicsError
from probench.spatial.tracking import PromptTrackers

TRACK_STAGE = "track"
DEPTH_STAGE = "depth_3d"
DEPTH_BUFFER = 8  # depth images the node keeps while their colour frame is awaited


@dataclass(frozen=True)
class SpatialSettings:
    depth: bool  # a depth topic is set
    tracking: bool
    tolerance_s: float = 0.02
    min_depth_pixels: int = 50
    wait_s: float | None = None  # longest wait for a frame's depth; None: tolerance_s
    depth_buffer: int = DEPTH_BUFFER  # depth images kept while their colour frame is awaited
    max_depth: float = DEFAULT_MAX_DEPTH_M  # metres: farther depth pixels are invalid (parameter max_depth)


@dataclass(frozen=True)
class DepthFields:
    """A depth Image's fields (what :func:`probench.msgs.wire.image_from_cdr` gives)."""

    stamp_ns: int
    height: int
    width: int
    encoding: str
    is_bigendian: int
    step: int
    data: Any  # bytes or memoryview


class SpatialStage:
    def __init__(self, settings: SpatialSettings) -> None:
        self.settings = settings
        self.trackers = PromptTrackers() if settings.tracking else None
        self.depth_frames: StampedMap[DepthFields] = StampedMap(capacity=settings.depth_buffer)
        self._lock = threading.Lock()
        self._k: Intrinsics | None = None
        self._k_problem = "no CameraInfo received yet"
        self._said: set[str] = set()
        self.waiting = "" if not settings.depth else self._k_problem
        # the depth image and intrinsics the last located frame used (its target's points)
        self.last_depth: tuple[DepthImage, Intrinsics] | None = None
        self.counts = {"frames_3d": 0, "frames_without_depth": 0, "depth_errors": 0, "boxes_3d": 0,
                       "boxes_without_depth": 0, "boxes_waiting_3d": 0}

    # -- executor thread ---------------------------------------------------------------------
    def put_depth(self, depth: DepthFields) -> None:
        self.depth_frames.put(depth.stamp_ns, depth)

    def put_camera_info(self, k: Sequence[float], width: int, height: int) -> str | None:
        """Take a CameraInfo; returns a line to log when it cannot be used (once per reason)."""
        try:
            intr = Intrinsics.from_k(k, width, height)
        except IntrinsicsError as exc:
            with self._lock:
                self._k, self._k_problem = None, f"CameraInfo unusable: {exc}"
            return self.once(self._k_problem)
        with self._lock:
            self._k, self._k_problem = intr, ""
        return None

    # -- worker thread -------------------------------------------------------------------------
    def track(self, dets: Detections, prompts: Sequence[str], stamp_ns: int) -> Detections:
        """The frame's detections with their track ids (``tracker_id``, -1: none; all -1
        with tracking off), the cost in their timings."""
        if self.trackers is None:
            return dets.with_tracker_id(np.full(len(dets), -1, np.int64))
        t0 = time.perf_counter()
        ids = self.trackers.update(dets, prompts, t_s=stamp_ns * 1e-9)
        return dets.with_tracker_id(ids).with_timing(TRACK_STAGE, (time.perf_counter() - t0) * 1000.0)

    def locate(self, dets: Detections, stamp_ns: int,
               image_hw: tuple[int, int]) -> tuple[Detections3D | None, float, str | None]:
        """``(3D estimates or None, ms spent, a line to log or None)`` for the frame."""
        self.last_depth = None
        if not self.settings.depth:
            return None, 0.0, None
        tol_ns = int(self.settings.tolerance_s * 1e9)
        wait_s = self.settings.tolerance_s if self.settings.wait_s is None else self.settings.wait_s
        depth = self.depth_frames.take(stamp_ns, wait_s=wait_s, tolerance_ns=tol_ns)
        t0 = time.perf_counter()
        with self._lock:
            k, k_problem = self._k, self._k_problem
        if depth is None:
            self.counts["frames_without_depth"] += 1
            self.counts["boxes_waiting_3d"] += len(dets)
            why = k_problem or (f"no depth image within {self.settings.tolerance_s} s (depth_tolerance) "
                                "of the colour frame")
            return None, 0.0, self._wait(why)
        if k is None:
            self.counts["boxes_waiting_3d"] += len(dets)
            return None, 0.0, self._wait(k_problem)
        h, w = image_hw
        if (depth.height, depth.width) != (h, w) or (k.height, k.width) != (h, w):
            self.counts["boxes_waiting_3d"] += len(dets)
            return None, 0.0, self._wait(
                f"sizes differ: colour {w}x{h}, depth {depth.width}x{depth.height}, CameraInfo "
                f"{k.width}x{k.height}; the depth image must be registered to the colour camera")
        try:
            image = depth_from_bytes(depth.data, depth.height, depth.width, depth.step, depth.encoding,
                                     big_endian=bool(depth.is_bigendian))
            est = estimate_3d(dets, image, k, self.settings.min_depth_pixels,
                              max_depth=self.settings.max_depth)
        except ProbenchError as exc:
            self.counts["depth_errors"] += 1
            return None, 0.0, self._wait(f"depth image dropped: {exc}")
        self.waiting = ""
        self.last_depth = (image, k)
        self.counts["frames_3d"] += 1
        self.counts["boxes_3d"] += len(est)
        self.counts["boxes_without_depth"] += est.without_depth
        return est, (time.perf_counter() - t0) * 1000.0, None

    def _wait(self, why: str) -> str | None:
        self.waiting = why
        return self.once(why)

    def once(self, why: str) -> str | None:
        """``why`` the first time it is said, else None (one log line per reason)."""
        with self._lock:
            if why in self._said:
                return None
            self._said.add(why)
        return why

    def diagnostics(self) -> dict[str, Any]:
        if not self.settings.depth and self.trackers is None:
            return {}
        c = dict(self.counts)
        boxes = c["boxes_3d"] + c["boxes_without_depth"] + c["boxes_waiting_3d"]
        out: dict[str, Any] = {}
        if self.settings.depth:
            out.update(c, coverage_3d=(c["boxes_3d"] / boxes) if boxes else 0.0,
                       depth_pairing=self.depth_frames.bound, depth_pending=len(self.depth_frames),
                       waiting_3d=self.waiting or "-", max_depth_m=self.settings.max_depth)
        if self.trackers is not None:
            out["tracked_prompts"] = len(self.trackers.prompts)
        return out


def spatial_labels(dets: Detections, est: Detections3D | None) -> list[str] | None:
    """Per detection: ``#<track id>`` and the distance (``2.41 m``) where known, for drawn
    labels; None when there is neither."""
    n, track_ids = len(dets), dets.tracker_id
    if track_ids is None and est is None:
        return None
    ids = track_ids if track_ids is not None else np.full(n, -1)
    dist: dict[int, float] = {}
    if est is not None:
        dist = dict(zip(est.index.tolist(), est.distance.tolist(), strict=True))
    return [" ".join(([f"#{ids[i]}"] if ids[i] >= 0 else []) + ([f"{dist[i]:.2f} m"] if i in dist else []))
            for i in range(n)]
