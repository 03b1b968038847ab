"""One recorded frame, answered by the grounding node's own core
(:class:`probench.realtime.frame_core.FrameCore`): ``probench ground`` only adds the bag's
frame record and its replay figures around the core's answer."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from probench.bags.layout import COMPRESSED_MSGTYPE
from probench.detections import Detections
from probench.errors import ProbenchError
from probench.ground.errors import GroundError
from probench.msgs.images import DEFAULT_MAX_PIXELS
from probench.msgs.shapes import Header
from probench.prompting.policy import PromptPolicy
from probench.realtime.frame_core import FrameAnswer, FrameCore, Wanted, decode_frame
from probench.realtime.grounding_worker import Prompts
from probench.spatial.depth import Detections3D


@dataclass(frozen=True)
class Frame:
    """A recorded image message, still serialized."""

    index: int
    t_ns: int  # log time in the bag
    msgtype: str
    raw: bytes
    topic: str

    @property
    def compressed(self) -> bool:
        return self.msgtype == COMPRESSED_MSGTYPE

    def where(self) -> str:
        return f"{self.topic} frame {self.index} (t={self.t_ns} ns)"


@dataclass
class Grounded:
    """A frame as decoded, with what the node would have answered (empty when dropped)."""

    frame: Frame
    header: Header  # the input frame's header
    rgb: np.ndarray
    prompts: Prompts  # the operator's prompts: the class ids
    detections: Detections  # with --track (or depth): their tracker_id, -1 = none
    detections_cdr: bytes  # vision_msgs/Detection2DArray, serialized
    processing_ms: float | None = None  # the core's time: decode + detect + 3D + encode
    latency_ms: float | None = None  # arrival -> answer (realtime: includes the wait)
    dropped: str = ""  # why the frame was never processed ("" = processed)
    timings_ms: dict[str, float] = field(default_factory=dict)
    d3: Detections3D | None = None  # 3D estimates (RGB-D bags)
    detections_3d_cdr: bytes | None = None
    mask_cdr: dict[str, bytes] = field(default_factory=dict)  # segmentation topic -> Image bytes
    mask_labels_cdr: bytes | None = None  # segmentation/label_info, when the class map changed
    failed: str = ""  # the model call raised ("ExcType: message"): no answer, a report instead
    failure_cdr: bytes | None = None  # the failed frame's report (frame_errors), as the node publishes it

    @classmethod
    def of(cls, frame: Frame, answer: FrameAnswer) -> Grounded:
        assert answer.rgb is not None and answer.detections_cdr is not None
        return cls(frame, answer.header, answer.rgb, answer.prompts, answer.detections, answer.detections_cdr,
                   processing_ms=answer.processing_ms, timings_ms=dict(answer.stages_ms),
                   d3=answer.d3, detections_3d_cdr=answer.detections_3d_cdr,
                   mask_cdr=answer.mask_cdr, mask_labels_cdr=answer.mask_labels_cdr)


def decode(frame: Frame, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> tuple[Header, np.ndarray]:
    """``(header, rgb)`` of a frame, decoded as the core decodes it, or a one-line
    :class:`GroundError` naming the frame."""
    try:
        return decode_frame(frame.raw, compressed=frame.compressed, max_pixels=max_pixels)
    except ProbenchError as exc:
        raise GroundError(f"{frame.where()}: {exc}") from exc


def ground(frame: Frame, core: FrameCore, prompts: Prompts, policy: PromptPolicy | None = None,
           wanted: Wanted | None = None) -> tuple[Grounded, list[str]]:
    """The core's answer to one frame, and the lines it asks to log. A frame that cannot be
    decoded ends the run (one line naming it); a frame whose model call raised is failed (its
    report kept, as the node publishes it) and the run goes on."""
    answer = core.answer(frame.raw, compressed=frame.compressed, prompts=prompts, policy=policy,
                         wanted=wanted or Wanted())
    if answer.error:
        raise GroundError(f"{frame.where()}: {answer.error}")
    if answer.failed:
        assert answer.rgb is not None  # decoded: only the model call failed
        item = dropped_answer(frame, answer.header, answer.rgb, "")
        item.prompts, item.failed, item.failure_cdr = answer.prompts, answer.failed, answer.failure_cdr
        item.processing_ms, item.timings_ms = answer.processing_ms, dict(answer.stages_ms)
        return item, answer.problems
    if not answer.answered:  # no stamped set and no operator prompts: the node publishes nothing
        header, rgb = answer.header, answer.rgb
        assert rgb is not None
        return dropped_answer(frame, header, rgb, "no prompt set for the frame"), answer.problems
    return Grounded.of(frame, answer), answer.problems


def dropped(frame: Frame, reason: str, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> Grounded:
    """A frame the node would never have processed: an empty answer, marked."""
    header, rgb = decode(frame, max_pixels)
    return dropped_answer(frame, header, rgb, reason)


def dropped_answer(frame: Frame, header: Header, rgb: np.ndarray, reason: str) -> Grounded:
    from probench.msgs.wire import detections_to_cdr

    empty = Detections.empty()
    return Grounded(frame, header, rgb, (), empty, detections_to_cdr(empty, header, ()), dropped=reason)
