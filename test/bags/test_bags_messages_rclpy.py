"""The messages the bag code and ``probench ground`` write through the rosbags typestore
(Image, CompressedImage, String, Header) read in rclpy as the same message, and rclpy's
bytes read back in rosbags: a bag probench writes plays into ROS 2 as recorded. (Detection2DArray
and LabelInfo have probench's own encoder: test/msgs/test_msgs_wire_encode.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from probench.bags.layout import COMPRESSED_MSGTYPE, IMAGE_MSGTYPE, STRING_MSGTYPE
from probench.bags.typestore import vision_typestore

HEADER_MSGTYPE = "std_msgs/msg/Header"


def _stamp(c: Callable[[str], Any]) -> Any:
    return c("builtin_interfaces/msg/Time")(sec=1_700_000_123, nanosec=999_999_999)


def _build(c: Callable[[str], Any], msgtype: str) -> Any:
    """The message as writer.py / ground/outputs.py build it, from either side's classes."""
    header = c(HEADER_MSGTYPE)(stamp=_stamp(c), frame_id="cäm_😀")
    rgb = np.arange(5 * 7 * 3, dtype=np.uint8)
    if msgtype == IMAGE_MSGTYPE:
        return c(msgtype)(header=header, height=5, width=7, encoding="rgb8", is_bigendian=0, step=21,
                          data=rgb)
    if msgtype == COMPRESSED_MSGTYPE:
        return c(msgtype)(header=header, format="jpeg", data=rgb[:13])
    if msgtype == STRING_MSGTYPE:
        return c(msgtype)(data='{"format": "probench", "ü": [1, 2]}')
    return header


@pytest.mark.parametrize("msgtype", [IMAGE_MSGTYPE, COMPRESSED_MSGTYPE, STRING_MSGTYPE, HEADER_MSGTYPE])
def test_typestore_bytes_are_rclpys_message(requires_vision_msgs: None, msgtype: str) -> None:
    import importlib

    from rclpy.serialization import deserialize_message, serialize_message

    def rclpy_class(name: str) -> Any:
        pkg, _, cls = name.split("/")
        return getattr(importlib.import_module(f"{pkg}.msg"), cls)

    ts = vision_typestore()
    ours = bytes(ts.serialize_cdr(_build(lambda n: ts.types[n], msgtype), msgtype))
    ref = _build(rclpy_class, msgtype)
    theirs = bytes(serialize_message(ref))
    assert len(ours) == len(theirs)
    assert deserialize_message(ours, rclpy_class(msgtype)) == ref
    back = ts.deserialize_cdr(theirs, msgtype)
    assert bytes(ts.serialize_cdr(back, msgtype)) == ours  # rclpy's bytes read in rosbags: the same message
