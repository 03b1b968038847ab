"""The messages convert reads duck-typed, as Protocols (read-only fields).

An rclpy message, a rosbags message, the fields :mod:`.wire` reads off the wire (a
``SimpleNamespace``) and a test's ``SimpleNamespace`` all fit. A message convert builds, or
one it stores inside a message it builds (the header of a Detection2DArray), is a real ROS
message class, untyped (the message packages have no stubs): ``Any`` there.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, Protocol


class Stamp(Protocol):
    """``builtin_interfaces/Time`` (:func:`.messages.set_stamp` writes it in place)."""

    sec: int
    nanosec: int


NS_PER_S = 1_000_000_000


def stamp_ns(stamp: Stamp) -> int:
    """A stamp (``builtin_interfaces/Time``: anything with ``sec`` and ``nanosec``) in
    nanoseconds: the one conversion, for every message read."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def stamp_at(ns: int) -> Stamp:
    """The stamp of ``ns`` nanoseconds (the inverse of :func:`stamp_ns`)."""
    sec, nanosec = divmod(int(ns), NS_PER_S)
    out: Stamp = SimpleNamespace(sec=sec, nanosec=nanosec)
    return out


class Header(Protocol):
    """``std_msgs/Header``."""

    @property
    def stamp(self) -> Stamp: ...
    @property
    def frame_id(self) -> str: ...


class ImageFields(Protocol):
    """The fields of ``sensor_msgs/Image`` that :func:`.images.image_to_rgb` reads."""

    @property
    def height(self) -> int: ...
    @property
    def width(self) -> int: ...
    @property
    def encoding(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def is_bigendian(self) -> int: ...
    @property
    def data(self) -> Any: ...  # bytes-like: bytes, memoryview, array.array, a numpy array


class ImageMessage(ImageFields, Protocol):
    """``sensor_msgs/Image``: the fields and the header."""

    @property
    def header(self) -> Header: ...


class CompressedFields(Protocol):
    """The fields of ``sensor_msgs/CompressedImage`` that :func:`.images.compressed_to_rgb` reads."""

    @property
    def format(self) -> str: ...
    @property
    def data(self) -> Any: ...  # bytes-like, as ImageFields.data


class CompressedMessage(CompressedFields, Protocol):
    """``sensor_msgs/CompressedImage``: the fields and the header."""

    @property
    def header(self) -> Header: ...


# vision_msgs/Detection2DArray, as far as detection_array_to_arrays reads it
class Point2D(Protocol):
    @property
    def x(self) -> float: ...
    @property
    def y(self) -> float: ...


class Pose2D(Protocol):
    @property
    def position(self) -> Point2D: ...


class BoundingBox2D(Protocol):
    @property
    def center(self) -> Pose2D: ...
    @property
    def size_x(self) -> float: ...
    @property
    def size_y(self) -> float: ...


class ObjectHypothesis(Protocol):
    @property
    def class_id(self) -> str: ...
    @property
    def score(self) -> float: ...


class HypothesisWithPose(Protocol):
    @property
    def hypothesis(self) -> ObjectHypothesis: ...


class Detection2D(Protocol):
    @property
    def bbox(self) -> BoundingBox2D: ...
    @property
    def results(self) -> Sequence[HypothesisWithPose]: ...


class Detection2DArray(Protocol):
    @property
    def header(self) -> Header: ...
    @property
    def detections(self) -> Sequence[Detection2D]: ...


class VisionClass(Protocol):
    @property
    def class_id(self) -> int: ...
    @property
    def class_name(self) -> str: ...


class LabelInfo(Protocol):
    """``vision_msgs/LabelInfo``, as far as label_info_to_prompts reads it."""

    @property
    def class_map(self) -> Sequence[VisionClass]: ...


class KeyValue(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...


class DiagnosticStatus(Protocol):
    @property
    def level(self) -> bytes | int: ...  # a byte: one-byte bytes from rclpy, else an int
    @property
    def name(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def values(self) -> Sequence[KeyValue]: ...


class DiagnosticArray(Protocol):
    """``diagnostic_msgs/DiagnosticArray``, as far as diagnostics_to_statuses reads it."""

    @property
    def status(self) -> Sequence[DiagnosticStatus]: ...
