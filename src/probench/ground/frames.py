"""One recorded frame: decoded and grounded exactly as the grounding node's worker does it
(the node's own CDR readers and converters from :mod:`probench.msgs`, no rclpy)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.bags.layout import COMPRESSED_MSGTYPE
from probench.detections import Detections
from probench.errors import ProbenchError
from probench.ground.errors import GroundError
from probench.msgs.images import DEFAULT_MAX_PIXELS
from probench.realtime.grounding_worker import Prompts
from probench.spatial.depth import Detections3D

if TYPE_CHECKING:
    from probench.models.base import Detector


@dataclass(frozen=True)
class Frame:
    """A recorded image message, still serialized."""

    index: int
    t_ns: int  # log time in the bag
    msgtype: str
    raw: bytes
    topic: str


@dataclass
class Grounded:
    """A frame as decoded, with what the node would have answered (empty when dropped)."""

    frame: Frame
    header: Any  # stamp.sec, stamp.nanosec, frame_id: the input frame's header
    rgb: np.ndarray
    prompts: Prompts
    detections: Detections
    detections_cdr: bytes  # vision_msgs/Detection2DArray, serialized
    processing_ms: float | None = None  # decode + detect + serialize
    latency_ms: float | None = None  # arrival -> answer (realtime: includes the wait)
    dropped: str = ""  # why the frame was never processed ("" = processed)
    timings_ms: dict[str, float] = field(default_factory=dict)
    track_ids: np.ndarray | None = None  # --track: one per detection, -1 = none
    d3: Detections3D | None = None  # 3D estimates (RGB-D bags)


def decode(frame: Frame, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> tuple[Any, np.ndarray]:
    """``(header, rgb)`` of a frame (rgb may be a read-only view of the message bytes), or a
    one-line :class:`GroundError` naming the frame (also for a compressed frame whose header
    gives more than ``max_pixels`` pixels: refused before decoding, as the node does)."""
    from probench.msgs.wire import rgb_from_cdr

    try:
        return rgb_from_cdr(frame.raw, compressed=frame.msgtype == COMPRESSED_MSGTYPE, max_pixels=max_pixels)
    except ProbenchError as exc:
        raise GroundError(f"{frame.topic} frame {frame.index} (t={frame.t_ns} ns): {exc}") from exc


def ground(frame: Frame, detector: Detector, prompts: Prompts, max_detections: int,
           max_pixels: int | None = DEFAULT_MAX_PIXELS) -> Grounded:
    """Decode, detect (nothing without prompts, as the node) and serialize one frame."""
    from probench.msgs.wire import detections_to_cdr, top_order

    t0 = time.perf_counter()
    header, rgb = decode(frame, max_pixels)
    if prompts:
        if not rgb.flags.writeable:  # a view of the message bytes: models may write
            rgb = rgb.copy()
        dets = detector.detect(rgb, prompts)
        dets = dets.filter(top_order(dets, max_detections))  # what the node publishes
    else:
        dets = Detections.empty()
    names = class_names(detector, prompts)
    cdr = detections_to_cdr(dets, header, names)
    ms = (time.perf_counter() - t0) * 1000.0
    return Grounded(frame, header, rgb, prompts, dets, cdr, processing_ms=ms,
                    timings_ms=dict(dets.timings_ms))


def class_names(detector: object, prompts: Prompts) -> Prompts:
    """The class ids of ``prompts``: the operator's prompts behind a prompt policy (an
    explicit ``ORIG => CAT`` form published as ORIG), else the prompts themselves."""
    from probench.prompting.policy import PolicyDetector

    return detector.operator_prompts(prompts) if isinstance(detector, PolicyDetector) else prompts


def dropped(frame: Frame, reason: str, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> Grounded:
    """A frame the node would never have processed: an empty answer, marked."""
    from probench.msgs.wire import detections_to_cdr

    header, rgb = decode(frame, max_pixels)
    empty = Detections.empty()
    return Grounded(frame, header, rgb, (), empty, detections_to_cdr(empty, header, ()), dropped=reason)
