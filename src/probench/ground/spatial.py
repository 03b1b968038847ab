"""``probench ground --track`` and 3D grounding of RGB-D bags: the grounding node's spatial
stage (:mod:`probench.realtime.spatial_stage`) on recorded depth and CameraInfo, and the
figures the summary reports.

- Topics: ``--depth-topic`` / ``--camera-info-topic``, else the bag's only depth image topic
  (a sensor_msgs/Image whose first message is 16UC1 or 32FC1) and its only CameraInfo topic;
  3D runs when both are known (``--depth-topic none``: never).
- Pairing: depth and CameraInfo are read alongside the frames, ``LOOKAHEAD_S`` beyond the
  tolerance ahead of them (a depth image is often logged a moment after its colour frame),
  then paired by header stamp within ``--depth-tolerance`` exactly as the node pairs them.
- Figures: id switches per 100 frames (a detection whose id differs from the id of the
  same prompt's detection it overlaps most, IoU >= 0.5, in the previous grounded frame),
  mean track length (frames per id), and 3D coverage (detections with a 3D estimate).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probench.bags.source import BagSource, Topic
from probench.detections import Detections
from probench.ground.errors import GroundUsageError
from probench.spatial.depth import DEPTH_ENCODINGS, Detections3D

CAMERA_INFO_MSGTYPE = "sensor_msgs/msg/CameraInfo"
IMAGE_MSGTYPE = "sensor_msgs/msg/Image"
LOOKAHEAD_S = 0.1  # depth/CameraInfo read this far (plus the tolerance) ahead of the frames
SWITCH_IOU = 0.5


@dataclass(frozen=True)
class SpatialTopics:
    depth: Topic | None
    camera_info: Topic | None


def _encoding(source: BagSource, topic: Topic) -> str | None:
    from probench.errors import ProbenchError
    from probench.msgs.wire import image_from_cdr

    first = source.first(topic.name)
    if first is None:
        return None
    try:
        return str(image_from_cdr(first[1]).encoding)
    except ProbenchError:
        return None


def depth_topics(source: BagSource) -> list[Topic]:
    """The bag's raw image topics whose first message has a depth encoding."""
    return [t for t in source.topics.values()
            if t.msgtype == IMAGE_MSGTYPE and _encoding(source, t) in DEPTH_ENCODINGS]


def _names(topics: list[Topic]) -> str:
    return ", ".join(str(t) for t in topics) or "none"


def choose_topics(source: BagSource, depth: str | None, camera_info: str | None) -> SpatialTopics:
    """The depth and CameraInfo topics to use (see the module doc), or a one-line usage error."""
    if depth == "none":
        return SpatialTopics(None, None)
    infos = [t for t in source.topics.values() if t.msgtype == CAMERA_INFO_MSGTYPE]
    if depth is not None:
        topic = source.topics.get(depth)
        if topic is None or topic.msgtype != IMAGE_MSGTYPE:
            what = "no such topic" if topic is None else f"is {topic.msgtype}, not sensor_msgs/msg/Image"
            raise GroundUsageError(f"--depth-topic {depth}: {what} in {source.path}; depth topics: "
                                   f"{_names(depth_topics(source))}")
        chosen: Topic | None = topic
    else:
        found = depth_topics(source)
        chosen = found[0] if len(found) == 1 else None
        if chosen is None:
            return SpatialTopics(None, None)
    if camera_info is not None:
        info = source.topics.get(camera_info)
        if info is None or info.msgtype != CAMERA_INFO_MSGTYPE:
            raise GroundUsageError(f"--camera-info-topic {camera_info}: not a sensor_msgs/msg/CameraInfo "
                                   f"topic in {source.path}; CameraInfo topics: {_names(infos)}")
        return SpatialTopics(chosen, info)
    if len(infos) != 1:
        if depth is None:
            return SpatialTopics(None, None)  # auto: 3D only when the bag has exactly one of each
        raise GroundUsageError(f"--depth-topic {depth}: the bag has {len(infos)} CameraInfo topics "
                               f"({_names(infos)}); choose one with --camera-info-topic")
    return SpatialTopics(chosen, infos[0])


