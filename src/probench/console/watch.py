"""What ``probench node watch`` shows of each output of a running grounding node, without
rclpy: the topics it subscribes and with which QoS (from the node's own ``TOPICS``, so a
latched output such as ``target`` is subscribed transient-local and its last message
arrives), and one record per message: track ids, 3D positions, mask summaries, the target.

A record is a plain dict (``--json`` prints it as one line) and :func:`record_line` its one
line of text. The ROS side (:mod:`probench.ros.node_watch`) turns each message into the
plain values the ``*_record`` functions take.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from probench.realtime.node_spec import MASK_TOPICS, TOPICS

__all__ = ["KINDS", "MASK_TOPICS", "detections_3d_record", "detections_record", "labels_record",
           "mask_record", "mono_pixels", "parse_kinds", "points_record", "pose_record", "record_line",
           "target_record", "topic_qos", "watched_topics", "xyz_points"]
from probench.vocabulary import escape_for_log

# what `--only` picks -> the node's topics it watches
KINDS: dict[str, tuple[str, ...]] = {
    "detections": ("detections",),
    "3d": ("detections_3d", "target_pose"),
    "masks": ("segmentation/label_info", *MASK_TOPICS),
    "target": ("target", "target_points"),
}
Bytes = bytes | bytearray | memoryview | Sequence[int]  # a message's data: bytes, array.array('B')
_KEEP_LAST = re.compile(r"keep last (\d+)")
_SHOWN = 8  # items listed per line (all of them in --json)


def topic_qos(topic: str) -> tuple[bool, int]:
    """``(transient_local, keep last N)`` for a subscription that gets what the node publishes
    on ``topic``, read from its ``TOPICS`` row (every output is reliable; keep last 10 unless
    the row says otherwise)."""
    text = TOPICS[topic][2]
    depth = _KEEP_LAST.search(text)
    return "transient_local" in text, int(depth.group(1)) if depth else 10


def watched_topics(kinds: Sequence[str] | None = None) -> list[str]:
    """The node's topics for ``kinds`` (None: all of :data:`KINDS`), in that order."""
    return [t for k in (kinds or list(KINDS)) for t in KINDS[k]]


def parse_kinds(text: str | None) -> list[str] | None:
    """``--only detections,3d``; a ValueError naming the unknown one."""
    if text is None:
        return None
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"--only takes {', '.join(KINDS)} (comma-separated), got {text!r}")
    return kinds


# -- records ----------------------------------------------------------------------------------
def _r(v: float | np.floating[Any], nd: int = 3) -> float:
    return round(float(v), nd)


def detections_record(stamp: float, xyxy: np.ndarray, scores: np.ndarray, labels: Sequence[str],
                      ids: Sequence[str]) -> dict[str, Any]:
    """A ``Detection2DArray``: per detection its prompt, score, track id ("" without) and box
    centre and size (pixels)."""
    items = [{"class": lab, "score": _r(s), "id": tid, "centre": _centre(b), "size": [_r(b[2] - b[0], 1),
                                                                           _r(b[3] - b[1], 1)]}
             for b, s, lab, tid in zip(xyxy, scores, labels, ids, strict=True)]
    return {"topic": "detections", "stamp": stamp, "detections": items}


def detections_3d_record(stamp: float, frame_id: str, labels: Sequence[str], scores: Sequence[float],
                         ids: Sequence[str], centres: np.ndarray, sizes: np.ndarray) -> dict[str, Any]:
    """A ``Detection3DArray``: per detection its prompt, score, track id, position (m, in
    ``frame_id``), box size and distance from the camera."""
    items = [{"class": lab, "score": _r(s), "id": tid, "position": [_r(v) for v in c],
              "size": [_r(v) for v in z], "distance": _r(np.linalg.norm(c))}
             for lab, s, tid, c, z in zip(labels, scores, ids, centres, sizes, strict=True)]
    return {"topic": "detections_3d", "stamp": stamp, "frame_id": frame_id, "detections": items}


