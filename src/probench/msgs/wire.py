"""Serialized (CDR) messages straight from/to the wire: the grounding node's hot path.

rclpy converts every incoming message into Python objects (for an Image: a copy of the
pixels into an array.array, ~0.6 ms at 640x480) and every outgoing one from them (100
nested Detection2D: ~1 ms). The node subscribes and publishes raw bytes instead; these
functions read and write them. Tests check them against rclpy's own (de)serialization.

Read here: images, prompts, header stamps, and the grounding node's own outputs that the
evaluator takes in (:func:`detections_from_cdr`, :func:`frame_failure_from_cdr`: the
inverses of their encoders, so both of the evaluator's links decode the same bytes the
same way).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from probench.detections import Detections, DetectionsError
from probench.msgs.errors import MessageConversionError, PromptMessageError
from probench.msgs.images import DEFAULT_MAX_PIXELS, compressed_to_rgb, image_to_rgb
from probench.msgs.shapes import CompressedMessage, Header, ImageMessage, Stamp, stamp_at, stamp_ns


# -- incoming -----------------------------------------------------------------------------
# rclpy's conversion of an incoming Image into a Python message copies the pixels into an
# array.array (~0.6 ms for 640x480); the node subscribes raw and reads the CDR bytes here,
# the pixels staying a zero-copy view. XCDR1 (what ROS 2 middlewares send), either byte order.
class _Cdr:
    def __init__(self, data: bytes) -> None:
        self.buf = memoryview(data).cast("B")
        if len(self.buf) < 4:
            raise MessageConversionError(f"serialized message too short ({len(self.buf)} bytes)")
        kind = bytes(self.buf[:2])
        if kind not in (b"\x00\x00", b"\x00\x01"):
            raise MessageConversionError(f"unsupported CDR encapsulation {kind.hex()}")
        self.order = "<" if kind == b"\x00\x01" else ">"
        self.off = 4

    def _take(self, fmt: str, align: int) -> tuple[int, ...]:  # (every field read here is an integer)
        self.off += -(self.off - 4) % align
        size = struct.calcsize(fmt)
        if self.off + size > len(self.buf):
            raise MessageConversionError("serialized message is truncated")
        out: tuple[int, ...] = struct.unpack_from(self.order + fmt, self.buf, self.off)
        self.off += size
        return out

    def uint8(self) -> int:
        return self._take("B", 1)[0]

    def uint32(self) -> int:
        return self._take("I", 4)[0]

    def float64s(self, n: int) -> tuple[float, ...]:
        self.off += -(self.off - 4) % 8
        end = self.off + 8 * n
        if end > len(self.buf):
            raise MessageConversionError("serialized message is truncated")
        out: tuple[float, ...] = struct.unpack_from(f"{self.order}{n}d", self.buf, self.off)
        self.off = end
        return out

    def count(self, min_size: int) -> int:
        """A sequence's length, checked against what is left (each element at least
        ``min_size`` bytes): a corrupt length is named, not allocated."""
        n = self.uint32()
        if n * min_size > len(self.buf) - self.off:
            raise MessageConversionError(f"serialized message is truncated ({n} elements announced)")
        return n

    def octets(self) -> memoryview:
        n = self.uint32()
        if self.off + n > len(self.buf):
            raise MessageConversionError(f"serialized message is truncated ({n}-byte field)")
        out = self.buf[self.off : self.off + n]
        self.off += n
        return out

    def string(self) -> str:
        raw = self.octets()
        try:
            return bytes(raw[:-1] if len(raw) and raw[-1] == 0 else raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageConversionError(f"string field is not UTF-8: {exc}") from exc

    def stamp(self) -> Stamp:
        sec, nanosec = self._take("iI", 4)
        out: Stamp = SimpleNamespace(sec=sec, nanosec=nanosec)
        return out

    def header(self) -> Header:
        stamp = self.stamp()
        return SimpleNamespace(stamp=stamp, frame_id=self.string())


def top_order(detections: Detections, max_detections: int | None = None) -> np.ndarray:
    """Indices of the detections by descending score, at most ``max_detections`` of them
    (what gets published)."""
    order = np.argsort(-detections.scores, kind="stable")
    if max_detections is not None:
        order = order[: max(0, int(max_detections))]
    return order


def checked_prompt_index(detections: Detections, order: np.ndarray, prompts: Sequence[str]) -> np.ndarray:
    pidx: np.ndarray = detections.prompt_index[order]
    if len(pidx) and int(pidx.max()) >= len(prompts):
        raise MessageConversionError(
            f"detection answers prompt {int(pidx.max())} but only {len(prompts)} prompts are active"
        )
    return pidx


def image_from_cdr(data: bytes) -> ImageMessage:
    """A serialized ``sensor_msgs/Image`` as its fields (``header`` with ``stamp.sec``/
    ``stamp.nanosec``/``frame_id``; ``data`` a zero-copy memoryview), for :func:`image_to_rgb`."""
    r = _Cdr(data)
    header = r.header()
    height, width = r.uint32(), r.uint32()
    encoding = r.string()
    is_bigendian = r.uint8()
    step = r.uint32()
    return SimpleNamespace(header=header, height=height, width=width, encoding=encoding,
                           is_bigendian=is_bigendian, step=step, data=r.octets())


def compressed_from_cdr(data: bytes) -> CompressedMessage:
    """A serialized ``sensor_msgs/CompressedImage`` as its fields, for :func:`compressed_to_rgb`."""
    r = _Cdr(data)
    header = r.header()
    fmt = r.string()
    return SimpleNamespace(header=header, format=fmt, data=r.octets())


def header_stamp_ns(data: bytes) -> int:
    """The header stamp (ns) of a serialized message that begins with a ``std_msgs/Header``
    (Image, CompressedImage, Detection2DArray): 8 bytes read, nothing else parsed; a
    :class:`MessageConversionError` when they are not there (not CDR, truncated)."""
    return stamp_ns(_Cdr(data).stamp())


def restamp_cdr(data: bytes, stamp_ns: int) -> bytes:
    """A serialized message that begins with a ``std_msgs/Header`` (Image, CompressedImage),
    its header stamp set to ``stamp_ns`` (what a publisher that stamps a recorded frame sends)."""
    r = _Cdr(data)
    r._take("iI", 4)  # checks the encapsulation and the length
    stamp = stamp_at(stamp_ns)
    return bytes(data[:4]) + struct.pack(r.order + "iI", stamp.sec, stamp.nanosec) + bytes(data[12:])


def rgb_from_cdr(data: bytes, *, compressed: bool,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS) -> tuple[Header, np.ndarray]:
    """``(header, rgb)`` of a serialized ``sensor_msgs/CompressedImage`` (``compressed``)
    or ``sensor_msgs/Image``. The RGB array of a raw image may be a read-only view of
    ``data``: copy it before writing. A compressed frame over ``max_pixels`` is refused
    from its header, before decoding."""
    if compressed:
        packed = compressed_from_cdr(data)
        return packed.header, compressed_to_rgb(packed, max_pixels)
    image = image_from_cdr(data)
    return image.header, image_to_rgb(image)


# -- prompts ------------------------------------------------------------------------------
def prompt_text(serialized: bytes) -> str:
    """The text of a serialized ``std_msgs/String`` (from a raw subscription), strictly UTF-8.

    rclpy itself decodes strings with replacement characters, so invalid bytes would turn
    into a prompt of U+FFFD; here they raise :class:`PromptMessageError` instead.
    """
    try:
        return _Cdr(bytes(serialized)).string()
    except MessageConversionError as exc:
        raise PromptMessageError(f"undecodable message: {exc}") from exc


# -- outgoing -----------------------------------------------------------------------------
# The one encoder of every message probench builds itself: the grounding node publishes
# these bytes (Publisher.publish(bytes): rclpy's conversion of 100 nested Python messages
# costs ~0.7 ms per frame), ``probench ground`` writes the same bytes into its output bag, and
# probench.ros.convert's message objects are these bytes deserialized. XCDR1 little-endian
# (what rclpy/Fast DDS and rosbags produce), vision_msgs 4.x field layout; alignment counts
# from after the 4-byte encapsulation header. test/msgs/test_msgs_wire_encode.py checks the
# bytes equal rclpy's serialize_message and the rosbags typestore's serialize_cdr.
_CDR_LE = b"\x00\x01\x00\x00"
_POSE_BLOCK = struct.pack("<43d", 0, 0, 0, 0, 0, 0, 1, *([0.0] * 36))  # PoseWithCovariance()
_EMPTY_ID = b"\x01\x00\x00\x00\x00"  # Detection2D.id: "" (length 1 = the NUL)
_PAD = tuple(b"\x00" * n for n in range(8))
_MAX_CLASSES = 1 << 16  # VisionClass.class_id is a uint16


class _CdrOut:
    """XCDR1 little-endian bytes, each field aligned to its own size."""

    def __init__(self) -> None:
        self.parts = [_CDR_LE]
        self.off = 0  # offset in the payload (after the encapsulation header)

    def put(self, data: bytes, align: int) -> None:
        pad = -self.off % align
        self.parts += [_PAD[pad], data]
        self.off += pad + len(data)

    def value(self) -> bytes:
        return b"".join(self.parts)


def _cdr_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<I", len(raw) + 1) + raw + b"\x00"


def _cdr_header(header: Header) -> bytes:
    """``std_msgs/Header`` (4-aligned: its first field is an int32, its string follows)."""
    return struct.pack("<iI", int(header.stamp.sec), int(header.stamp.nanosec)) + _cdr_string(
        str(header.frame_id))


def detections_to_cdr(
    detections: Detections,
    header: Header,
    prompts: Sequence[str],
    *,
    max_detections: int | None = None,
) -> bytes:
    """``vision_msgs/Detection2DArray``, serialized: the array and each detection carry
    ``header``; each detection has one result, ``class_id`` the prompt text and ``score`` in
    [0, 1] (its pose the default ``PoseWithCovariance``); bbox center/size in pixels, theta
    0; ``id`` the track id (the detections' ``tracker_id``; "" for -1 or without them). With
    ``max_detections`` only the highest-scoring ones are kept, best first.
    An empty ``detections`` gives an empty array (still published: the evaluator counts it
    as an answer)."""
    order = top_order(detections, max_detections)
    xyxy = detections.xyxy[order]
    pidx = checked_prompt_index(detections, order, prompts)
    hdr = _cdr_header(header)
    out = _CdrOut()
    out.put(hdr, 4)
    out.put(struct.pack("<I", len(order)), 4)
    if len(order):
        labels = [b"\x01\x00\x00\x00" + _cdr_string(p) for p in prompts]  # results: 1, class_id
        boxes = np.empty((len(order), 6))
        boxes[:, 0] = detections.scores[order]
        boxes[:, 1] = (xyxy[:, 0] + xyxy[:, 2]) * 0.5  # bbox.center.position.x
        boxes[:, 2] = (xyxy[:, 1] + xyxy[:, 3]) * 0.5
        boxes[:, 3] = 0.0  # bbox.center.theta
        boxes[:, 4] = xyxy[:, 2] - xyxy[:, 0]  # bbox.size_x
        boxes[:, 5] = xyxy[:, 3] - xyxy[:, 1]
        raw = boxes.astype("<f8").tobytes()
        tids = [-1] * len(order) if detections.tracker_id is None else detections.tracker_id[order].tolist()
        ids = [_cdr_string(str(t)) if t >= 0 else _EMPTY_ID for t in tids]
        parts, off, n_hdr = out.parts, out.off, len(hdr)
        for i, pi in enumerate(pidx.tolist()):  # inlined out.put: the hot path (100 per frame)
            label = labels[pi]
            pad0 = -off % 4  # Detection2D.header
            off += pad0 + n_hdr
            pad1 = -off % 4  # results
            off += pad1 + len(label)
            pad2 = -off % 8  # score, pose, bbox (float64s), then id
            off += pad2 + 8 + len(_POSE_BLOCK) + 40 + len(ids[i])
            row = 48 * i
            parts += [_PAD[pad0], hdr, _PAD[pad1], label, _PAD[pad2], raw[row : row + 8], _POSE_BLOCK,
                      raw[row + 8 : row + 48], ids[i]]
        out.off = off
    return out.value()


@dataclass(frozen=True)
class ReadDetections:
    """A serialized ``vision_msgs/Detection2DArray`` read back (:func:`detections_from_cdr`):
    what :func:`detections_to_cdr` was given."""

    header: Header
    detections: Detections  # prompt_index into ``labels``; tracker_id from Detection2D.id
    labels: tuple[str, ...]  # the distinct class ids, in order of first appearance

    @property
    def class_ids(self) -> list[str]:
        """Each detection's class id (its first result's; "" for a detection without one)."""
        return [self.labels[i] for i in self.detections.prompt_index.tolist()]


def _track_id(text: str) -> int:
    """A Detection2D.id as a track id: a non-negative integer, else -1 (none)."""
    return int(text) if text.isascii() and text.isdigit() else -1


# Detection2D after its results: bbox (center x, y, theta, size_x, size_y), then id
_MIN_DETECTION_BYTES = 12 + 4 + 40 + 4  # header (empty frame_id), results count, bbox, id length
_MIN_RESULT_BYTES = 4 + 8 + 8 * 43  # class_id length, score, pose


def detections_from_cdr(data: bytes) -> ReadDetections:
    """A serialized ``vision_msgs/Detection2DArray`` (vision_msgs 4.x, XCDR1, either byte
    order) as :class:`Detections`: the inverse of :func:`detections_to_cdr`, of any node's
    message. Each detection's class id and score are its first result's (a detection
    without results: "" and 0); its box is rebuilt from bbox centre and size; its id is its
    track id when it is a non-negative integer (else -1). ``tracker_id`` is None when no
    detection has an id. A message that cannot be read, or whose boxes or scores are no
    detections (a negative size, a score outside [0, 1]), is a :class:`MessageConversionError`."""
    r = _Cdr(data)
    header = r.header()
    n = r.count(_MIN_DETECTION_BYTES)
    boxes = np.empty((n, 4))
    scores = np.zeros(n)
    labels: dict[str, int] = {}
    index = np.empty(n, np.int64)
    ids = np.full(n, -1, np.int64)
    any_id = False
    for i in range(n):
        r.header()  # Detection2D.header: the array's, by the contract (not checked here)
        label = ""
        for k in range(r.count(_MIN_RESULT_BYTES)):
            class_id = r.string()
            score = r.float64s(1)[0]
            r.float64s(43)  # pose
            if k == 0:
                label, scores[i] = class_id, score
        cx, cy, _theta, sx, sy = r.float64s(5)
        boxes[i] = (cx - sx / 2, cy - sy / 2, cx + sx / 2, cy + sy / 2)
        index[i] = labels.setdefault(label, len(labels))
        text = r.string()
        if text:
            any_id = True
            ids[i] = _track_id(text)
    try:  # checked as a model's output is (boxes were clipped where they were made: not again)
        dets = Detections.from_arrays(boxes, scores, index).with_tracker_id(ids if any_id else None)
    except DetectionsError as exc:
        raise MessageConversionError(f"Detection2DArray holds no valid detections: {exc}") from None
    return ReadDetections(header, dets, tuple(labels))


# -- a frame whose model call raised: diagnostic_msgs/DiagnosticArray on ``frame_errors`` --------
FAILED_FRAME_STATUS = "frame failed"  # DiagnosticStatus.name of a failed frame
_DIAGNOSTIC_ERROR = 2  # diagnostic_msgs/DiagnosticStatus.ERROR


def frame_failure_to_cdr(header: Header, error: str, hardware_id: str = "") -> bytes:
    """``diagnostic_msgs/DiagnosticArray``, serialized: one frame's failure. ``header`` is
    the frame's own (its stamp names the frame); one status, level ERROR, name
    :data:`FAILED_FRAME_STATUS`, message ``error`` (``"ExcType: message"``), ``hardware_id``
    (the model), no values."""
    out = _CdrOut()
    out.put(_cdr_header(header), 4)
    out.put(struct.pack("<I", 1), 4)  # one status
    out.put(struct.pack("<B", _DIAGNOSTIC_ERROR), 1)
    for text in (FAILED_FRAME_STATUS, error, hardware_id):
        out.put(_cdr_string(text), 4)
    out.put(struct.pack("<I", 0), 4)  # values: none
    return out.value()


def frame_failure_from_cdr(data: bytes) -> tuple[Header, str]:
    """``(the frame's header, the error)`` of :func:`frame_failure_to_cdr`'s message: the
    first ERROR status of the array; a :class:`MessageConversionError` when there is none."""
    r = _Cdr(data)
    header = r.header()
    for _ in range(r.count(4 + 1 + 12 + 4)):
        level = r.uint8()
        _name, message, _hardware_id = r.string(), r.string(), r.string()
        for _ in range(r.count(8)):
            r.string(), r.string()
        if level == _DIAGNOSTIC_ERROR:
            return header, message or "an error without a message"
    raise MessageConversionError("a frame_errors message without an ERROR status")


def label_info_to_cdr(prompts: Sequence[str], header: Header, threshold: float = 0.0) -> bytes:
    """``vision_msgs/LabelInfo`` for the active prompts, serialized: class_map[i] =
    (i, prompt i), ``threshold`` the score threshold (float32)."""
    if len(prompts) > _MAX_CLASSES:
        raise MessageConversionError(f"{len(prompts)} prompts: LabelInfo holds at most {_MAX_CLASSES}")
    out = _CdrOut()
    out.put(_cdr_header(header), 4)
    out.put(struct.pack("<I", len(prompts)), 4)
    for i, text in enumerate(prompts):
        out.put(struct.pack("<H", i), 2)  # VisionClass.class_id: uint16
        out.put(_cdr_string(text), 4)
    out.put(struct.pack("<f", float(threshold)), 4)
    return out.value()


_IDENTITY = (0.0, 0.0, 0.0, 1.0)  # geometry_msgs/Quaternion x, y, z, w
_ZERO_COVARIANCE = (0.0,) * 36


def _cdr_id(track_id: int) -> bytes:
    return _cdr_string(str(track_id)) if track_id >= 0 else _EMPTY_ID


def detections_3d_to_cdr(
    header: Header,
    centre: np.ndarray,
    size: np.ndarray,
    class_ids: Sequence[str],
    scores: Sequence[float],
    track_ids: Sequence[int],
) -> bytes:
    """``vision_msgs/Detection3DArray``, serialized: the array and each detection carry
    ``header``; detection ``i``: bbox center = ``centre[i]`` (m, identity orientation), bbox
    size = ``size[i]``, one result (``class_ids[i]``, ``scores[i]``) whose pose is the same
    centre (zero covariance), ``id`` = ``track_ids[i]`` ("" for -1)."""
    hdr = _cdr_header(header)
    out = _CdrOut()
    out.put(hdr, 4)
    out.put(struct.pack("<I", len(class_ids)), 4)
    for c, s, label, score, tid in zip(np.asarray(centre, np.float64).reshape(-1, 3).tolist(),
                                       np.asarray(size, np.float64).reshape(-1, 3).tolist(),
                                       class_ids, scores, track_ids, strict=True):
        out.put(hdr, 4)  # Detection3D.header
        out.put(b"\x01\x00\x00\x00" + _cdr_string(label), 4)  # results: 1, hypothesis.class_id
        # score; pose.pose (position, orientation), pose.covariance; bbox.center; bbox.size
        out.put(struct.pack("<54d", float(score), *c, *_IDENTITY, *_ZERO_COVARIANCE, *c, *_IDENTITY, *s), 8)
        out.put(_cdr_id(int(tid)), 4)
    return out.value()


def pose_stamped_to_cdr(header: Header, xyz: Sequence[float]) -> bytes:
    """``geometry_msgs/PoseStamped`` at ``xyz`` (identity orientation), serialized."""
    out = _CdrOut()
    out.put(_cdr_header(header), 4)
    out.put(struct.pack("<7d", *(float(v) for v in xyz), *_IDENTITY), 8)
    return out.value()
