"""Image messages (any duck-typed object with the sensor_msgs fields) <-> RGB uint8 arrays."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import numpy as np

from probench.msgs.errors import (
    CompressedImageError,
    ImageDataError,
    ImageEncodingError,
    ImageSizeError,
    ImageStepError,
    MessageConversionError,
)
from probench.msgs.shapes import CompressedFields, ImageFields

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
# Pixel budget of a compressed frame, checked from its header before decoding (the node's
# ``max_image_pixels`` parameter, ``probench ground --max-pixels``): a 1 MB PNG can decode to
# 30000x30000 (2.7 GB of RGB). 50 MP is 6x a 4K frame.
DEFAULT_MAX_PIXELS = 50_000_000
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, progressive, lossless, ...): not DHT C4, JPG C8, DAC CC
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


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


# cv2 conversions per colour kind (ENCODINGS' third field), by the name of cv2's constant
_TO_RGB = {"bgr": "COLOR_BGR2RGB", "rgba": "COLOR_RGBA2RGB", "bgra": "COLOR_BGRA2RGB"}
_FROM_RGB = {"bgr": "COLOR_RGB2BGR", "rgba": "COLOR_RGB2RGBA", "bgra": "COLOR_RGB2BGRA"}


def image_to_rgb(msg: ImageFields) -> np.ndarray:
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

    rgb: np.ndarray  # (cv2 is untyped here)
    if kind in _TO_RGB:
        rgb = cv2.cvtColor(pixels, getattr(cv2, _TO_RGB[kind]))
    else:
        gray = pixels[:, :, 0]
        if kind == "mono16":
            gray = np.ascontiguousarray(gray, dtype=np.uint16)  # native byte order for cv2
            gray = cv2.convertScaleAbs(gray, alpha=255.0 / 65535.0)
        rgb = cv2.cvtColor(np.ascontiguousarray(gray), cv2.COLOR_GRAY2RGB)
    return rgb


def _compressed_payload(msg: CompressedFields) -> tuple[np.ndarray, str]:
    """The checked byte buffer and lower-case format of a CompressedImage-like message."""
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
    return buf, fmt


def _undecodable(buf: np.ndarray, fmt: str) -> CompressedImageError:
    return CompressedImageError(f"compressed image ({buf.size} bytes, format {fmt!r}) does not decode")


def compressed_size(buf: np.ndarray) -> tuple[int, int] | None:
    """``(width, height)`` of a PNG or JPEG from its header alone (the PNG's IHDR chunk, the
    JPEG's start-of-frame segment), without decoding; None when the bytes are neither or the
    header does not read."""
    mv = np.ascontiguousarray(buf, dtype=np.uint8).data.cast("B")
    n = len(mv)
    if n >= 24 and bytes(mv[:8]) == _PNG_SIGNATURE and bytes(mv[12:16]) == b"IHDR":
        width, height = struct.unpack_from(">II", mv, 16)
        return int(width), int(height)
    if n < 4 or mv[0] != 0xFF or mv[1] != 0xD8:
        return None
    i = 2
    while i + 1 < n:
        if mv[i] != 0xFF:
            return None  # not at a marker: a broken header
        while i < n and mv[i] == 0xFF:  # fill bytes
            i += 1
        if i >= n:
            return None
        marker = mv[i]
        i += 1
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # standalone markers
            continue
        if marker in (0xD9, 0xDA) or i + 2 > n:  # image end / scan data before any frame header
            return None
        (length,) = struct.unpack_from(">H", mv, i)
        if marker in _JPEG_SOF:
            if i + 7 > n:
                return None
            height, width = struct.unpack_from(">HH", mv, i + 3)
            return (int(width), int(height)) if height else None  # height 0: defined later (DNL)
        if length < 2:
            return None
        i += length
    return None


def check_pixel_budget(buf: np.ndarray, fmt: str, max_pixels: int | None) -> None:
    """Refuse a compressed frame from its header when it would decode to more than
    ``max_pixels`` pixels (or more than :data:`MAX_SIDE` per side); None: no budget. A
    header that does not read is refused too: the budget cannot be checked."""
    if max_pixels is None:
        return
    size = compressed_size(buf)
    if size is None:
        raise CompressedImageError(
            f"compressed image ({buf.size} bytes, format {fmt!r}) does not decode: no readable PNG or JPEG "
            "header")
    width, height = size
    if width <= 0 or height <= 0:
        raise ImageSizeError(f"compressed image header says {width}x{height}")
    if width > MAX_SIDE or height > MAX_SIDE or width * height > max_pixels:
        raise ImageSizeError(
            f"compressed image of {buf.size} bytes would decode to {width}x{height} = "
            f"{width * height / 1e6:.1f} MP, over the budget of {max_pixels / 1e6:g} MP "
            f"(max_image_pixels / --max-pixels); refused before decoding")


def compressed_to_rgb(msg: CompressedFields, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """A ``sensor_msgs/CompressedImage``-like message (jpeg or png) as RGB uint8.

    ``format`` may be plain (``"jpeg"``) or image_transport's (``"rgb8; jpeg compressed
    bgr8"``); empty means "guess from the bytes". Depth formats are refused.

    Decoded by OpenCV straight to RGB (``IMREAD_COLOR_RGB``): measured against the
    alternatives installed here (OpenCV to BGR + ``cvtColor``, PIL, torchvision's
    ``decode_image``), it is the fastest or tied (libjpeg-turbo) for JPEG and the fastest
    for PNG, and gives the same pixels (``bench/bench_decode.py``, docs/ACCELERATION.md).

    A frame whose header gives more than ``max_pixels`` pixels is refused before decoding
    (:func:`check_pixel_budget`, an :class:`ImageSizeError`).
    """
    buf, _fmt = _compressed_payload(msg)
    check_pixel_budget(buf, msg.format, max_pixels)
    import cv2

    rgb_flag = getattr(cv2, "IMREAD_COLOR_RGB", None)  # OpenCV >= 4.10
    if rgb_flag is not None:
        rgb: np.ndarray | None = cv2.imdecode(buf, rgb_flag)  # (cv2 is untyped here)
        if rgb is None or rgb.size == 0:
            raise _undecodable(buf, msg.format)
        return rgb
    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    if bgr is None or bgr.size == 0:
        raise _undecodable(buf, msg.format)
    converted: np.ndarray = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    return converted


def is_jpeg(buf: np.ndarray) -> bool:
    return buf.size > 3 and bool(buf[0] == 0xFF and buf[1] == 0xD8 and buf[2] == 0xFF)


def compressed_to_device(msg: CompressedFields, device: str,
                         max_pixels: int | None = DEFAULT_MAX_PIXELS) -> Any:
    """The frame of a CompressedImage-like message for a model on ``device``: on CUDA a JPEG
    is decoded by the GPU (``torchvision.io.decode_jpeg``, nvJPEG) into an RGB uint8
    ``(H, W, 3)`` tensor there, which the detectors' device preprocessing takes as is;
    anything else is :func:`compressed_to_rgb` (a numpy array). UNTESTED on a GPU here."""
    buf, fmt = _compressed_payload(msg)
    if not str(device).startswith("cuda") or not is_jpeg(buf):
        return compressed_to_rgb(msg, max_pixels)
    check_pixel_budget(buf, fmt, max_pixels)
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    data = torch.from_numpy(buf if buf.flags.writeable else buf.copy())
    try:
        chw = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
    except RuntimeError as exc:
        raise CompressedImageError(f"compressed image ({buf.size} bytes, format {fmt!r}) does not decode: "
                                   f"{exc}") from exc
    return chw.permute(1, 2, 0)


def rgb_to_fields(rgb: np.ndarray, encoding: str = "rgb8") -> ImageFields:
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
    elif kind in _FROM_RGB:
        out = cv2.cvtColor(rgb, getattr(cv2, _FROM_RGB[kind]))
    else:
        out = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        if kind == "mono16":
            out = out.astype("<u2") * 257  # 255 -> 65535, the inverse of the 8-bit scaling
    h, w = rgb.shape[:2]
    return SimpleNamespace(
        height=h, width=w, encoding=encoding, is_bigendian=0,
        step=out.strides[0], data=out.tobytes(),
    )


