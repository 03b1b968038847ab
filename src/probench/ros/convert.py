"""ALL conversion between ROS messages and probench data (numpy images, Detections).

The image readers are duck-typed: any object with ``height``, ``width``, ``encoding``,
``step``, ``is_bigendian`` and ``data`` (an rclpy ``sensor_msgs/Image``, a ``rosbags``
message, a ``SimpleNamespace`` in a test) converts, without rclpy. Every malformed input
raises a specific :mod:`probench.ros.errors` exception naming the problem; nothing here
trusts ``step``/``data`` to agree.

Message builders import the generated message classes lazily (they need the ROS message
wheels, not a running rclpy). Hot path: a ``rgb8`` image is a zero-copy numpy view of the
message buffer; other encodings take one ``cv2.cvtColor``.
"""

from __future__ import annotations

import array
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from probench.detections import Detections
from probench.ros.errors import (
    CompressedImageError,
    ImageDataError,
    ImageEncodingError,
    ImageSizeError,
    ImageStepError,
    MessageConversionError,
    PromptMessageError,
)

# encoding -> (channels, bytes per channel, conversion to RGB)
ENCODINGS: dict[str, tuple[int, int, str]] = {
    "rgb8": (3, 1, "none"),
    "bgr8": (3, 1, "bgr"),
    "rgba8": (4, 1, "rgba"),
    "bgra8": (4, 1, "bgra"),
    "mono8": (1, 1, "mono"),
    "8UC1": (1, 1, "mono"),
    "mono16": (1, 2, "mono16"),
    "16UC1": (1, 2, "mono16"),
}
MAX_SIDE = 1 << 15  # 32768 px: larger is a corrupt header, not a camera
COMPRESSED_FORMATS = ("jpeg", "jpg", "png")