def target_record(stamp: float, track_id: str, label: str, score: float,
                  xyxy: Sequence[float]) -> dict[str, Any]:
    """The latched ``target`` (a ``Detection2D``)."""
    return {"topic": "target", "stamp": stamp, "id": track_id, "class": label, "score": _r(score),
            "centre": _centre(xyxy)}


def _centre(xyxy: Sequence[float]) -> list[float]:
    x1, y1, x2, y2 = xyxy
    return [_r((x1 + x2) / 2, 1), _r((y1 + y2) / 2, 1)]


def pose_record(stamp: float, frame_id: str, xyz: Sequence[float]) -> dict[str, Any]:
    """``target_pose`` (a ``PoseStamped``): the target's position."""
    return {"topic": "target_pose", "stamp": stamp, "frame_id": frame_id, "position": [_r(v) for v in xyz],
            "distance": _r(np.linalg.norm(np.asarray(xyz, dtype=np.float64)))}


def points_record(stamp: float, frame_id: str, xyz: np.ndarray) -> dict[str, Any]:
    """``target_points`` (a ``PointCloud2``): how many points, their centre and extent."""
    pts = np.asarray(xyz, dtype=np.float64).reshape(-1, 3)
    pts = pts[np.isfinite(pts).all(axis=1)]
    out: dict[str, Any] = {"topic": "target_points", "stamp": stamp, "frame_id": frame_id, "points": len(pts),
                           "centre": None, "extent": None}
    if len(pts):
        out["centre"] = [_r(v) for v in pts.mean(axis=0)]
        out["extent"] = [_r(v) for v in pts.max(axis=0) - pts.min(axis=0)]
    return out


