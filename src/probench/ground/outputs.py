"""What ``probench ground`` writes: the output bag, the annotated video and the JSONL.

Output bag (mcap, zstd chunks; ``P`` = ``--prefix``, default ``/ground``), every message at
the log time of the input frame it answers (so a viewer overlays it on that frame):

- ``P/detections`` (vision_msgs/Detection2DArray): one per input frame, with the input
  frame's header; class_id = the operator's prompt (an explicit ``ORIG => CAT`` gives ORIG),
  score in [0, 1], bbox in pixels. Empty for a
  frame that was dropped (``--realtime``) or had no prompts yet; none for a failed frame;
- ``P/frame_errors`` (diagnostic_msgs/DiagnosticArray): one per frame whose model call
  raised, with the frame's header, as the node's ``frame_errors``: one ERROR status whose
  message is the error;
- ``P/label_info`` (vision_msgs/LabelInfo, transient-local as the node's): each prompt set
  when it becomes active: class_map[i] = (i, prompt i), threshold = the score threshold;
- ``P/debug_image/compressed`` (sensor_msgs/CompressedImage, jpeg): the annotated frame;
- ``P/dropped`` (std_msgs/Header, ``--realtime`` only): the header of each dropped frame;
- ``P/detections_3d`` (vision_msgs/Detection3DArray, RGB-D bags only): one per input frame,
  with its header, as the node's ``detections_3d`` (empty when the frame got no 3D);
- ``P/segmentation/instances``, ``P/segmentation/semantic``, ``P/segmentation/confidence``
  (sensor_msgs/Image) and ``P/segmentation/label_info`` (vision_msgs/LabelInfo), for a model
  that gives instance masks: the node's segmentation outputs (docs/GROUNDING_NODE.md,
  "Instance masks"), one image of each per answered frame that carried masks;
- with ``--track``, Detection2D.id / Detection3D.id carry the track ids;
- with ``--keep-images``: the image topic (and the prompt topic) as recorded.

All files are built out of sight and moved into place only when the run succeeds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from probench.bags.layout import COMPRESSED_MSGTYPE
from probench.bags.source import Topic
from probench.ground.errors import GroundError
from probench.ground.frames import Grounded
from probench.ground.replay import SHORT_REASONS
from probench.ground.video import VideoSink
from probench.realtime.spatial_stage import spatial_labels
from probench.spatial.depth import Detections3D
from probench.spatial.messages import DETECTION_3D_ARRAY, detections_3d_cdr

if TYPE_CHECKING:
    from rosbags.interfaces import Connection, Qos

    from probench.msgs.shapes import Header

DETECTIONS_MSGTYPE = "vision_msgs/msg/Detection2DArray"
LABEL_INFO_MSGTYPE = "vision_msgs/msg/LabelInfo"
HEADER_MSGTYPE = "std_msgs/msg/Header"
DIAGNOSTICS_MSGTYPE = "diagnostic_msgs/msg/DiagnosticArray"


IMAGE_MSGTYPE = "sensor_msgs/msg/Image"


def output_topics(prefix: str, realtime: bool, depth: bool = False, masks: bool = False,
                  failed: bool = False) -> dict[str, str]:
    """Output topic -> message type (``failed``: a frame failed, its report written)."""
    topics = {
        f"{prefix}/detections": DETECTIONS_MSGTYPE,
        f"{prefix}/label_info": LABEL_INFO_MSGTYPE,
        f"{prefix}/debug_image/compressed": COMPRESSED_MSGTYPE,
    }
    if realtime:
        topics[f"{prefix}/dropped"] = HEADER_MSGTYPE
    if depth:
        topics[f"{prefix}/detections_3d"] = DETECTION_3D_ARRAY
    if masks:
        from probench.realtime.node_spec import MASK_TOPICS

        topics.update({f"{prefix}/{t}": IMAGE_MSGTYPE for t in MASK_TOPICS})
        topics[f"{prefix}/segmentation/label_info"] = LABEL_INFO_MSGTYPE
    if failed:
        topics[f"{prefix}/frame_errors"] = DIAGNOSTICS_MSGTYPE
    return topics


def _transient_local() -> Qos:
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    zero = QosTime(0, 0)
    return Qos(QosHistory.KEEP_LAST, 1, QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL,
               zero, zero, QosLiveliness.AUTOMATIC, zero, False)


def annotate(item: Grounded) -> np.ndarray:
    """The frame as BGR with its boxes drawn; a dropped frame gets a red banner saying so."""
    import cv2

    from probench.viz import draw_detections

    bgr = cv2.cvtColor(np.ascontiguousarray(item.rgb), cv2.COLOR_RGB2BGR)
    extras = spatial_labels(item.detections, item.d3)  # ids and distances
    out = draw_detections(bgr, item.detections, item.prompts, bgr=True, extras=extras,
                          masks=item.detections.masks)
    if item.dropped or item.failed:
        h, w = out.shape[:2]
        scale = max(0.35, min(h, w) / 700)
        (_, th), base = cv2.getTextSize("DROPPED", cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        cv2.rectangle(out, (0, 0), (w - 1, th + base + 4), (0, 0, 200), -1)
        banner = (f"FAILED ({item.failed.split(':')[0]})" if item.failed
                  else f"DROPPED ({SHORT_REASONS.get(item.dropped, item.dropped)})")
        cv2.putText(out, banner, (2, th + 2), cv2.FONT_HERSHEY_SIMPLEX, scale,
                    (255, 255, 255), 1, cv2.LINE_AA)
    return out


def _spatial_record(item: Grounded, i: int, xyz: dict[int, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ids = item.detections.tracker_id
    if ids is not None:
        out["track_id"] = int(ids[i]) if ids[i] >= 0 else None
    if item.d3 is not None:
        out["xyz_m"] = xyz.get(i)
    return out


def jsonl_record(item: Grounded) -> dict[str, Any]:
    """One line of ``--jsonl``."""
    dets = item.detections
    xyz = {} if item.d3 is None else dict(zip(item.d3.index.tolist(), item.d3.centre.tolist(), strict=True))
    return {
        "frame": item.frame.index,
        "t_ns": item.frame.t_ns,
        "stamp": {"sec": int(item.header.stamp.sec), "nanosec": int(item.header.stamp.nanosec)},
        "frame_id": str(item.header.frame_id),
        "dropped": bool(item.dropped),
        "drop_reason": item.dropped or None,
        **({"failed": item.failed} if item.failed else {}),
        "prompts": list(item.prompts),
        "processing_ms": item.processing_ms,
        "latency_ms": item.latency_ms,
        "timings_ms": item.timings_ms,
        "detections": [
            {"class_id": item.prompts[int(pi)], "prompt_index": int(pi), "score": float(s),
             "box_xyxy": [float(v) for v in box], **_spatial_record(item, i, xyz)}
            for i, (box, s, pi) in enumerate(zip(dets.xyxy, dets.scores, dets.prompt_index, strict=True))
        ],
    }


class GroundOutputs:
    """The run's outputs, opened together: :meth:`finish` then :meth:`commit` (all), or
    :meth:`abort` (none)."""

    def __init__(
        self,
        out: Path,
        *,
        prefix: str,
        realtime: bool,
        keep: Sequence[Topic] = (),
        video: Path | None = None,
        jsonl: Path | None = None,
        overwrite: bool = False,
        jpeg_quality: int = 85,
        depth: bool = False,
        masks: bool = False,
    ) -> None:
        from probench.bags.staged import StagedBagWriter
        from probench.bags.typestore import vision_typestore
        from probench.cache.atomic import replacing

        self.ts = vision_typestore()
        self.jpeg_quality = jpeg_quality
        self.masks = masks
        self._prefix = prefix
        self._stack = ExitStack()
        self._bag = StagedBagWriter(out, overwrite=overwrite).open()
        self._jsonl: IO[str] | None = None
        self.video: VideoSink | None = None
        try:
            names = output_topics(prefix, realtime, depth, masks)
            self._conn = {
                name.removeprefix(prefix): self._bag.add_topic(
                    name, msgtype, self.ts, qos=[_transient_local()] if msgtype == LABEL_INFO_MSGTYPE else ()
                )
                for name, msgtype in names.items()
            }
            self._kept = {t.name: self._bag.add_topic(t.name, t.msgtype, self.ts) for t in keep}
            if video is not None:
                self.video = VideoSink(self._stack.enter_context(replacing(video)))
            if jsonl is not None:
                tmp = self._stack.enter_context(replacing(jsonl))
                self._jsonl = self._stack.enter_context(open(tmp, "w", encoding="utf-8"))  # noqa: SIM115
        except BaseException as exc:
            self.abort(exc)
            raise

    # -- writing --------------------------------------------------------------------------
    def frame(self, item: Grounded) -> None:
        t = item.frame.t_ns
        if item.failure_cdr is not None:  # the node publishes its report, no answer
            self._bag.write(self._failures(), t, item.failure_cdr)
        else:
            self._write_answer(item, t)
        if item.dropped:
            self._bag.write(self._conn["/dropped"], t, self.ts.serialize_cdr(self._header(item.header),
                                                                             HEADER_MSGTYPE))
        self._write_image(item, t)

    def _failures(self) -> Connection:
        """The frame_errors topic, added with the first failed frame (a run without one keeps
        the bag it always had)."""
        conn = self._conn.get("/frame_errors")
        if conn is None:
            conn = self._conn["/frame_errors"] = self._bag.add_topic(
                f"{self._prefix}/frame_errors", DIAGNOSTICS_MSGTYPE, self.ts)
        return conn

    def _write_answer(self, item: Grounded, t: int) -> None:
        """The frame's detections (2D, 3D) and mask images."""
        self._bag.write(self._conn["/detections"], t, item.detections_cdr)
        if "/detections_3d" in self._conn:
            d3 = item.detections_3d_cdr  # the core's bytes; a frame without 3D gets an empty array
            self._bag.write(self._conn["/detections_3d"], t, d3 if d3 is not None else detections_3d_cdr(
                Detections3D.empty(), item.detections, item.header, item.prompts))
        if item.mask_cdr:
            self._write_masks(item, t)

    def _write_image(self, item: Grounded, t: int) -> None:
        """The annotated frame: the debug image, the video, the JSONL line."""
        import cv2

        bgr = annotate(item)
        ok, jpeg = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, self.jpeg_quality])
        if not ok:
            raise GroundError(f"frame {item.frame.index}: JPEG encoding of the annotated image failed")
        msg = self.ts.types[COMPRESSED_MSGTYPE](header=self._header(item.header), format="jpeg",
                                                data=jpeg.reshape(-1))
        self._bag.write(self._conn["/debug_image/compressed"], t,
                        self.ts.serialize_cdr(msg, COMPRESSED_MSGTYPE))
        if self.video is not None:
            self.video.add(t, bgr)
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(jsonl_record(item), separators=(",", ":")) + "\n")

    def _write_masks(self, item: Grounded, t: int) -> None:
        """The segmentation images, and their class map when the core says it changed."""
        if item.mask_labels_cdr is not None:
            self._bag.write(self._conn["/segmentation/label_info"], t, item.mask_labels_cdr)
        for topic, data in item.mask_cdr.items():
            self._bag.write(self._conn[f"/{topic}"], t, data)

    def label_info(self, t_ns: int, label_info_cdr: bytes) -> None:
        """An accepted prompt set's acknowledgement (the core's LabelInfo bytes)."""
        self._bag.write(self._conn["/label_info"], t_ns, label_info_cdr)

    def copy(self, topic: str, t_ns: int, raw: bytes) -> None:
        """A recorded message kept as it was (``--keep-images``)."""
        if topic in self._kept:
            self._bag.write(self._kept[topic], t_ns, raw)

    def set_custom_data(self, key: str, value: str) -> None:
        self._bag.set_custom_data(key, value)

    def _header(self, header: Header) -> Header:
        """``header`` as a rosbags ``std_msgs/Header`` (the bag's message classes)."""
        ts = self.ts
        time_cls, header_cls = ts.types["builtin_interfaces/msg/Time"], ts.types["std_msgs/msg/Header"]
        out: Header = header_cls(stamp=time_cls(sec=int(header.stamp.sec), nanosec=int(header.stamp.nanosec)),
                          frame_id=str(header.frame_id))
        return out

    # -- ending ---------------------------------------------------------------------------
    def finish(self) -> None:
        """Complete the files (the video is read back) before :meth:`commit`."""
        if self.video is not None:
            self.video.close()
        if self._jsonl is not None:
            self._jsonl.flush()

    def commit(self) -> Path:
        """Move every output into place; the output bag's path."""
        self._stack.close()  # the video and the JSONL
        return self._bag.close()

    def abort(self, exc: BaseException | None = None) -> None:
        """Leave nothing behind: no bag, no video, no JSONL (any old ones stay as they were)."""
        self._bag.abort()
        if self.video is not None:
            self.video.discard()
        err = exc if exc is not None else GroundError("aborted")
        self._stack.__exit__(type(err), err, err.__traceback__)
