"""Messages built field by field with rclpy's or rosbags' classes, serialized by them: the
references the hand-written CDR encoders (probench.msgs) are compared with.

rosbags zeroes CDR alignment padding as probench's writer does (equal byte for byte); rclpy's
Fast CDR leaves padding uninitialized, so against rclpy every byte but the padding is
compared. The padding is found by encoding again with 0xAA as padding (probench.msgs.wire._PAD)."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np


def rclpy_class(name: str) -> Any:
    """``"sensor_msgs/msg/Image"`` -> rclpy's message class."""
    pkg, _, cls = name.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), cls)


def rosbags_class(name: str) -> Any:
    from probench.bags.typestore import vision_typestore

    return vision_typestore().types[name]


def rclpy_bytes(msg: Any, name: str) -> bytes:
    from rclpy.serialization import serialize_message

    return bytes(serialize_message(msg))


def rosbags_bytes(msg: Any, name: str) -> bytes:
    from probench.bags.typestore import vision_typestore

    return bytes(vision_typestore().serialize_cdr(msg, name))


REFERENCES: dict[str, tuple[Callable[[str], Any], Callable[[Any, str], bytes]]] = {
    "rclpy": (rclpy_class, rclpy_bytes), "rosbags": (rosbags_class, rosbags_bytes)}


def header(c: Callable[[str], Any], sec: int, nanosec: int, frame_id: str) -> Any:
    stamp = c("builtin_interfaces/msg/Time")(sec=sec, nanosec=nanosec)
    return c("std_msgs/msg/Header")(stamp=stamp, frame_id=frame_id)


@contextlib.contextmanager
def marked_padding() -> Iterator[None]:
    """While inside, probench's CDR writer pads with 0xAA instead of zeros."""
    from probench.msgs import wire

    saved, wire._PAD = wire._PAD, tuple(b"\xaa" * n for n in range(8))
    try:
        yield
    finally:
        wire._PAD = saved


def check_bytes(encode: Callable[[], bytes], reference: bytes, serializer: str) -> None:
    """``encode()`` equals ``reference``: exactly for rosbags, outside the padding for rclpy."""
    ours = encode()
    assert len(ours) == len(reference), (len(ours), len(reference))
    if serializer == "rosbags":
        assert ours == reference
        return
    with marked_padding():
        marked = encode()
    plain, padded, ref = (np.frombuffer(b, np.uint8) for b in (ours, marked, reference))
    field = plain == padded  # the bytes the marker did not change: every field's
    assert np.array_equal(plain[field], ref[field]), "a field's bytes differ from rclpy's"
