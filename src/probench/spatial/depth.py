"""Depth images, camera intrinsics and one 3D estimate per 2D detection.

Conventions:
- a depth image is registered to the colour camera (same size, same K): ``16UC1`` in
  millimetres or ``32FC1`` in metres; 0, NaN, inf and negative values are invalid;
- coordinates are the colour camera's optical frame (x right, y down, z forward), metres;
- a detection's depth is a robust depth of the valid pixels inside its box (or its instance
  mask): the depths are split into clusters where consecutive sorted values jump by more
  than ``gap_rel`` of the depth, and the median of the cluster holding most pixels is taken.
  An object partly hidden by a nearer one keeps its own depth while most of its box is
  still visible; a box with fewer than ``min_pixels`` valid pixels gets no estimate
  (counted, never guessed);
- the centre is the box centre back-projected at that depth; the size is the box extent
  back-projected at that depth (x, y) and the depth spread of the cluster (z: 5th to 95th
  percentile).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probench.detections import Detections
from probench.spatial.errors import DepthEncodingError, IntrinsicsError, SpatialError

DEPTH_ENCODINGS: dict[str, tuple[np.dtype[Any], float]] = {
    "16UC1": (np.dtype("<u2"), 0.001), "mono16": (np.dtype("<u2"), 0.001), "32FC1": (np.dtype("<f4"), 1.0)}
MAX_SAMPLES = 1024  # per box: a larger box is read on a regular grid of about this many pixels
GAP_REL = 0.05  # a jump of more than 5% of the depth between sorted depths starts a new cluster
SPREAD_PERCENTILES = (5.0, 95.0)


@dataclass(frozen=True)
class Intrinsics:
    """A pinhole camera (CameraInfo's K of the colour camera) and its image size."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @classmethod
    def from_k(cls, k: Sequence[float], width: int, height: int) -> Intrinsics:
        """From a row-major 3x3 K; a zero or non-finite focal length (an uncalibrated
        camera's K = 0) or a zero image size is an :class:`IntrinsicsError`."""
        values = [float(v) for v in k]
        if len(values) != 9:
            raise IntrinsicsError(f"K must have 9 values, got {len(values)}")
        fx, cx, fy, cy = values[0], values[2], values[4], values[5]
        if not all(math.isfinite(v) for v in (fx, fy, cx, cy)) or fx <= 0 or fy <= 0:
            raise IntrinsicsError(f"K has no usable focal length (fx={fx:g}, fy={fy:g}): the camera is not "
                                  "calibrated (K = 0?), so no 3D position can be computed")
        if width <= 0 or height <= 0:
            raise IntrinsicsError(f"CameraInfo has no image size ({width}x{height})")
        return cls(fx, fy, cx, cy, int(width), int(height))

    def project(self, xyz: np.ndarray) -> np.ndarray:
        """Pixel coordinates (N, 2) of camera-frame points (N, 3) with z > 0."""
        xyz = np.asarray(xyz, dtype=np.float64).reshape(-1, 3)
        u = self.fx * xyz[:, 0] / xyz[:, 2] + self.cx
        return np.stack([u, self.fy * xyz[:, 1] / xyz[:, 2] + self.cy], 1)


@dataclass(frozen=True)
class DepthImage:
    """A depth image as it came (no per-pixel conversion: only the pixels inside boxes are
    read), with the factor that turns its values into metres."""

    data: np.ndarray  # (H, W) uint16 or float32
    scale: float  # metres per unit

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.data.shape[0]), int(self.data.shape[1])

    def metres(self) -> np.ndarray:
        """The whole image in metres, float32, invalid pixels NaN (for drawing and tests)."""
        out = self.data.astype(np.float32) * np.float32(self.scale)
        out[~(np.isfinite(out) & (out > 0))] = np.nan
        return out


def depth_image(data: np.ndarray, encoding: str) -> DepthImage:
    """Check a depth array against its ROS encoding: ``16UC1``/``mono16`` (mm) or ``32FC1`` (m)."""
    if encoding not in DEPTH_ENCODINGS:
        raise DepthEncodingError(f"depth encoding {encoding!r} is not supported: use 16UC1 (millimetres) or "
                                 "32FC1 (metres)")
    dtype, scale = DEPTH_ENCODINGS[encoding]
    arr = np.asarray(data)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DepthEncodingError(f"a depth image must be one channel (H, W), got shape {arr.shape}")
    if arr.dtype.kind != dtype.kind or arr.dtype.itemsize != dtype.itemsize:
        raise DepthEncodingError(f"{encoding} depth must be {dtype.name}, got {arr.dtype.name}")
    return DepthImage(arr, scale)


def depth_from_bytes(buf: bytes | memoryview | np.ndarray, height: int, width: int, step: int, encoding: str,
                     big_endian: bool = False) -> DepthImage:
    """A depth image from a sensor_msgs/Image's fields (zero-copy where the rows are packed)."""
    if encoding not in DEPTH_ENCODINGS:
        depth_image(np.zeros((1, 1)), encoding)  # raises the one message
    dtype = DEPTH_ENCODINGS[encoding][0].newbyteorder(">" if big_endian else "<")
    row = width * dtype.itemsize
    if height <= 0 or width <= 0:
        raise SpatialError(f"depth image has no pixels ({width}x{height})")
    if step < row:
        raise SpatialError(f"depth image step {step} is smaller than width x {dtype.itemsize} bytes ({row})")
    raw = np.frombuffer(buf, dtype=np.uint8)
    if raw.size < step * height:
        raise SpatialError(f"depth image data has {raw.size} bytes, expected step x height = {step * height}")
    rows = raw[: step * height].reshape(height, step)[:, :row]
    arr = np.ascontiguousarray(rows).view(dtype).reshape(height, width)
    return depth_image(arr.astype(dtype.newbyteorder("=")) if big_endian else arr, encoding)


