"""The serialized (CDR) mask outputs of a frame, written with :mod:`.wire`'s CDR writer.

The grounding node's instance-mask topics (docs/GROUNDING_NODE.md, "Instance masks"):

- ``segmentation/instances``: ``sensor_msgs/Image``, ``mono16``: 0 = background, k >= 1 =
  the k-th Detection2D (1-based) of the frame's Detection2DArray;
- ``segmentation/semantic``: ``sensor_msgs/Image``, ``mono8``: 0 = background, c >= 1 =
  prompt c - 1; ``segmentation/label_info`` (:func:`semantic_label_info_to_cdr`) names them;
- ``segmentation/confidence``: ``sensor_msgs/Image``, ``mono8``: round(255 x score) of the
  pixel's instance, 0 on background;
- the target's points: ``sensor_msgs/PointCloud2`` (:func:`points_to_cdr`).

The arrays come from :func:`probench.spatial.masks.compose_masks` and
:func:`probench.spatial.masks.target_points`. XCDR1 little-endian, as :mod:`.wire`;
test/msgs/test_msgs_masks_encode.py checks the bytes against rclpy's and rosbags'
serializers.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from probench.msgs.errors import MessageConversionError, SemanticClassesError
from probench.msgs.shapes import Header
from probench.msgs.wire import _cdr_header, _cdr_string, _CdrOut, label_info_to_cdr

__all__ = [
    "BACKGROUND",
    "MAX_INSTANCES",
    "MAX_SEMANTIC_CLASSES",
    "MONO_ENCODINGS",
    "check_semantic_classes",
    "mono_image_to_cdr",
    "points_to_cdr",
    "semantic_label_info_to_cdr",
]

BACKGROUND = "background"  # the name of class 0 in the semantic LabelInfo
MAX_SEMANTIC_CLASSES = 255  # mono8: values 1..255 are prompts, 0 is background
MAX_INSTANCES = 65535  # mono16: values 1..65535 are detections, 0 is background
MONO_ENCODINGS = {1: "mono8", 2: "mono16"}  # bytes per pixel of an unsigned array -> encoding
_FLOAT32 = 7  # sensor_msgs/PointField.FLOAT32


def check_semantic_classes(prompts: Sequence[str]) -> None:
    """A prompt set the semantic image can hold (at most :data:`MAX_SEMANTIC_CLASSES`), else
    a one-line :class:`SemanticClassesError`."""
    if len(prompts) > MAX_SEMANTIC_CLASSES:
        raise SemanticClassesError(
            f"{len(prompts)} prompts: the semantic mask (mono8, 0 = background) holds at most "
            f"{MAX_SEMANTIC_CLASSES}")


def semantic_label_info_to_cdr(prompts: Sequence[str], header: Header, threshold: float = 0.0) -> bytes:
    """``vision_msgs/LabelInfo`` of the semantic image, serialized: class_map 0 =
    ``"background"``, c = prompt c - 1 (:func:`.wire.label_info_to_cdr` of the list with
    "background" first). Class 0 is background by its id, whatever a prompt is called."""
    check_semantic_classes(prompts)
    return label_info_to_cdr([BACKGROUND, *prompts], header, threshold)


def _append_raw(out: _CdrOut, arr: np.ndarray) -> None:
    """A C-contiguous array's bytes, joined into the message without a copy of their own."""
    if arr.nbytes:
        out.parts.append(memoryview(arr).cast("B"))  # type: ignore[arg-type]  # join takes any buffer
    out.off += arr.nbytes


def _image_head(header: Header, height: int, width: int, encoding: str, step: int) -> _CdrOut:
    out = _CdrOut()
    out.put(_cdr_header(header), 4)
    out.put(struct.pack("<II", height, width), 4)
    out.put(_cdr_string(encoding), 4)
    out.put(b"\x00", 1)  # is_bigendian: false
    out.put(struct.pack("<I", step), 4)
    return out


def mono_image_to_cdr(image: np.ndarray, header: Header) -> bytes:
    """``sensor_msgs/Image`` of a 2-D ``uint8`` (``mono8``, step = width) or ``uint16``
    (``mono16``, little-endian whatever the array's byte order, step = 2 x width) array,
    serialized."""
    arr = np.asarray(image)
    itemsize = arr.dtype.itemsize
    if arr.ndim != 2 or arr.dtype.kind != "u" or itemsize not in MONO_ENCODINGS:
        raise MessageConversionError(
            f"a mono image is a 2-D uint8 or uint16 array, got {arr.dtype} {arr.shape}")
    encoding = MONO_ENCODINGS[itemsize]
    height, width = arr.shape
    out = _image_head(header, height, width, encoding, itemsize * width)
    data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    out.put(struct.pack("<I", data.nbytes), 4)
    _append_raw(out, data)
    return out.value()


def points_to_cdr(points: np.ndarray, header: Header) -> bytes:
    """``sensor_msgs/PointCloud2`` of ``points`` ((M, 3), metres), serialized: height 1,
    width M, fields x, y, z (float32 at offsets 0, 4, 8), point_step 12, row_step 12 M,
    little-endian, is_dense true (the points hold no invalid values: drop them first)."""
    pts = np.ascontiguousarray(np.asarray(points, dtype="<f4").reshape(-1, 3))
    if not np.all(np.isfinite(pts)):
        raise MessageConversionError("a dense PointCloud2 holds only finite points")
    out = _CdrOut()
    out.put(_cdr_header(header), 4)
    out.put(struct.pack("<III", 1, len(pts), 3), 4)  # height, width, len(fields)
    for i, name in enumerate("xyz"):  # PointField: name, offset, datatype, count
        out.put(_cdr_string(name), 4)
        out.put(struct.pack("<I", 4 * i), 4)
        out.put(struct.pack("<B", _FLOAT32), 1)
        out.put(struct.pack("<I", 1), 4)
    out.put(b"\x00", 1)  # is_bigendian: false
    out.put(struct.pack("<III", 12, 12 * len(pts), pts.nbytes), 4)  # point_step, row_step, len(data)
    _append_raw(out, pts)
    out.put(b"\x01", 1)  # is_dense
    return out.value()
