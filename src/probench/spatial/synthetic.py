"""A synthetic RGB-D scene with known 3D objects: a pinhole camera looking at flat
rectangles (fronto-parallel or turned about the vertical axis) in front of a wall.

Each pixel's ray is intersected with every rectangle; the nearest hit gives the depth and
the colour. An object's 2D box is the bounding box of its projected corners (the box a
detector would give for the whole object, hidden parts included). Depth noise (Gaussian,
a share of the depth) and invalid pixels (a share of all pixels, set to 0 / NaN) are drawn
from a seeded generator, so every figure a test checks is reproducible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from probench.spatial.depth import Intrinsics

DEFAULT_K = Intrinsics(fx=525.0, fy=525.0, cx=319.5, cy=239.5, width=640, height=480)


@dataclass(frozen=True)
class Box3D:
    """A flat rectangle: centre (m, camera frame), width x height (m), turned ``yaw_deg``
    about the camera's vertical (y) axis; 0 faces the camera."""

    centre: tuple[float, float, float]
    width: float
    height: float
    yaw_deg: float = 0.0
    colour: tuple[int, int, int] = (200, 40, 40)

    def axes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(right, down, normal) unit vectors of the rectangle."""
        a = math.radians(self.yaw_deg)
        right = np.array([math.cos(a), 0.0, -math.sin(a)])
        down = np.array([0.0, 1.0, 0.0])
        return right, down, np.cross(right, down)

    def corners(self) -> np.ndarray:
        right, down, _ = self.axes()
        c = np.asarray(self.centre, dtype=np.float64)
        return np.array([c + sx * self.width / 2 * right + sy * self.height / 2 * down
                         for sx in (-1, 1) for sy in (-1, 1)])


@dataclass(frozen=True)
class Scene:
    objects: tuple[Box3D, ...]
    k: Intrinsics = DEFAULT_K
    wall_z: float = 6.0
    wall_colour: tuple[int, int, int] = (90, 90, 90)

    def boxes(self) -> np.ndarray:
        """(N, 4) xyxy pixel boxes of the objects' projected corners, clipped to the image."""
        out = np.zeros((len(self.objects), 4))
        for i, obj in enumerate(self.objects):
            uv = self.k.project(obj.corners())
            out[i] = [uv[:, 0].min(), uv[:, 1].min(), uv[:, 0].max(), uv[:, 1].max()]
        out[:, [0, 2]] = out[:, [0, 2]].clip(0, self.k.width)
        out[:, [1, 3]] = out[:, [1, 3]].clip(0, self.k.height)
        return out

    def centres(self) -> np.ndarray:
        return np.array([o.centre for o in self.objects], dtype=np.float64).reshape(-1, 3)

    def render(self) -> tuple[np.ndarray, np.ndarray]:
        """(rgb uint8 (H, W, 3), depth in metres float64 (H, W)), noise-free and complete."""
        k = self.k
        u, v = np.meshgrid(np.arange(k.width, dtype=np.float64), np.arange(k.height, dtype=np.float64))
        rays = np.stack([(u - k.cx) / k.fx, (v - k.cy) / k.fy, np.ones_like(u)], axis=-1)
        depth = np.full((k.height, k.width), float(self.wall_z))
        rgb = np.empty((k.height, k.width, 3), np.uint8)
        rgb[:] = self.wall_colour
        for obj in self.objects:
            right, down, normal = obj.axes()
            c = np.asarray(obj.centre, dtype=np.float64)
            denom = rays @ normal
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (c @ normal) / denom  # ray parameter = depth z (rays have z = 1)
            p = rays * t[..., None] - c
            inside = ((np.abs(p @ right) <= obj.width / 2) & (np.abs(p @ down) <= obj.height / 2)
                      & (t > 0) & (t < depth))
            depth[inside] = t[inside]
            rgb[inside] = obj.colour
        return rgb, depth


def degrade(depth_m: np.ndarray, noise_rel: float = 0.0, invalid_share: float = 0.0,
            seed: int = 0) -> np.ndarray:
    """Gaussian noise of ``noise_rel`` x depth, and ``invalid_share`` of the pixels set to NaN."""
    rng = np.random.default_rng(seed)
    out = depth_m.astype(np.float64).copy()
    if noise_rel:
        out += rng.normal(0.0, 1.0, out.shape) * noise_rel * out
    if invalid_share:
        out[rng.random(out.shape) < invalid_share] = np.nan
    return out


def encode(depth_m: np.ndarray, encoding: str) -> np.ndarray:
    """Metres (NaN invalid) to a ROS depth encoding: ``16UC1`` mm (0 invalid) or ``32FC1`` m (NaN)."""
    if encoding == "16UC1":
        mm = np.where(np.isfinite(depth_m), np.round(depth_m * 1000.0), 0.0)
        return mm.clip(0, 65535).astype(np.uint16)
    if encoding == "32FC1":
        return depth_m.astype(np.float32)
    raise ValueError(f"unknown depth encoding {encoding!r}")


def moving_scene(frame: int, n_objects: int = 3, k: Intrinsics = DEFAULT_K) -> Scene:
    """Frame ``frame`` of objects swinging sideways at different depths, each in its own lane
    of the view, neighbours' boxes overlapping at the ends of their swings (for tracking
    tests; every box stays inside the image)."""
    objs = []
    for i in range(n_objects):
        z = 2.0 + 0.6 * i
        lane = (i + 0.5) / n_objects - 0.5  # -0.5 .. 0.5 of the view's width
        swing = 0.6 / n_objects * math.sin(2.0 * math.pi * frame / 90.0 + 1.7 * i)
        x = (lane + swing) * 0.9 * z * k.width / k.fx
        y = (0.25 * math.cos(2.0 * math.pi * frame / 120.0 + i)) * z * k.height / k.fy * 0.5
        colour = (60 * i % 256, (200 - 50 * i) % 256, (40 + 70 * i) % 256)
        objs.append(Box3D((x, y, z), 0.4, 0.5, 0.0, colour))
    return Scene(tuple(objs), k)