@dataclass(frozen=True)
class Detections3D:
    """3D estimates for some of a frame's 2D detections (camera optical frame, metres).

    ``index[i]`` is the row of the 2D :class:`~probench.detections.Detections` that
    estimate ``i`` belongs to; ``track_id[i]`` its track id (-1: none). ``without_depth``
    counts the boxes that had too few valid depth pixels (no estimate given)."""

    centre: np.ndarray  # (M, 3)
    size: np.ndarray  # (M, 3): box extent at the depth (x, y), depth spread (z)
    index: np.ndarray  # (M,) int64
    track_id: np.ndarray  # (M,) int64
    without_depth: int = 0

    def __len__(self) -> int:
        return len(self.index)

    @classmethod
    def empty(cls, without_depth: int = 0) -> Detections3D:
        none = np.zeros(0, np.int64)
        return cls(np.zeros((0, 3)), np.zeros((0, 3)), none, none.copy(), without_depth)

    @property
    def distance(self) -> np.ndarray:
        """Euclidean distance of each centre from the camera (m)."""
        out: np.ndarray = np.linalg.norm(self.centre, axis=1) if len(self) else np.zeros(0)
        return out


def robust_depth(values: np.ndarray, gap_rel: float = GAP_REL) -> tuple[float, float, int] | None:
    """(depth, spread, cluster size) of valid depths in metres: the median of the largest
    cluster (sorted depths split where they jump by more than ``gap_rel`` of the depth;
    ties go to the nearer cluster), spread = 5th-95th percentile of that cluster."""
    if values.size == 0:
        return None
    v = np.sort(values)
    cuts = np.flatnonzero(np.diff(v) > gap_rel * v[1:]) + 1
    if cuts.size:
        bounds = np.concatenate(([0], cuts, [v.size]))
        k = int(np.argmax(np.diff(bounds)))
        v = v[bounds[k]: bounds[k + 1]]
    n = v.size
    depth = float(v[n // 2]) if n % 2 else float(0.5 * (v[n // 2 - 1] + v[n // 2]))
    lo, hi = (v[min(n - 1, int(p / 100.0 * (n - 1) + 0.5))] for p in SPREAD_PERCENTILES)
    return depth, float(hi - lo), n


def _valid(crop: np.ndarray, scale: float) -> np.ndarray:
    if crop.dtype.kind == "u":
        out: np.ndarray = crop[crop > 0].astype(np.float32) * np.float32(scale)
        return out
    vals: np.ndarray = crop[np.isfinite(crop) & (crop > 0)]
    return vals * np.float32(scale) if scale != 1.0 else vals


def estimate_3d(dets: Detections, depth: DepthImage, k: Intrinsics, min_pixels: int = 50,
                track_ids: np.ndarray | None = None, max_samples: int = MAX_SAMPLES) -> Detections3D:
    """One 3D estimate per detection with at least ``min_pixels`` valid depth pixels inside
    its box (its mask when the detections have masks). The depth image must have the
    intrinsics' size (registered to the colour image): a mismatch is a :class:`SpatialError`."""
    h, w = depth.shape
    if (h, w) != (k.height, k.width):
        raise SpatialError(f"depth image is {w}x{h} but CameraInfo says {k.width}x{k.height}")
    n = len(dets)
    if n == 0:
        return Detections3D.empty()
    boxes = np.empty((n, 4), np.int64)
    boxes[:, :2] = np.floor(dets.xyxy[:, :2])
    boxes[:, 2:] = np.ceil(dets.xyxy[:, 2:])
    boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, w)
    boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, h)
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    strides = np.maximum(1, np.ceil(np.sqrt(areas / max_samples))).astype(np.int64)
    masks = dets.masks if dets.masks is not None and dets.masks.shape[1:] == (h, w) else None
    data, scale = depth.data, depth.scale
    keep: list[int] = []
    zs = np.empty(n)
    spreads = np.empty(n)
    for i in range(n):
        x1, y1, x2, y2 = (int(b) for b in boxes[i])
        s = int(strides[i])
        if x2 <= x1 or y2 <= y1:
            continue
        crop = data[y1:y2:s, x1:x2:s]
        if masks is not None:
            crop = crop[masks[i, y1:y2:s, x1:x2:s]]
        vals = _valid(crop, scale)
        if vals.size * s * s < min_pixels:
            continue
        est = robust_depth(vals)
        if est is None:
            continue
        zs[i], spreads[i] = est[0], est[1]
        keep.append(i)
    if not keep:
        return Detections3D.empty(without_depth=n)
    idx = np.asarray(keep, np.int64)
    z = zs[idx]
    xyxy = dets.xyxy[idx]
    u = 0.5 * (xyxy[:, 0] + xyxy[:, 2])
    v = 0.5 * (xyxy[:, 1] + xyxy[:, 3])
    centre = np.stack([(u - k.cx) * z / k.fx, (v - k.cy) * z / k.fy, z], axis=1)
    size = np.stack([(xyxy[:, 2] - xyxy[:, 0]) * z / k.fx, (xyxy[:, 3] - xyxy[:, 1]) * z / k.fy,
                     spreads[idx]], axis=1)
    ids = (np.full(len(idx), -1, np.int64) if track_ids is None
           else np.asarray(track_ids, np.int64).reshape(-1)[idx])
    return Detections3D(centre, size, idx, ids, without_depth=n - len(idx))
