"""The encoder of the grounding node's latched ``target`` (``vision_msgs/Detection2D``): the
detection the operator's selection (or the default, the best of the first prompt) makes
*the* target, built with :mod:`probench.msgs.wire`'s own CDR helpers, so its bytes are
those rclpy and the rosbags typestore write (a test checks both).

The message: ``header`` = the frame's header; one result whose ``hypothesis.class_id`` is
the target's prompt text (the operator's, as in ``detections``) and ``score`` its score
(pose: the default ``PoseWithCovariance``); ``bbox`` centre and size in pixels (theta 0);
``id`` = the track id as a string ("" for -1: tracking off).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from probench.msgs.errors import MessageConversionError
from probench.msgs.shapes import Header
from probench.msgs.wire import _POSE_BLOCK, _cdr_header, _cdr_id, _cdr_string, _CdrOut

DETECTION_2D = "vision_msgs/msg/Detection2D"


def target_to_cdr(header: Header, xyxy: Sequence[float], prompt: str, score: float, track_id: int) -> bytes:
    """``vision_msgs/Detection2D`` of the target, serialized (see the module docstring)."""
    x1, y1, x2, y2 = (float(v) for v in xyxy)
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2, float(score))):
        raise MessageConversionError(f"target box/score must be finite, got {(x1, y1, x2, y2)} {score}")
    out = _CdrOut()
    out.put(_cdr_header(header), 4)
    out.put(b"\x01\x00\x00\x00" + _cdr_string(str(prompt)), 4)  # results: 1, hypothesis.class_id
    # hypothesis.score, pose (PoseWithCovariance), bbox.center (x, y, theta), bbox.size_x, size_y
    out.put(struct.pack("<d", float(score)) + _POSE_BLOCK
            + struct.pack("<5d", (x1 + x2) * 0.5, (y1 + y2) * 0.5, 0.0, x2 - x1, y2 - y1), 8)
    out.put(_cdr_id(int(track_id)), 4)
    return out.value()
