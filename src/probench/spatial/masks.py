"""Instance masks of a frame as images registered to the colour frame, and the target's points.

:func:`compose_masks` turns the published detections' masks into three images of the
colour frame's size (docs/GROUNDING_NODE.md, "Instance masks"):

- instances (``uint16``): 0 = background, k >= 1 = the k-th published detection (1-based,
  ``order[k - 1]``);
- semantic (``uint8``): 0 = background, c >= 1 = prompt c - 1;
- confidence (``uint8``): round(255 x score) of the pixel's instance (ties to even), 0 on
  background.

Where masks overlap, the highest score wins, ties to the lower detection index: the first of
the published order (``msgs.wire.top_order``: by descending score, stable) whose mask holds
the pixel. One masked copy per mask (worst first, each better one painted over it), then a
look-up table per image; :mod:`msgs.masks` encodes the arrays.

:func:`target_points` back-projects the depth of a mask's pixels (the target's
``PointCloud2``); :func:`target_detection` picks the target, the best detection of the
first prompt.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from probench.detections import Detections
from probench.msgs.errors import SemanticClassesError
from probench.msgs.masks import MAX_INSTANCES, MAX_SEMANTIC_CLASSES
from probench.spatial.depth import DepthImage, Intrinsics
from probench.spatial.errors import MaskShapeError, NoMasksError, SpatialError

__all__ = ["MaskImages", "checked_masks", "compose_masks", "target_detection", "target_points"]


class MaskImages(NamedTuple):
    """The three mask images of a frame, each ``(H, W)`` at the colour frame's size."""

    instances: np.ndarray  # uint16
    semantic: np.ndarray  # uint8
    confidence: np.ndarray  # uint8


def checked_masks(dets: Detections, image_hw: tuple[int, int]) -> np.ndarray | None:
    """``dets.masks`` when they fit an image of ``image_hw`` (None for no detections without
    masks); :class:`NoMasksError` when detections carry none, :class:`MaskShapeError` when
    their (H, W) differ from the image's (one line each)."""
    h, w = int(image_hw[0]), int(image_hw[1])
    masks = dets.masks
    if masks is None:
        if len(dets):
            raise NoMasksError(f"the detections carry no instance masks ({len(dets)} boxes without masks)")
        return None
    if masks.shape[1:] != (h, w):
        raise MaskShapeError(f"instance masks are {masks.shape[2]}x{masks.shape[1]} but the image is "
                             f"{w}x{h}: masks must have the image's size")
    return masks


def compose_masks(dets: Detections, order: np.ndarray, image_hw: tuple[int, int]) -> MaskImages:
    """The instance, semantic and confidence images of the detections ``order`` (the
    published ones, best first: ``msgs.wire.top_order``) at ``image_hw`` = (H, W) (module
    doc). Raises :class:`NoMasksError` / :class:`MaskShapeError` (:func:`checked_masks`) and
    :class:`~probench.msgs.errors.SemanticClassesError` for a prompt index beyond 254."""
    import cv2

    h, w = int(image_hw[0]), int(image_hw[1])
    masks = checked_masks(dets, (h, w))
    order = np.asarray(order, dtype=np.int64).reshape(-1)
    n = len(order)
    if masks is None or n == 0:
        return MaskImages(np.zeros((h, w), np.uint16), np.zeros((h, w), np.uint8), np.zeros((h, w), np.uint8))
    if n > MAX_INSTANCES:
        raise MaskShapeError(f"{n} detections: the instance mask (mono16) holds at most {MAX_INSTANCES}")
    classes = dets.prompt_index[order] + 1
    if int(classes.max()) > MAX_SEMANTIC_CLASSES:
        raise SemanticClassesError(f"a detection answers prompt {int(classes.max()) - 1}: the semantic mask "
                                   f"(mono8) holds prompts 0..{MAX_SEMANTIC_CLASSES - 1}")
    # painted worst first, each better detection over it: inst[y, x] = r + 1 for the first r
    # of ``order`` whose mask holds the pixel, 0 for none (OpenCV's masked copy: SIMD)
    dtype = np.dtype(np.uint8) if n <= 255 else np.dtype(np.uint16)
    inst = np.zeros((h, w), dtype)
    value = np.empty((h, w), dtype)
    for r in range(n - 1, -1, -1):
        value.fill(r + 1)
        cv2.copyTo(value, np.ascontiguousarray(masks[order[r]]).view(np.uint8), inst)
    # the other two images: look-up tables by instance number
    sem = np.zeros(n + 1, np.uint8)
    sem[1:] = classes
    conf = np.zeros(n + 1, np.uint8)
    conf[1:] = np.rint(255.0 * dets.scores[order])
    if dtype == np.uint8:  # OpenCV's table look-up (SIMD) is several times numpy's gather
        return MaskImages(cv2.LUT(inst, _table256(np.arange(n + 1, dtype=np.uint16))),
                          cv2.LUT(inst, _table256(sem)), cv2.LUT(inst, _table256(conf)))
    return MaskImages(inst, sem[inst], conf[inst])


def _table256(table: np.ndarray) -> np.ndarray:
    out = np.zeros(256, table.dtype)
    out[: len(table)] = table
    return out


def target_detection(dets: Detections, prompt: int = 0) -> int | None:
    """The index of the best detection of prompt ``prompt`` (ties: the lower index), or None."""
    mine = np.flatnonzero(dets.prompt_index == prompt)
    return int(mine[np.argmax(dets.scores[mine])]) if len(mine) else None


def target_points(depth: DepthImage, mask: np.ndarray, k: Intrinsics) -> np.ndarray:
    """``(M, 3)`` float32 points (the camera's optical frame, metres) of the mask's pixels
    with a valid depth, back-projected as depth_image_proc does (pixel (u, v) at depth z:
    ((u - cx) z / fx, (v - cy) z / fy, z)), in row-major pixel order; invalid depths (0,
    NaN, inf, negative) are dropped. The depth image must have the intrinsics' size and the
    mask the depth image's (:class:`SpatialError`, :class:`MaskShapeError`)."""
    h, w = depth.shape
    if (h, w) != (k.height, k.width):
        raise SpatialError(f"depth image is {w}x{h} but CameraInfo says {k.width}x{k.height}")
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (h, w):
        raise MaskShapeError(f"the mask is {mask.shape[-1]}x{mask.shape[0]} but the depth image is {w}x{h}"
                             if mask.ndim == 2 else f"a mask is (H, W), got shape {mask.shape}")
    v, u = np.nonzero(mask)
    z = depth.data[v, u].astype(np.float32) * np.float32(depth.scale)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(z) & (z > 0)
    z, u, v = z[ok], u[ok].astype(np.float32), v[ok].astype(np.float32)
    out = np.empty((len(z), 3), np.float32)
    out[:, 0] = (u - np.float32(k.cx)) * z / np.float32(k.fx)
    out[:, 1] = (v - np.float32(k.cy)) * z / np.float32(k.fy)
    out[:, 2] = z
    return out