def mask_record(topic: str, stamp: float, image: np.ndarray, classes: Sequence[str] = (),
                detections: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``segmentation/*`` image summarized: per instance (value k: the k-th detection of the
    same stamp, named from ``detections`` when known) or per class (value c: ``classes[c]``,
    the latched ``segmentation/label_info``) its pixel count; the confidence image's mean over
    the masked pixels."""
    h, w = image.shape[:2]
    out: dict[str, Any] = {"topic": topic, "stamp": stamp, "size": [int(w), int(h)]}
    if topic.endswith("confidence"):
        on = image[image > 0]
        out.update(pixels=int(on.size), mean=_r(on.mean() / 255.0) if on.size else None)
        return out
    values, counts = np.unique(image[image > 0], return_counts=True)
    items: list[dict[str, Any]] = []
    dets = (detections or {}).get("detections", [])
    for v, n in zip(values.tolist(), counts.tolist(), strict=True):
        if topic.endswith("instances"):
            d = dets[v - 1] if 0 < v <= len(dets) else {}
            items.append({"instance": v, "pixels": n, "class": d.get("class", ""), "id": d.get("id", "")})
        else:
            items.append({"class_value": v, "class": classes[v] if v < len(classes) else "", "pixels": n})
    out["instances" if topic.endswith("instances") else "classes"] = items
    return out


def labels_record(stamp: float, classes: Sequence[str]) -> dict[str, Any]:
    """``segmentation/label_info``: the class map of the semantic image (0 = background)."""
    return {"topic": "segmentation/label_info", "stamp": stamp, "classes": list(classes)}


def mono_pixels(data: Bytes, height: int, width: int, step: int, encoding: str,
                big_endian: bool) -> np.ndarray:
    """A ``mono8`` / ``mono16`` image's pixels, ``(height, width)``; a ValueError for another
    encoding or a buffer that does not hold them."""
    kinds = {"mono8": np.uint8, "8UC1": np.uint8, "mono16": np.uint16, "16UC1": np.uint16}
    if encoding not in kinds:
        raise ValueError(f"encoding {encoding!r} is not a mask image's (mono8, mono16)")
    dtype = np.dtype(kinds[encoding]).newbyteorder(">" if big_endian else "<")
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    if height < 0 or width < 0 or step < width * dtype.itemsize or len(buf) < step * height:
        raise ValueError(f"{len(buf)} bytes do not hold a {width}x{height} {encoding} image (step {step})")
    rows = buf[: step * height].reshape(height, step)[:, : width * dtype.itemsize]
    return rows.copy().view(dtype).reshape(height, width).astype(kinds[encoding])


def xyz_points(data: Bytes, fields: Mapping[str, tuple[int, int]], point_step: int, n: int,
               big_endian: bool) -> np.ndarray:
    """``(n, 3)`` float64 of a ``PointCloud2`` whose x, y, z fields (name -> (offset, datatype))
    are float32 (datatype 7); a ValueError otherwise."""
    if any(fields.get(c, (0, 0))[1] != 7 for c in "xyz"):
        raise ValueError("a target_points cloud has float32 x, y, z fields")
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    if n < 0 or point_step < 12 or len(buf) < point_step * n:
        raise ValueError(f"{len(buf)} bytes do not hold {n} points of {point_step} bytes")
    f4 = np.dtype("<f4").newbyteorder(">" if big_endian else "<")
    rows = buf[: point_step * n].reshape(n, point_step)
    cols = [rows[:, fields[c][0]: fields[c][0] + 4].copy().view(f4).reshape(n) for c in "xyz"]
    return np.stack(cols, axis=1).astype(np.float64)


# -- text -------------------------------------------------------------------------------------
def record_line(rec: Mapping[str, Any]) -> str:
    """One line of text of a record: its stamp, topic and summary (text from the graph escaped)."""
    topic = rec["topic"]
    head = f"{rec['stamp']:.6f} {topic:<24} "
    if "error" in rec:  # a message that cannot be read as the node writes it
        return head + f"unreadable: {escape_for_log(rec['error'])}"
    if topic in ("detections", "detections_3d"):
        items = rec["detections"]
        parts = [_item_text(d, topic) for d in items[:_SHOWN]]
        more = f" ... ({len(items) - _SHOWN} more)" if len(items) > _SHOWN else ""
        return head + f"{len(items)}: " + "; ".join(parts) + more
    if topic == "target":
        tid = f"track {rec['id']}" if rec["id"] else "no track id"
        return head + f"{tid}: {_q(rec['class'])} {rec['score']:.2f} {_at(rec['centre'])}"
    if topic == "target_pose":
        return head + f"{_xyz(rec['position'])} m in {_q(rec['frame_id'])} ({rec['distance']:.2f} m away)"
    if topic == "target_points":
        if not rec["points"]:
            return head + "0 points"
        return head + (f"{rec['points']} points, centre {_xyz(rec['centre'])} m, "
                       f"extent {_xyz(rec['extent'])} m")
    if topic == "segmentation/label_info":
        return head + ", ".join(f"{i}={_q(c)}" for i, c in enumerate(rec["classes"]))
    size = f"{rec['size'][0]}x{rec['size'][1]}"
    if "mean" in rec:
        mean = "-" if rec["mean"] is None else f"{rec['mean']:.2f}"
        return head + f"{size}, {rec['pixels']} masked pixels, mean confidence {mean}"
    if "instances" in rec:
        parts = [f"{i['instance']}" + (f" {_q(i['class'])}" if i["class"] else "")
                 + (f" #{i['id']}" if i["id"] else "") + f" {i['pixels']} px"
                 for i in rec["instances"][:_SHOWN]]
        return head + f"{size}, {len(rec['instances'])} instances: " + "; ".join(parts)
    parts = [f"{c['class_value']} {_q(c['class'])} {c['pixels']} px" for c in rec["classes"][:_SHOWN]]
    return head + f"{size}, {len(rec['classes'])} classes: " + "; ".join(parts)


def _item_text(d: Mapping[str, Any], topic: str) -> str:
    tid = f" #{d['id']}" if d["id"] else ""
    if topic == "detections":
        return f"{_q(d['class'])}{tid} {d['score']:.2f} {_at(d['centre'])}"
    return f"{_q(d['class'])}{tid} at {_xyz(d['position'])} m ({d['distance']:.2f} m)"


def _at(centre: Sequence[float]) -> str:
    return f"@({centre[0]:.0f},{centre[1]:.0f})"


def _xyz(v: Sequence[float]) -> str:
    return "(" + ", ".join(f"{x:.2f}" for x in v) + ")"


def _q(text: str) -> str:
    return repr(escape_for_log(str(text), limit=80))