# -- images: message -> RGB uint8 ---------------------------------------------------------
def _buffer(data: Any) -> np.ndarray:
    """The message's data as a flat uint8 array, without copying when possible."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1).view(np.uint8) if data.flags.c_contiguous else data.astype(np.uint8).ravel()
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except (TypeError, ValueError, BufferError):
        try:
            return np.asarray(data, dtype=np.uint8).reshape(-1)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ImageDataError(f"image data is not a byte buffer ({type(data).__name__})") from exc


def image_to_rgb(msg: Any) -> np.ndarray:
    """A ``sensor_msgs/Image``-like message as an RGB uint8 ``(H, W, 3)`` array.

    Encodings: rgb8 (zero-copy view), bgr8, rgba8, bgra8, mono8/8UC1, mono16/16UC1 (scaled
    to 8 bit as cv_bridge does: ``v * 255 / 65535``; ``is_bigendian`` honoured). Row padding
    (``step`` > width * pixel size) is supported. Raises ImageEncodingError, ImageSizeError,
    ImageStepError or ImageDataError.
    """
    try:
        encoding = str(msg.encoding)
        height, width, step = int(msg.height), int(msg.width), int(msg.step)
        bigendian = bool(msg.is_bigendian)
        data = msg.data
    except (AttributeError, TypeError, ValueError) as exc:
        raise MessageConversionError(f"not an image message: {exc}") from exc
    spec = ENCODINGS.get(encoding) or ENCODINGS.get(encoding.strip().lower())
    if spec is None:
        raise ImageEncodingError(
            f"unsupported image encoding {encoding!r} (supported: {', '.join(ENCODINGS)})"
        )
    channels, depth, kind = spec
    if height <= 0 or width <= 0:
        raise ImageSizeError(f"image has zero size: {width}x{height}")
    if height > MAX_SIDE or width > MAX_SIDE:
        raise ImageSizeError(f"image size {width}x{height} exceeds {MAX_SIDE} px per side")
    row_bytes = width * channels * depth
    if step < row_bytes:
        raise ImageStepError(
            f"step {step} is smaller than width {width} x {channels * depth} bytes = {row_bytes} ({encoding})"
        )
    if step % depth:
        raise ImageStepError(f"step {step} is not a multiple of the {depth}-byte sample size ({encoding})")
    buf = _buffer(data)
    expected = step * height
    if buf.size != expected:
        what = "truncated" if buf.size < expected else "too long"
        raise ImageDataError(
            f"image data {what}: {buf.size} bytes, expected step {step} x height {height} = {expected}"
        )
    rows = buf.reshape(height, step)[:, :row_bytes]  # a view: padding skipped, no copy
    if depth == 2:
        rows = rows.view(">u2" if bigendian else "<u2")
    pixels = rows.reshape(height, width, channels)
    if kind == "none":
        return pixels
    import cv2

    if kind == "bgr":
        return cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)
    if kind == "rgba":
        return cv2.cvtColor(pixels, cv2.COLOR_RGBA2RGB)
    if kind == "bgra":
        return cv2.cvtColor(pixels, cv2.COLOR_BGRA2RGB)
    gray = pixels[:, :, 0]
    if kind == "mono16":
        gray = np.ascontiguousarray(gray, dtype=np.uint16)  # native byte order for cv2
        gray = cv2.convertScaleAbs(gray, alpha=255.0 / 65535.0)
    return cv2.cvtColor(np.ascontiguousarray(gray), cv2.COLOR_GRAY2RGB)


def compressed_to_rgb(msg: Any) -> np.ndarray:
    """A ``sensor_msgs/CompressedImage``-like message (jpeg or png) as RGB uint8.

    ``format`` may be plain (``"jpeg"``) or image_transport's (``"rgb8; jpeg compressed
    bgr8"``); empty means "guess from the bytes". Depth formats are refused.
    """
    try:
        fmt = str(msg.format).strip().lower()
        data = msg.data
    except AttributeError as exc:
        raise MessageConversionError(f"not a compressed image message: {exc}") from exc
    if "compresseddepth" in fmt or (fmt and not any(k in fmt for k in COMPRESSED_FORMATS)):
        raise CompressedImageError(f"unsupported compressed format {msg.format!r} (jpeg or png only)")
    buf = _buffer(data)
    if buf.size == 0:
        raise CompressedImageError("compressed image has no data")
    import cv2

    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    if bgr is None or bgr.size == 0:
        raise CompressedImageError(
            f"compressed image ({buf.size} bytes, format {msg.format!r}) does not decode"
        )
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def rgb_to_fields(rgb: np.ndarray, encoding: str = "rgb8") -> SimpleNamespace:
    """An RGB uint8 image as Image fields in ``encoding`` (tests, bags and the debug image).

    Returns ``height, width, encoding, is_bigendian, step, data`` (bytes, little-endian).
    """
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise MessageConversionError(f"expected an RGB uint8 (H, W, 3) array, got {rgb.dtype} {rgb.shape}")
    if encoding not in ENCODINGS:
        raise ImageEncodingError(f"unsupported image encoding {encoding!r}")
    import cv2

    kind = ENCODINGS[encoding][2]
    if kind == "none":
        out = np.ascontiguousarray(rgb)
    elif kind == "bgr":
        out = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    elif kind == "rgba":
        out = cv2.cvtColor(rgb, cv2.COLOR_RGB2RGBA)
    elif kind == "bgra":
        out = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGRA)
    else:
        out = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        if kind == "mono16":
            out = out.astype("<u2") * 257  # 255 -> 65535, the inverse of the 8-bit scaling
    h, w = rgb.shape[:2]
    return SimpleNamespace(
        height=h, width=w, encoding=encoding, is_bigendian=0,
        step=out.strides[0], data=out.tobytes(),
    )


# -- prompts ------------------------------------------------------------------------------
def prompt_text(serialized: bytes) -> str:
    """The text of a serialized ``std_msgs/String`` (from a raw subscription), strictly UTF-8.

    rclpy itself decodes strings with replacement characters, so invalid bytes would turn
    into a prompt of U+FFFD; here they raise :class:`PromptMessageError` instead.
    """
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import String

    try:
        text = deserialize_message(serialized, String).data
    except Exception as exc:  # any failure means a malformed message
        raise PromptMessageError(f"undecodable message ({type(exc).__name__}: {exc})") from exc
    if "\ufffd" in text:  # maybe a genuine U+FFFD, maybe a decoding failure: check the bytes
        data = bytes(serialized)
        order = "little" if len(data) > 1 and data[1] & 1 else "big"  # CDR encapsulation id
        n = int.from_bytes(data[4:8], order) if len(data) >= 8 else -1
        try:
            if n < 1 or len(data) < 8 + n:
                raise ValueError("bad string length")
            return data[8 : 8 + n - 1].decode("utf-8")
        except (ValueError, UnicodeDecodeError) as exc:
            raise PromptMessageError(f"undecodable message: not valid UTF-8 ({exc})") from exc
    return text


# -- messages (need the ROS message packages, not a running rclpy) -------------------------
def _msgs() -> SimpleNamespace:
    global _MSGS
    if _MSGS is None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
        from sensor_msgs.msg import Image
        from vision_msgs.msg import (
            Detection2D,
            Detection2DArray,
            LabelInfo,
            ObjectHypothesisWithPose,
            VisionClass,
        )

        _MSGS = SimpleNamespace(
            Image=Image, Detection2D=Detection2D, Detection2DArray=Detection2DArray,
            ObjectHypothesisWithPose=ObjectHypothesisWithPose, LabelInfo=LabelInfo,
            VisionClass=VisionClass, DiagnosticArray=DiagnosticArray,
            DiagnosticStatus=DiagnosticStatus, KeyValue=KeyValue,
        )
    return _MSGS


_MSGS: SimpleNamespace | None = None


def rgb_to_image_msg(rgb: np.ndarray, header: Any, encoding: str = "rgb8") -> Any:
    """An RGB uint8 array as a ``sensor_msgs/Image`` with ``header`` (one buffer copy)."""
    m = _msgs()
    msg = m.Image()
    msg.header = header
    if encoding == "rgb8" and rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.dtype == np.uint8:
        out = np.ascontiguousarray(rgb)
        msg.height, msg.width = out.shape[:2]
        msg.encoding, msg.is_bigendian, msg.step = "rgb8", 0, out.strides[0]
        data = array.array("B")
        data.frombytes(memoryview(out).cast("B"))  # skips the per-element checks of the setter
        msg.data = data
        return msg
    f = rgb_to_fields(rgb, encoding)
    msg.height, msg.width, msg.encoding = f.height, f.width, f.encoding
    msg.is_bigendian, msg.step = f.is_bigendian, f.step
    msg.data = array.array("B", f.data)
    return msg


def detections_to_msg(
    detections: Detections,
    header: Any,
    prompts: Sequence[str],
    *,
    max_detections: int | None = None,
) -> Any:
    """``vision_msgs/Detection2DArray``: the array and each detection carry ``header``; each
    result's ``class_id`` is the prompt text, ``score`` in [0, 1]; bbox center/size in pixels.
    With ``max_detections`` only the highest-scoring ones are kept. An empty ``detections``
    gives an empty array (still published: the evaluator counts it as an answer)."""
    m = _msgs()
    out = m.Detection2DArray()
    out.header = header
    n = len(detections)
    if n == 0:
        return out
    order = np.argsort(-detections.scores, kind="stable")
    if max_detections is not None and n > max_detections:
        order = order[: max(0, int(max_detections))]
    xyxy = detections.xyxy[order]
    pidx = detections.prompt_index[order]
    if len(pidx) and int(pidx.max()) >= len(prompts):
        raise MessageConversionError(
            f"detection answers prompt {int(pidx.max())} but only {len(prompts)} prompts are active"
        )
    cx = ((xyxy[:, 0] + xyxy[:, 2]) * 0.5).tolist()
    cy = ((xyxy[:, 1] + xyxy[:, 3]) * 0.5).tolist()
    sx = (xyxy[:, 2] - xyxy[:, 0]).tolist()
    sy = (xyxy[:, 3] - xyxy[:, 1]).tolist()
    scores = detections.scores[order].tolist()
    labels = [prompts[i] for i in pidx.tolist()]
    dets = out.detections
    for i in range(len(order)):
        d = m.Detection2D()
        d.header = header
        bbox = d.bbox
        bbox.center.position.x = cx[i]
        bbox.center.position.y = cy[i]
        bbox.size_x = sx[i]
        bbox.size_y = sy[i]
        hyp = m.ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = labels[i]
        hyp.hypothesis.score = scores[i]
        d.results.append(hyp)
        dets.append(d)
    return out


def detection_array_to_arrays(msg: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The inverse of :func:`detections_to_msg`: ``(xyxy (N, 4), scores (N,), class_ids)``.
    A detection without results gets score 0 and class_id ""."""
    n = len(msg.detections)
    xyxy = np.zeros((n, 4))
    scores = np.zeros(n)
    class_ids: list[str] = []
    for i, d in enumerate(msg.detections):
        b = d.bbox
        cx, cy, sx, sy = b.center.position.x, b.center.position.y, b.size_x, b.size_y
        xyxy[i] = (cx - sx / 2, cy - sy / 2, cx + sx / 2, cy + sy / 2)
        if d.results:
            scores[i] = d.results[0].hypothesis.score
            class_ids.append(d.results[0].hypothesis.class_id)
        else:
            class_ids.append("")
    return xyxy, scores, class_ids