def spatial_events(source_path: Any, topics: SpatialTopics,
                   tolerance_s: float) -> Iterator[tuple[int, str, Any]]:
    """``(sort time ns, kind, raw)`` of the depth ("depth") and CameraInfo ("info") messages,
    each sorted ``tolerance + LOOKAHEAD_S`` ahead of its log time."""
    pairs = ((topics.depth, "depth"), (topics.camera_info, "info"))
    kinds = {t.name: kind for t, kind in pairs if t is not None}
    return read_ahead(source_path, kinds, tolerance_s + LOOKAHEAD_S)


def read_ahead(source_path: Any, kinds: dict[str, str], ahead_s: float) -> Iterator[tuple[int, str, Any]]:
    """``(sort time ns, kind, raw)`` of the messages of ``kinds`` (topic -> kind), each sorted
    ``ahead_s`` ahead of its log time: a message the node gets on its own topic a moment after
    the frame it belongs to is handed over before that frame (a second reader of the bag, so
    nothing is held longer than that)."""
    if not kinds:
        return
    ahead = int(ahead_s * 1e9)
    with BagSource(source_path) as second:
        for topic, t, raw in second.messages(list(kinds)):
            yield t - ahead, kinds[topic], raw


@dataclass
class TrackFigures:
    """Tracking stability and 3D coverage over a run."""

    frames: int = 0
    switches: int = 0
    lengths: Counter[int] = field(default_factory=Counter)
    detections: int = 0
    with_3d: int = 0
    depth_on: bool = False
    _prev: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # the previous frame's boxes, prompts, ids

    def observe(self, dets: Detections, est: Detections3D | None) -> None:
        ids = dets.tracker_id if dets.tracker_id is not None else np.full(len(dets), -1, np.int64)
        self.frames += 1
        self.detections += len(dets)
        if est is not None:
            self.with_3d += len(est)
        for tid in ids[ids >= 0].tolist():
            self.lengths[int(tid)] += 1
        if self._prev is not None and len(dets):
            self.switches += _switches(self._prev, (dets.xyxy, dets.prompt_index, ids))
        self._prev = (dets.xyxy, dets.prompt_index, ids)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tracked_frames": self.frames, "tracks": len(self.lengths),
            "id_switches_per_100_frames": 100.0 * self.switches / self.frames if self.frames else None,
            "mean_track_length_frames": (sum(self.lengths.values()) / len(self.lengths)
                                         if self.lengths else None),
        }
        if self.depth_on:
            out["coverage_3d"] = self.with_3d / self.detections if self.detections else None
        return out


_Frame = tuple[np.ndarray, np.ndarray, np.ndarray]  # boxes, prompt indices, track ids


def _switches(prev: _Frame, cur: _Frame) -> int:
    from supervision import box_iou_batch

    (pb, pp, pi), (cb, cp, ci) = prev, cur
    if not len(pb):
        return 0
    iou = box_iou_batch(cb, pb)
    iou[cp[:, None] != pp[None, :]] = 0.0  # only the same prompt's detections
    best = iou.argmax(axis=1)
    hit = iou[np.arange(len(cb)), best] >= SWITCH_IOU
    prev_ids = pi[best]
    return int(np.sum(hit & (ci >= 0) & (prev_ids >= 0) & (ci != prev_ids)))


class GroundSpatial:
    """The depth and CameraInfo topics a run reads (the node's spatial stage is the core's,
    built by :func:`probench.realtime.frame_core.node_core`), plus its tracking/3D figures."""

    def __init__(self, topics: SpatialTopics, tracking: bool) -> None:
        self.topics = topics
        self.depth_on = topics.depth is not None and topics.camera_info is not None
        self.figures = TrackFigures(depth_on=self.depth_on)
        self.tracking = tracking

    @staticmethod
    def camera_info(raw: bytes) -> tuple[list[float], int, int]:
        """A recorded CameraInfo's ``(K, width, height)``."""
        from probench.bags.typestore import typestore

        msg = typestore().deserialize_cdr(raw, CAMERA_INFO_MSGTYPE)
        return list(msg.k), int(msg.width), int(msg.height)
