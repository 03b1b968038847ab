"""The ROS side of ``probench node watch``: an rclpy node in a private context that
subscribes a grounding node's outputs with the QoS each one needs
(:func:`probench.console.watch.topic_qos`; the latched ``target`` and
``segmentation/label_info`` transient-local) and hands one plain record per message
(:mod:`probench.console.watch`) to a callback. The messages are rclpy's own objects
(``probench.msgs`` has no rclpy-free reader of Detection2DArray and Detection3DArray yet).

Subscribing ``segmentation/*`` and ``target_points`` makes the node build them (it builds
them only while someone subscribes). A mask image is shown once what names its values has
come (the detections of its stamp, the class map), or after :data:`_NAMES_WAIT_S` without.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.console import watch
from probench.console.bridge import split_node_name
from probench.ros import convert

if TYPE_CHECKING:  # the messages' own classes (untyped packages: their attributes are Any to mypy)
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import Image, PointCloud2
    from std_msgs.msg import Header
    from vision_msgs.msg import Detection2D, Detection2DArray, Detection3DArray, LabelInfo

Record = dict[str, Any]
_RECENT = 30  # detections kept (by stamp) to name the instances of a mask image of the same stamp
_NAMES_WAIT_S = 0.5  # how long a mask image waits for its detections / class map


class NodeWatch:
    """Subscriptions to ``topics`` of the grounding node ``node`` (its namespace's topics);
    :meth:`spin` runs them, calling ``on_record`` with each message's record."""

    def __init__(self, node: str, topics: Sequence[str], on_record: Callable[[Record], None]) -> None:
        import rclpy
        from geometry_msgs.msg import PoseStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, PointCloud2
        from vision_msgs.msg import Detection2D, Detection2DArray, Detection3DArray, LabelInfo

        self.ns, self.name = split_node_name(node)
        self._on_record = on_record
        self._classes: list[str] = []  # segmentation/label_info: the semantic image's class map
        self._recent: OrderedDict[float, Record] = OrderedDict()  # detections by stamp
        self._pending: list[tuple[float, str, float, np.ndarray]] = []  # mask images waiting for names
        self._show_detections = "detections" in topics
        if any(t in watch.MASK_TOPICS for t in topics):  # (their instances are named by the detections)
            topics = ["detections", *[t for t in topics if t != "detections"]]
        kinds: dict[str, tuple[Any, Callable[[Any], None]]] = {
            "detections": (Detection2DArray, self._detections),
            "detections_3d": (Detection3DArray, self._detections_3d),
            "target": (Detection2D, self._target), "target_pose": (PoseStamped, self._pose),
            "target_points": (PointCloud2, self._points),
            "segmentation/label_info": (LabelInfo, self._labels),
            **{t: (Image, self._mask(t)) for t in watch.MASK_TOPICS},
        }
        self._ctx = rclpy.Context()
        rclpy.init(context=self._ctx)
        try:
            self._node = rclpy.create_node(f"probench_watch_{id(self):x}", context=self._ctx,
                                           start_parameter_services=False)
            base = self.ns.rstrip("/")
            self.topics: dict[str, str] = {}
            for topic in topics:
                msg_type, handler = kinds[topic]
                latched, depth = watch.topic_qos(topic)
                qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL if latched
                                 else DurabilityPolicy.VOLATILE)
                name = f"{base}/{topic}"
                self._node.create_subscription(msg_type, name, handler, qos)
                if topic != "detections" or self._show_detections:
                    self.topics[topic] = name
            self._executor = SingleThreadedExecutor(context=self._ctx)
            self._executor.add_node(self._node)
        except Exception:
            self._ctx.try_shutdown()
            raise

    def present(self) -> bool:
        """Whether the grounding node is on the graph."""
        return (self.name, self.ns) in self._node.get_node_names_and_namespaces()

    def spin(self, seconds: float | None, stop: Callable[[], bool] = lambda: False) -> None:
        """Hand records over for ``seconds`` (None: until ``stop()`` says so)."""
        end = None if seconds is None else time.monotonic() + seconds
        while not stop() and (end is None or time.monotonic() < end) and self._ctx.ok():
            left = 0.05 if end is None else end - time.monotonic()
            self._executor.spin_once(timeout_sec=max(0.0, min(0.05, left)))
            self._flush()

    def close(self) -> None:
        self._flush(every=True)
        self._executor.shutdown(timeout_sec=1.0)
        self._node.destroy_node()
        self._ctx.try_shutdown()

    # -- messages -> records -----------------------------------------------------------------
    def _detections(self, msg: Detection2DArray) -> None:
        xyxy, scores, labels = convert.detection_array_to_arrays(msg)
        ids = [str(d.id) for d in msg.detections]
        rec = watch.detections_record(_stamp(msg.header), xyxy, scores, labels, ids)
        self._recent[rec["stamp"]] = rec
        while len(self._recent) > _RECENT:
            self._recent.popitem(last=False)
        if self._show_detections:
            self._on_record(rec)
        self._flush()

    def _detections_3d(self, msg: Detection3DArray) -> None:
        hyps = [d.results[0].hypothesis if d.results else None for d in msg.detections]
        boxes = [d.bbox for d in msg.detections]
        centres = np.array([[b.center.position.x, b.center.position.y, b.center.position.z]
                            for b in boxes]).reshape(-1, 3)
        sizes = np.array([[b.size.x, b.size.y, b.size.z] for b in boxes]).reshape(-1, 3)
        labels = [str(h.class_id) if h else "" for h in hyps]
        scores = [float(h.score) if h else 0.0 for h in hyps]
        ids = [str(d.id) for d in msg.detections]
        self._on_record(watch.detections_3d_record(_stamp(msg.header), str(msg.header.frame_id), labels,
                                                   scores, ids, centres, sizes))

    def _target(self, msg: Detection2D) -> None:
        hyp = msg.results[0].hypothesis if msg.results else None
        b = msg.bbox
        cx, cy, sx, sy = b.center.position.x, b.center.position.y, b.size_x, b.size_y
        self._on_record(watch.target_record(_stamp(msg.header), str(msg.id), str(hyp.class_id) if hyp else "",
                                            float(hyp.score) if hyp else 0.0,
                                            (cx - sx / 2, cy - sy / 2, cx + sx / 2, cy + sy / 2)))

    def _pose(self, msg: PoseStamped) -> None:
        p = msg.pose.position
        self._on_record(watch.pose_record(_stamp(msg.header), str(msg.header.frame_id), (p.x, p.y, p.z)))

    def _points(self, msg: PointCloud2) -> None:
        fields = {str(f.name): (int(f.offset), int(f.datatype)) for f in msg.fields}
        try:
            xyz = watch.xyz_points(msg.data, fields, int(msg.point_step), int(msg.width) * int(msg.height),
                                   bool(msg.is_bigendian))
        except ValueError as exc:
            self._on_record({"topic": "target_points", "stamp": _stamp(msg.header), "error": str(exc)})
            return
        self._on_record(watch.points_record(_stamp(msg.header), str(msg.header.frame_id), xyz))

    def _labels(self, msg: LabelInfo) -> None:
        # class c of the semantic image is class_map entry c (0 = background)
        names = {int(c.class_id): str(c.class_name) for c in msg.class_map}
        self._classes = [names.get(i, "") for i in range(max(names, default=-1) + 1)]
        self._on_record(watch.labels_record(_stamp(msg.header), self._classes))
        self._flush()

    def _mask(self, topic: str) -> Callable[[Image], None]:
        def on_image(msg: Image) -> None:
            stamp = _stamp(msg.header)
            try:
                pixels = watch.mono_pixels(msg.data, int(msg.height), int(msg.width), int(msg.step),
                                           str(msg.encoding), bool(msg.is_bigendian))
            except ValueError as exc:
                self._on_record({"topic": topic, "stamp": stamp, "error": str(exc)})
                return
            self._pending.append((time.monotonic() + _NAMES_WAIT_S, topic, stamp, pixels))
            self._flush()
        return on_image

    def _flush(self, every: bool = False) -> None:
        """The waiting mask images whose names came (or whose wait is over), in arrival order."""
        now, waiting = time.monotonic(), []
        for item in self._pending:
            deadline, topic, stamp, pixels = item
            named = (stamp in self._recent if topic.endswith("instances")
                     else bool(self._classes) or topic.endswith("confidence"))
            if named or every or now >= deadline:
                detections = self._recent.get(stamp)
                self._on_record(watch.mask_record(topic, stamp, pixels, self._classes, detections))
            else:
                waiting.append(item)
        self._pending = waiting


def _stamp(header: Header) -> float:
    return float(convert.stamp_ns(header.stamp)) / 1e9
