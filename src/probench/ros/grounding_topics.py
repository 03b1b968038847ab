"""The grounding node's topics: its configure-time subscriptions and publishers, each
created in one place (:class:`GroundingInputs`, :class:`GroundingOutputs`), and the
publishing of one :class:`~probench.realtime.frame_core.FrameAnswer` (its bytes are the
core's: nothing is built here but the viewer-only MarkerArray and debug Image objects)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.event_handler import (
    PublisherEventCallbacks,
    QoSOfferedIncompatibleQoSInfo,
    QoSRequestedIncompatibleQoSInfo,
    SubscriptionEventCallbacks,
    UnsupportedEventTypeError,
)
from rclpy.lifecycle import LifecycleNode, LifecyclePublisher
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSPolicyKind, QoSProfile, ReliabilityPolicy
from rclpy.subscription import Subscription
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, PointCloud2
from vision_msgs.msg import Detection2D, Detection2DArray, Detection3DArray, LabelInfo
from visualization_msgs.msg import MarkerArray

from probench.realtime.frame_core import FrameAnswer, Wanted
from probench.realtime.grounding_stats import TransportLoss
from probench.realtime.grounding_worker import ImageKind
from probench.realtime.node_spec import MASK_TOPICS, GroundingConfig, camera_info_beside, compressed_topic
from probench.ros import convert
from probench.ros.convert import spatial as convert_3d


def image_qos(reliability: str = "best_effort") -> QoSProfile:
    """The QoS of the node's image subscriptions (sensor data: keep last 5, volatile;
    reliability from the ``image_reliability`` parameter)."""
    rel = ReliabilityPolicy.RELIABLE if reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5, reliability=rel,
                      durability=DurabilityPolicy.VOLATILE)


RELIABLE_10 = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
VIEWER = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)  # keep last 1
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
FRAME_SETS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)


class GroundingHandler(Protocol):
    """What the subscriptions call back (the grounding node): the input callbacks and the
    transport-loss counts."""

    transport: TransportLoss

    def on_frame_prompts(self, msg: LabelInfo) -> None: ...
    def on_frame(self, kind: ImageKind, data: bytes) -> None: ...
    def on_depth(self, data: bytes) -> None: ...
    def on_camera_info(self, msg: CameraInfo) -> None: ...


def qos_events(node: LifecycleNode, topic: str, side: str,
               image_reliability: str = "") -> PublisherEventCallbacks | SubscriptionEventCallbacks:
    """Event callbacks that log an incompatible QoS on ``topic`` (``side``: "sub" or "pub";
    ``image_reliability``: the camera subscriptions' configured reliability, for the hint)."""
    def cb(info: QoSOfferedIncompatibleQoSInfo | QoSRequestedIncompatibleQoSInfo) -> None:
        try:
            policy = QoSPolicyKind(info.last_policy_kind).name
        except ValueError:
            policy = str(info.last_policy_kind)
        other = "publisher" if side == "sub" else "subscriber"
        hint = (f" (this node: image_reliability={image_reliability})"
                if topic.startswith("image") and image_reliability else "")
        node.get_logger().warning(f"a {other} on '{topic}' has incompatible QoS (policy {policy}); no "
                                  f"messages flow between them{hint}")
    return PublisherEventCallbacks(incompatible_qos=cb) if side == "pub" else SubscriptionEventCallbacks(
        incompatible_qos=cb)


class GroundingInputs:
    """Every configure-time subscription: the camera (raw subscriptions: the bytes go to the
    core undecoded), per-frame prompt sets, and with a depth topic the depth and CameraInfo.
    ``handler`` has the callbacks (the node): on_frame_prompts, on_frame(kind, data),
    on_depth, on_camera_info, and ``transport`` (lost-message counts)."""

    def __init__(self, node: LifecycleNode, cfg: GroundingConfig, handler: GroundingHandler) -> None:
        self._node = node
        self._reliability = cfg.image_reliability
        image = node.resolve_topic_name("image")
        compressed = compressed_topic(image, node.resolve_topic_name("image/compressed"),
                                      node.resolve_topic_name("image/compressed", only_expand=True))
        self.image_topics = (image, compressed)
        node.get_logger().info(f"camera input: {image} (Image), {compressed} (CompressedImage)")
        camera = image_qos(cfg.image_reliability)
        # frame_prompts first: the executor serves ready subscriptions in creation order, so a
        # set that arrived with its frame is handed over first
        self.all = [
            node.create_subscription(LabelInfo, "frame_prompts", handler.on_frame_prompts, FRAME_SETS,
                                     event_callbacks=qos_events(node, "frame_prompts", "sub")),
            self._camera(Image, image, lambda raw: handler.on_frame("raw", raw), camera, handler.transport),
            self._camera(CompressedImage, compressed, lambda raw: handler.on_frame("compressed", raw), camera,
                         handler.transport),
        ]
        depth = cfg.depth_topic.strip()
        if depth:
            info = cfg.camera_info_topic.strip() or camera_info_beside(depth)
            self.all += [
                node.create_subscription(Image, depth, handler.on_depth, camera, raw=True,
                                         event_callbacks=qos_events(node, depth, "sub")),
                node.create_subscription(CameraInfo, info, handler.on_camera_info, camera,
                                         event_callbacks=qos_events(node, info, "sub"))]
            node.get_logger().info(f"3D input: {node.resolve_topic_name(depth)} (depth), "
                                   f"{node.resolve_topic_name(info)} (CameraInfo)")

    def _camera(self, msg_type: type, topic: str, callback: Callable[[bytes], None], qos: QoSProfile,
                transport: TransportLoss) -> Subscription:
        """A raw camera subscription that also counts the messages the middleware reports
        lost (where it does: else stamp gaps alone tell the loss)."""
        node = self._node
        events = qos_events(node, "image", "sub", self._reliability)
        events.message_lost = lambda info: transport.lost(int(info.total_count_change))
        try:
            sub = node.create_subscription(msg_type, topic, callback, qos, raw=True, event_callbacks=events)
            transport.events_reported = True
            return sub
        except UnsupportedEventTypeError:
            events.message_lost = None
            return node.create_subscription(msg_type, topic, callback, qos, raw=True, event_callbacks=events)


class GroundingOutputs:
    """Every publisher of a configured node (lifecycle publishers: silent until active).
    3D outputs exist only with a depth topic, mask outputs only for a model that gives masks;
    the attributes are there either way (None)."""

    def __init__(self, node: LifecycleNode, cfg: GroundingConfig, *, masks: bool) -> None:
        def pub(msg_type: type, topic: str, qos: QoSProfile) -> LifecyclePublisher:
            return node.create_lifecycle_publisher(msg_type, topic, qos,
                                                   event_callbacks=qos_events(node, topic, "pub"))

        self._node = node
        self.detections = pub(Detection2DArray, "detections", RELIABLE_10)
        self.debug = pub(Image, "debug_image", VIEWER)
        self.labels = pub(LabelInfo, "label_info", LATCHED)
        self.target = pub(Detection2D, "target", LATCHED)  # docs/GROUNDING_NODE.md, "Choosing the target"
        self.failures = pub(DiagnosticArray, "frame_errors", RELIABLE_10)  # one per failed frame
        depth = bool(cfg.depth_topic.strip())
        self.d3 = pub(Detection3DArray, "detections_3d", RELIABLE_10) if depth else None
        self.pose = pub(PoseStamped, "target_pose", RELIABLE_10) if depth else None
        self.markers = pub(MarkerArray, "markers", RELIABLE_10) if depth else None
        self.points = pub(PointCloud2, "target_points", VIEWER) if depth and masks else None
        self.masks = {topic: pub(Image, topic, VIEWER) for topic in MASK_TOPICS} if masks else {}
        self.mask_labels = pub(LabelInfo, "segmentation/label_info", LATCHED) if masks else None
        every = (self.detections, self.debug, self.labels, self.target, self.failures, self.d3, self.pose,
                 self.markers, self.points, self.mask_labels, *self.masks.values())
        self.all = [p for p in every if p is not None]

    def wanted(self) -> Wanted:
        """The optional outputs someone subscribes to (built only then)."""
        masks = any(p.get_subscription_count() > 0 for p in self.masks.values())
        points = self.points is not None and self.points.get_subscription_count() > 0
        return Wanted(debug_image=self.debug.get_subscription_count() > 0, masks=masks, points=points)

    def publish_detections(self, answer: FrameAnswer) -> None:
        """The 2D answer, the moment it is encoded (serialized: a fraction of rclpy's cost)."""
        assert answer.detections_cdr is not None  # only answered frames are published
        self.detections.publish(answer.detections_cdr)

    def publish_failure(self, answer: FrameAnswer) -> None:
        """A failed frame's report (the core's bytes): the evaluator counts the frame failed."""
        if answer.failure_cdr is not None:
            self.failures.publish(answer.failure_cdr)

    def publish_rest(self, answer: FrameAnswer) -> None:
        """The frame's other outputs (the target, 3D, masks, points, the debug image), where it
        has them."""
        if answer.target_cdr is not None:
            self.target.publish(answer.target_cdr)
        if answer.mask_labels_cdr is not None and self.mask_labels is not None:
            self.mask_labels.publish(answer.mask_labels_cdr)  # latched: the class map, when it changed
        if answer.mask_cdr:
            for topic, data in answer.mask_cdr.items():
                self.masks[topic].publish(data)
        if self.d3 is not None and answer.detections_3d_cdr is not None:
            self.d3.publish(answer.detections_3d_cdr)
            if answer.target_pose_cdr is not None and self.pose is not None:
                self.pose.publish(answer.target_pose_cdr)
            markers = self.markers
            if markers is not None and answer.d3 is not None and markers.get_subscription_count() > 0:
                header = convert.to_header(answer.header)  # built only for a viewer
                markers.publish(convert_3d.markers_to_msg(answer.d3, answer.detections, header,
                                                               answer.prompts))
        if self.points is not None and answer.points_cdr is not None:
            self.points.publish(answer.points_cdr)
        if answer.debug_rgb is not None:
            self.debug.publish(convert.rgb_to_image_msg(answer.debug_rgb, answer.header))
