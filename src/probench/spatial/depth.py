"""Depth images, camera intrinsics and one 3D estimate per 2D detection.

Conventions:
- a depth image is registered to the colour camera (same size, same K): ``16UC1`` in
  millimetres or ``32FC1`` in metres; 0, NaN, inf, negative values and depths beyond
  ``max_depth`` (default :data:`DEFAULT_MAX_DEPTH_M`, 20 m: a RealSense-class camera's
  useful range, docs/SECURITY.md) are invalid;
- a K whose focal lengths are implausible for its image (outside :data:`FOCAL_RANGE_REL`
  times the image's longer side: 1e-300 px, 1e12 px) is refused as K = 0 is;
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
GRID = 16  # each box is read on a GRID x GRID lattice of its pixels
GAP_REL = 0.05  # a jump of more than 5% of the depth between sorted depths starts a new cluster
SPREAD_PERCENTILES = (5.0, 95.0)
DEFAULT_MAX_DEPTH_M = 20.0  # farther is no measurement of a RealSense-class camera (the max_depth parameter)
MAX_DEPTH_LIMIT_M = 1000.0  # the highest max_depth accepted
# A plausible focal length, as a multiple of the image's longer side: 0.01 (a 179 deg fish-eye
# has ~0.02) to 1000 (a 0.06 deg telephoto).
FOCAL_RANGE_REL = (0.01, 1000.0)


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
        side = max(int(width), int(height))
        lo, hi = FOCAL_RANGE_REL[0] * side, FOCAL_RANGE_REL[1] * side
        if not (lo <= fx <= hi and lo <= fy <= hi):
            raise IntrinsicsError(f"K has an implausible focal length (fx={fx:g}, fy={fy:g} px for a "
                                  f"{width}x{height} image; plausible: {lo:g}..{hi:g} px), so no 3D position "
                                  "can be computed")
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


def robust_depths(values: np.ndarray, gap_rel: float = GAP_REL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``values`` (N, S) in metres, NaN/inf/<=0 invalid: (depth, spread, cluster
    size), each (N,). A row's valid depths are sorted and split into clusters where they jump
    by more than ``gap_rel`` of the depth; the depth is the median of the largest cluster
    (ties go to the nearer), the spread its 5th-95th percentile range. A row without a valid
    value gets depth NaN and size 0. One pass over all rows (no Python loop)."""
    with np.errstate(invalid="ignore"):
        v = np.sort(np.where(values > 0, values, np.nan), axis=1)  # invalid (NaN, inf) last
        counts = np.isfinite(v).sum(axis=1)
        n, m = v.shape
        cid = np.zeros((n, m), np.int64)
        np.cumsum(np.diff(v, axis=1) > gap_rel * v[:, 1:], axis=1, out=cid[:, 1:])
    valid = np.arange(m)[None, :] < counts[:, None]
    flat = (np.arange(n)[:, None] * m + cid)[valid]
    sizes = np.bincount(flat, minlength=n * m).reshape(n, m)
    best = sizes.argmax(axis=1)  # the first (nearest) of equal clusters
    rows = np.arange(n)
    size = sizes[rows, best]
    start = (cid == best[:, None]).argmax(axis=1)
    last = np.maximum(size - 1, 0)
    depth = 0.5 * (v[rows, start + last // 2].astype(np.float64) + v[rows, start + (last + 1) // 2])
    lo, hi = (v[rows, start + np.floor(p / 100.0 * last + 0.5).astype(np.int64)] for p in SPREAD_PERCENTILES)
    empty = size == 0
    depth[empty] = np.nan
    with np.errstate(invalid="ignore"):  # rows without a valid value: inf - inf
        spread = np.where(empty, 0.0, hi.astype(np.float64) - lo)
    return depth, spread, size


def robust_depth(values: np.ndarray, gap_rel: float = GAP_REL) -> tuple[float, float, int] | None:
    """:func:`robust_depths` of one set of depths, or None when none is valid."""
    if np.size(values) == 0:
        return None
    depth, spread, size = robust_depths(np.asarray(values, dtype=np.float64).reshape(1, -1), gap_rel)
    return None if size[0] == 0 else (float(depth[0]), float(spread[0]), int(size[0]))


def estimate_3d(dets: Detections, depth: DepthImage, k: Intrinsics, min_pixels: int = 50, grid: int = GRID,
                max_depth: float = DEFAULT_MAX_DEPTH_M) -> Detections3D:
    """One 3D estimate per detection with at least ``min_pixels`` valid depth pixels (in
    (0, ``max_depth``] metres) inside
    its box (its mask when the detections have masks). Each box is read on a ``grid`` x
    ``grid`` lattice of pixels (every box at once); its count of valid pixels is the valid
    share of the lattice times the box area. The depth image must have the intrinsics' size
    (registered to the colour image): a mismatch is a :class:`SpatialError`."""
    h, w = depth.shape
    if (h, w) != (k.height, k.width):
        raise SpatialError(f"depth image is {w}x{h} but CameraInfo says {k.width}x{k.height}")
    n = len(dets)
    if n == 0:
        return Detections3D.empty()
    x1 = np.floor(dets.xyxy[:, 0]).clip(0, w)
    y1 = np.floor(dets.xyxy[:, 1]).clip(0, h)
    x2 = np.ceil(dets.xyxy[:, 2]).clip(0, w)
    y2 = np.ceil(dets.xyxy[:, 3]).clip(0, h)
    t = (np.arange(grid) + 0.5) / grid
    xs = (x1[:, None] + t[None, :] * (x2 - x1)[:, None]).astype(np.int64).clip(0, w - 1)  # (n, grid)
    ys = (y1[:, None] + t[None, :] * (y2 - y1)[:, None]).astype(np.int64).clip(0, h - 1)
    raw = depth.data[ys[:, :, None], xs[:, None, :]].reshape(n, -1)
    metres = raw.astype(np.float32) * np.float32(depth.scale)
    if raw.dtype.kind == "u":
        metres[raw == 0] = np.nan
    else:
        metres[~np.isfinite(metres)] = np.nan  # inf is no depth either
    with np.errstate(invalid="ignore"):
        metres[metres > np.float32(max_depth)] = np.nan  # beyond the camera's range: no measurement
    if dets.masks is not None and dets.masks.shape[1:] == (h, w):
        inside = dets.masks[np.arange(n)[:, None, None], ys[:, :, None], xs[:, None, :]].reshape(n, -1)
        metres[~inside] = np.nan
    z_all, spread_all, _ = robust_depths(metres)
    with np.errstate(invalid="ignore"):
        valid_share = (metres > 0).mean(axis=1)
    area = (x2 - x1) * (y2 - y1)
    ok = (area > 0) & np.isfinite(z_all) & (valid_share * area >= min_pixels - 1e-9)
    idx = np.flatnonzero(ok)
    if not len(idx):
        return Detections3D.empty(without_depth=n)
    z = z_all[idx]
    xyxy = dets.xyxy[idx]
    u = 0.5 * (xyxy[:, 0] + xyxy[:, 2])
    v = 0.5 * (xyxy[:, 1] + xyxy[:, 3])
    centre = np.stack([(u - k.cx) * z / k.fx, (v - k.cy) * z / k.fy, z], axis=1)
    size = np.stack([(xyxy[:, 2] - xyxy[:, 0]) * z / k.fx, (xyxy[:, 3] - xyxy[:, 1]) * z / k.fy,
                     spread_all[idx]], axis=1)
    ids = np.full(len(idx), -1, np.int64) if dets.tracker_id is None else dets.tracker_id[idx]
    return Detections3D(centre, size, idx, ids, without_depth=n - len(idx))