def prompts_to_label_info(prompts: Sequence[str], header: Any, threshold: float = 0.0) -> Any:
    """``vision_msgs/LabelInfo`` for the active prompts: class_map[i] = (i, prompt i)."""
    m = _msgs()
    msg = m.LabelInfo()
    msg.header = header
    for i, p in enumerate(prompts):
        vc = m.VisionClass()
        vc.class_id = i
        vc.class_name = p
        msg.class_map.append(vc)
    msg.threshold = float(threshold)
    return msg


def label_info_to_prompts(msg: Any) -> list[str]:
    """The prompt list a LabelInfo describes, in class_id order."""
    return [vc.class_name for vc in sorted(msg.class_map, key=lambda vc: vc.class_id)]


LEVELS = ("OK", "WARN", "ERROR", "STALE")


def stats_to_diagnostics(
    name: str,
    hardware_id: str,
    level: str,
    message: str,
    values: Mapping[str, Any],
    stamp: Any,
) -> Any:
    """A ``diagnostic_msgs/DiagnosticArray`` with one status; floats get 3 decimals."""
    if level not in LEVELS:
        raise MessageConversionError(f"diagnostic level must be one of {LEVELS}, got {level!r}")
    m = _msgs()
    status = m.DiagnosticStatus()
    status.level = getattr(m.DiagnosticStatus, level)
    status.name = name
    status.hardware_id = hardware_id
    status.message = message
    for k, v in values.items():
        kv = m.KeyValue()
        kv.key = str(k)
        kv.value = f"{v:.3f}" if isinstance(v, float) else str(v)
        status.values.append(kv)
    out = m.DiagnosticArray()
    out.header.stamp = stamp
    out.status.append(status)
    return out
