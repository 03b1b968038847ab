"""The live grounding node: camera images + typed prompts -> Detection2DArray at camera rate.

A lifecycle node (configure loads the model, activate starts processing, deactivate stops,
cleanup releases the model; ``autostart`` does configure+activate on start). Real time:
the image callbacks only put the newest (still serialized) message into a one-slot
mailbox; a worker thread (:mod:`probench.realtime.grounding_worker`) processes the newest frame,
so frames never queue behind a slow model (the replaced ones are counted as skipped).
Operator prompt changes (``prompt`` topic, ``prompts`` parameter) are queued for the worker,
which makes the text side ready and acknowledges each accepted set with a LabelInfo.
A frame may also carry its own prompt set: a LabelInfo on ``frame_prompts`` whose
header.stamp equals the frame's stamp (the evaluator's per-frame label spaces); the frame
is then answered with that set, its text encoded (or taken from the detector's LRU text
cache) while the frame is processed, so inside its latency. The topic/param contract with
the evaluator is in docs/DESIGN.md ("ROS graph contract") and docs/EVALUATION.md.
"""

from __future__ import annotations

import functools
import gc
import sys
import threading
import time
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks, UnsupportedEventTypeError
from rclpy.exceptions import ParameterException, ParameterUninitializedException
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSPolicyKind,
    QoSProfile,
    ReliabilityPolicy,
)
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import Header, String
from vision_msgs.msg import Detection2DArray, Detection3DArray, LabelInfo
from visualization_msgs.msg import MarkerArray

from probench.detections import Detections
from probench.errors import ProbenchError
from probench.models.base import Detector, check_prompts
from probench.prompting.messages import prompts_from_message
from probench.prompting.policy import PromptPlan, PromptPolicy, resolve_policy
from probench.realtime.errors import ParameterValueError
from probench.realtime.grounding_stats import (
    DECODE_STAGE,
    GroundingStats,
    Health,
    TransportLoss,
    diagnostic_level,
    loss_hint,
    loss_warning,
)
from probench.realtime.grounding_trace import NodeTrace
from probench.realtime.grounding_worker import FrameWorker, ImageKind, Prompts, StampedPromptSets
from probench.realtime.node_spec import (
    GROUNDING_PARAMS,
    NODE_NAME,
    GroundingConfig,
    camera_info_beside,
    compressed_topic,
    diagnostic_status_name,
)
from probench.realtime.spatial_stage import (
    DEPTH_STAGE,
    DepthFields,
    SpatialSettings,
    SpatialStage,
    spatial_labels,
)
from probench.ros import convert
from probench.ros.convert import spatial as convert_3d
from probench.ros.errors import RosError
from probench.spatial.depth import Detections3D
from probench.spatial.messages import detections_3d_cdr, target_pose_cdr

_THROTTLE_S = 5.0
# On SIGINT/SIGTERM: how long the frame in flight may take to finish. ros2 launch sends
# SIGTERM 5 s after SIGINT and SIGKILL 5 s later; the node ignores the SIGTERM.
_SHUTDOWN_FRAME_WAIT_S = 5.0


def image_qos(reliability: str = "best_effort") -> QoSProfile:
    """The QoS of the node's image subscriptions (sensor data: keep last 5, volatile;
    reliability from the ``image_reliability`` parameter)."""
    rel = ReliabilityPolicy.RELIABLE if reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5, reliability=rel,
                      durability=DurabilityPolicy.VOLATILE)


class GroundingNode(LifecycleNode):  # type: ignore[misc]  # rclpy is not followed by mypy: Any
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        for spec in GROUNDING_PARAMS:  # declared once, here; config/grounding.yaml holds the same defaults
            self.declare_parameter(spec.name, *convert.param_declaration(spec))

        self.stats = GroundingStats()
        self.transport = TransportLoss()  # frames lost between the camera and this node
        self.worker = FrameWorker(self.stats, self._process, self._apply_prompts, self._on_worker_error)
        self.frame_sets = StampedPromptSets()  # per-frame prompt sets (frame_prompts), by stamp; built once
        self._detector: Detector | None = None  # loaded at configure, released at cleanup
        self._cfg: GroundingConfig | None = None  # parameter values taken at configure
        self._entities: list[Any] = []  # created at configure, destroyed at cleanup
        self._syncing_param = False
        self._errors_reported = 0
        self.finalized = threading.Event()
        self.last_error = ""
        self.last_frame_error = ""  # the latest frame's failure, for /diagnostics
        self._active_since = time.monotonic()
        self._processed_reported = 0
        self._image_topics = ("image", "image/compressed")  # resolved at configure
        self._spatial: SpatialStage | None = None  # tracking and 3D (configure: tracking / depth_topic)
        self._trace: NodeTrace | None = None  # trace_file: the node's per-frame evidence

        # Values given at startup (-p, params file) bypass the set-parameters callback: same checks.
        for spec in GROUNDING_PARAMS:
            try:
                value = self.get_parameter(spec.name).value
            except ParameterUninitializedException:
                continue
            try:
                checked = GROUNDING_PARAMS.check(spec.name, value)
            except (ProbenchError, ValueError) as exc:
                raise ParameterValueError(f"parameter {spec.name}: {exc}") from exc
            if spec.name == "prompts":
                self.worker.latest_prompts = checked
        self._policy_rejected = 0
        try:
            self.worker.policy = self._resolve_policy()
        except ProbenchError as exc:
            raise ParameterValueError(f"parameter prompt_policy: {exc}") from exc
        self.add_on_set_parameters_callback(self._on_set_parameters)
        reliable10 = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(String, "prompt", self._on_prompt_raw, reliable10, raw=True)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_timer = self.create_timer(self._param("diagnostics_period"), self._publish_diagnostics)

    # -- parameters ---------------------------------------------------------------------
    def _param(self, name: str) -> Any:
        return self.get_parameter(name).value

    @property
    def config(self) -> GroundingConfig:
        """The configure-time parameters (only between configure and cleanup)."""
        if self._cfg is None:
            raise RosError("grounding_node is not configured")
        return self._cfg

    @property
    def detector(self) -> Detector:
        """The model (only between configure and cleanup)."""
        if self._detector is None:
            raise RosError("grounding_node is not configured")
        return self._detector

    @property
    def autostart(self) -> bool:
        return bool(self._param("autostart"))

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Validate every value first (the set is atomic), then apply live prompts and the
        prompt policy (a policy that cannot be resolved is refused; the previous stays)."""
        prompts = None
        policy_values: dict[str, Any] = {}
        for p in params:
            try:
                checked = GROUNDING_PARAMS.check(p.name, p.value)
            except (ProbenchError, ValueError) as exc:
                if p.name == "prompts":
                    self.stats.count("prompts_rejected")
                if p.name in ("prompt_policy", "prompt_profile"):
                    self._reject_policy(str(exc))
                return SetParametersResult(successful=False, reason=str(exc))
            if p.name == "prompts":
                prompts = checked
            if p.name in ("prompt_policy", "prompt_profile"):
                policy_values[p.name] = checked
        policy = None
        if policy_values:
            try:
                policy = self._resolve_policy(**policy_values)
            except ProbenchError as exc:
                self._reject_policy(str(exc))
                return SetParametersResult(successful=False, reason=str(exc))
        if prompts is not None and not self._syncing_param:
            self._accept_prompts(prompts, "parameter")
        if policy is not None:
            self.worker.put_policy(policy, self.get_clock().now().to_msg())
            self.get_logger().info(f"prompt policy: {policy.describe()}")
        return SetParametersResult(successful=True)

    # -- prompt policy (docs/PROMPTING.md) ----------------------------------------------
    def _resolve_policy(
        self, prompt_policy: str | None = None, prompt_profile: str | None = None
    ) -> PromptPolicy:
        """The policy for the node's model (its zoo name and Table II row), from the given
        values, else the parameters'; one-line errors."""
        from probench.models.zoo import model_record

        name = self._param("prompt_policy") if prompt_policy is None else prompt_policy
        profile = str(self._param("prompt_profile") if prompt_profile is None else prompt_profile).strip()
        model = str(self._param("model"))
        try:
            paper = str(model_record(model)["paper_name"])
        except ProbenchError:  # an unknown model fails at configure, with its own message
            paper = ""
        policy = resolve_policy(str(name), model=model, paper_name=paper, profile=profile or None)
        if policy.warning:
            self.get_logger().warning(policy.warning)
        return policy

    def _reject_policy(self, why: str) -> None:
        self._policy_rejected += 1
        self.get_logger().warning(f"prompt policy rejected, the previous stays active: {why}")

    def _plan(self, prompts: Prompts) -> PromptPlan:
        policy: PromptPolicy = self.worker.policy
        return policy.plan(prompts)

    # -- prompts ------------------------------------------------------------------------
    def _on_prompt_raw(self, data: bytes) -> None:
        """Raw subscription: rclpy would silently turn invalid UTF-8 into U+FFFD prompts;
        a malformed message must be a logged rejection instead."""
        try:
            prompts = prompts_from_message(convert.prompt_text(data))
        except ProbenchError as exc:
            self._reject_prompt(str(exc))
            return
        self._accept_prompts(prompts, "topic")
        self._syncing_param = True  # keep `ros2 param get prompts` truthful without a second ack
        try:
            self.set_parameters([Parameter("prompts", Parameter.Type.STRING_ARRAY, list(prompts))])
        finally:
            self._syncing_param = False

    def _on_frame_prompts(self, msg: LabelInfo) -> None:
        """A prompt set for one frame: kept until the frame with the same stamp is processed."""
        try:
            prompts = check_prompts(convert.label_info_to_prompts(msg))
        except ProbenchError as exc:
            self.stats.count("prompts_rejected")
            self.get_logger().warning(f"frame prompt set rejected, its frame gets the operator's prompts: "
                                      f"{exc}", throttle_duration_sec=_THROTTLE_S)
            return
        self.frame_sets.put(convert.stamp_ns(msg.header.stamp), prompts)

    def _reject_prompt(self, why: str) -> None:
        self.stats.count("prompts_rejected")
        self.get_logger().warning(f"prompt rejected, previous prompts stay active: {why}")

    def _accept_prompts(self, prompts: Prompts, source: str) -> None:
        self.worker.put_prompts(prompts, self.get_clock().now().to_msg())
        self.get_logger().info(f"prompts from {source}: {' ; '.join(prompts)}")

    def _apply_prompts(self, prompts: Prompts, stamp: Any) -> bool:
        """Worker thread: encode the text side once, then acknowledge with a LabelInfo."""
        try:
            plan = self._plan(prompts)
            self.detector.set_prompts(plan.model_texts)
        except ProbenchError as exc:
            self.stats.count("prompts_rejected")
            self.get_logger().error(f"model refused prompts, previous stay active: {exc}")
            return False
        header = Header(stamp=stamp, frame_id="")
        # the acknowledgement lists the operator's prompts (the class ids), whatever the model gets
        threshold = self.config.score_threshold
        self._pub_labels.publish(convert.label_info_to_cdr(plan.operator, header, threshold))
        return True

    # -- images -------------------------------------------------------------------------
    # Raw subscriptions: the callback keeps the serialized bytes (no rclpy conversion, which
    # would copy the pixels); the worker parses them into a zero-copy view (convert.*_from_cdr).
    def _on_image(self, data: bytes) -> None:
        self.transport.arrived("raw", convert.header_stamp_ns(data))
        self._replaced(self.worker.put_frame("raw", data))

    def _on_compressed(self, data: bytes) -> None:
        self.transport.arrived("compressed", convert.header_stamp_ns(data))
        self._replaced(self.worker.put_frame("compressed", data))

    def _replaced(self, data: bytes | None) -> None:
        if data is not None and self._trace is not None:
            self._trace.replaced(data)

    def _on_message_lost(self, info: Any) -> None:
        self.transport.lost(int(info.total_count_change))

    def _process(self, kind: ImageKind, data: bytes, t_arrival: float, prompts: Prompts) -> None:
        """Worker thread: one frame, answered with the prompt set stamped for it, else with
        the operator's set active when it started (``prompts``)."""
        cfg, detector, trace = self._cfg, self._detector, self._trace
        if cfg is None or detector is None:  # not configured: the worker runs from configure to cleanup
            return
        if trace is not None:
            trace.begin()
        t_decode = time.perf_counter()
        try:
            header, rgb = convert.rgb_from_cdr(data, compressed=kind == "compressed",
                                               max_pixels=cfg.max_image_pixels)
        except ProbenchError as exc:
            self.stats.count("errors")
            self.last_frame_error = f"image dropped: {exc}"
            self.get_logger().warning(self.last_frame_error, throttle_duration_sec=_THROTTLE_S)
            return
        if not rgb.flags.writeable:  # a view of the immutable wire bytes: models may write
            rgb = rgb.copy()
        decode_ms = (time.perf_counter() - t_decode) * 1000.0
        stamp = convert.stamp_ns(header.stamp)
        t_sets = time.perf_counter()
        own = self.frame_sets.take(stamp, cfg.frame_prompts_wait)
        if trace is not None:  # the frame is done when this returns (answered or given up)
            wait_ms = (time.perf_counter() - t_sets) * 1000.0
            done = functools.partial(trace.end, stamp, prompt_wait_ms=wait_ms, bound=own is not None)
        if own is not None:
            prompts = own
        elif self.frame_sets.in_use():
            # Per-frame sets are being sent but this frame's never came. An empty answer would
            # read as "nothing found with its set": without operator prompts, no answer at all.
            what = "answered with the operator's prompts" if prompts else "not answered (no operator prompts)"
            self.get_logger().warning(
                f"no prompt set stamped for the frame within {cfg.frame_prompts_wait} s "
                f"(frame_prompts_wait): {what}", throttle_duration_sec=_THROTTLE_S)
            if not prompts:
                if trace is not None:
                    done()
                return
        if prompts:
            # the text side is made ready here (LRU-cached), so it counts in this frame's latency;
            # the policy's texts go to the model, the boxes come back under the operator's prompts
            plan = self._plan(prompts)
            dets = plan.detect(detector, rgb)
            prompts = plan.operator
        else:
            dets = Detections.empty()
            self.get_logger().warning("no prompts yet: publish one on 'prompt' (or set the prompts "
                                      "parameter)", throttle_duration_sec=_THROTTLE_S)
        # serialized directly: the bytes of the Detection2DArray, a fraction of rclpy's cost
        limit = cfg.max_detections
        spatial, ids, est = self._spatial, None, None
        if spatial is not None:  # ids and 3D for exactly the detections published
            dets, ids = spatial.track(dets.filter(convert.top_order(dets, limit)), prompts, stamp)
        self._pub_dets.publish(convert.detections_to_cdr(dets, header, prompts, max_detections=limit,
                                                         track_ids=ids))
        latency_ms = (time.perf_counter() - t_arrival) * 1000.0
        stages = {DECODE_STAGE: decode_ms, **{k: v for k, v in dets.timings_ms.items() if k != "total"}}
        if spatial is not None and ids is not None and spatial.settings.depth:
            stages[DEPTH_STAGE], est = self._publish_3d(spatial, dets, ids, header, prompts, rgb.shape[:2])
        self.stats.record_frame(latency_ms, stages_ms=stages)
        if trace is not None:
            done()
        if self._pub_debug.get_subscription_count() > 0:  # drawing costs: only for a viewer
            from probench.viz import draw_detections

            if ids is None:
                drawn = draw_detections(rgb, dets.filter(convert.top_order(dets, limit)), prompts)
            else:  # already the published set, in order: with ids and distances
                drawn = draw_detections(rgb, dets, prompts, extras=spatial_labels(len(dets), ids, est))
            self._pub_debug.publish(convert.rgb_to_image_msg(drawn, header))

    def _policy_diagnostics(self, active: Prompts) -> dict[str, Any]:
        """The policy, and per active prompt "you typed X -> the model gets Y"."""
        policy: PromptPolicy = self.worker.policy
        plan = policy.plan(active) if active else None
        out: dict[str, Any] = {"prompt_policy": policy.describe(), "prompt_profile": policy.profile or "",
                               "policy_rejected": self._policy_rejected,
                               "prompts_as_typed_fallback": plan.fallbacks if plan else 0}
        if plan is not None:
            for i, (typed, given) in enumerate(plan.given().items()):
                out[f"prompt_{i}"] = f"you typed {typed!r} -> the model gets {given!r}"
        return out

    def _publish_3d(self, spatial: SpatialStage, dets: Detections, ids: Any, header: Any, prompts: Prompts,
                    image_hw: tuple[int, int]) -> tuple[float, Detections3D | None]:
        """Worker thread, after the 2D answer: pair the frame's depth, publish the 3D outputs."""
        est, ms, problem = spatial.locate(dets, ids, convert.stamp_ns(header.stamp), image_hw)
        if problem:
            self.get_logger().warning(f"no 3D output: {problem} (2D detections go on)")
        if est is None:
            return ms, None
        self._pub_3d.publish(detections_3d_cdr(est, dets, header, prompts))  # serialized, as detections
        pose = target_pose_cdr(est, dets, header)
        if pose is not None:
            self._pub_pose.publish(pose)
        if self._pub_markers.get_subscription_count() > 0:  # built only for a viewer
            markers = convert_3d.markers_to_msg(est, dets, convert.to_header(header), prompts)
            self._pub_markers.publish(markers)
        return ms, est

    # -- depth ---------------------------------------------------------------------------
    def _on_depth(self, data: bytes) -> None:
        """Raw subscription: only the header is read here; the pixels stay in the message
        bytes until the worker pairs them with their colour frame."""
        spatial = self._spatial
        if spatial is None:
            return
        try:
            img = convert.image_from_cdr(data)
        except ProbenchError as exc:
            self.get_logger().warning(f"depth image dropped: {exc}", throttle_duration_sec=_THROTTLE_S)
            return
        spatial.put_depth(DepthFields(convert.stamp_ns(img.header.stamp), img.height, img.width, img.encoding,
                                      img.is_bigendian, img.step, img.data))

    def _on_camera_info(self, msg: CameraInfo) -> None:
        spatial = self._spatial
        if spatial is not None:
            problem = spatial.put_camera_info(list(msg.k), int(msg.width), int(msg.height))
            if problem:
                self.get_logger().warning(f"no 3D output: {problem} (2D detections go on)")

    def _on_worker_error(self, exc: BaseException) -> None:
        self.last_frame_error = f"frame failed: {type(exc).__name__}: {exc}"
        self.get_logger().error(self.last_frame_error, throttle_duration_sec=_THROTTLE_S)

    def _on_incompatible_qos(self, topic: str, side: str) -> Any:
        def cb(info: Any) -> None:
            try:
                policy = QoSPolicyKind(info.last_policy_kind).name
            except ValueError:
                policy = str(info.last_policy_kind)
            other = "publisher" if side == "sub" else "subscriber"
            hint = (f" (this node: image_reliability={self._param('image_reliability')})"
                    if topic.startswith("image") else "")
            self.get_logger().warning(
                f"a {other} on '{topic}' has incompatible QoS (policy {policy}); no messages flow "
                f"between them{hint}"
            )
        return cb

    # -- lifecycle ----------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        from probench.models import load_detector

        values = {spec.name: self._param(spec.name) for spec in GROUNDING_PARAMS if spec.name != "prompts"}
        self._cfg = GROUNDING_PARAMS.to_config(GroundingConfig, values)
        name, device = self._cfg.model, self._cfg.device
        try:
            self._detector = load_detector(
                name, device=device, precision=self._cfg.precision,
                score_threshold=float(self._cfg.score_threshold), weights=self._cfg.weights or None,
                preprocess=self._cfg.preprocess,
            )
        except ProbenchError as exc:
            return self._fail(f"cannot load model {name!r}: {exc}")
        except Exception as exc:  # noqa: BLE001 - e.g. a torch/CUDA error; reported, node stays up
            return self._fail(f"cannot load model {name!r}: {type(exc).__name__}: {exc}")
        try:  # the model may have changed since: best reads its profile entry again
            self.worker.policy = self._resolve_policy()
        except ProbenchError as exc:
            return self._fail(f"prompt policy: {exc}")
        self._create_entities()
        if self._cfg.trace_file:
            self._trace = NodeTrace(self._cfg.trace_file)
        if self.worker.latest_prompts:  # acknowledged (LabelInfo) once active
            self.worker.put_prompts(self.worker.latest_prompts, self.get_clock().now().to_msg())
        self.worker.start()
        self.get_logger().info(f"configured: model {name} on {device}")
        return super().on_configure(state)

    def _fail(self, why: str) -> TransitionCallbackReturn:
        self.last_error = why
        self.get_logger().error(why)
        self._release()
        return TransitionCallbackReturn.FAILURE

    def _create_entities(self) -> None:
        camera_qos = image_qos(self.config.image_reliability)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)

        def sub_events(topic: str) -> SubscriptionEventCallbacks:
            return SubscriptionEventCallbacks(incompatible_qos=self._on_incompatible_qos(topic, "sub"))

        def pub_events(topic: str) -> PublisherEventCallbacks:
            return PublisherEventCallbacks(incompatible_qos=self._on_incompatible_qos(topic, "pub"))

        self._pub_dets = self.create_lifecycle_publisher(
            Detection2DArray, "detections", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
            event_callbacks=pub_events("detections"))
        self._pub_debug = self.create_lifecycle_publisher(
            Image, "debug_image", QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE),
            event_callbacks=pub_events("debug_image"))
        self._pub_labels = self.create_lifecycle_publisher(
            LabelInfo, "label_info", latched, event_callbacks=pub_events("label_info"))
        # Deep and reliable: the evaluator publishes each frame's set just before the frame.
        frame_sets_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                                    reliability=ReliabilityPolicy.RELIABLE)
        image_topic, compressed = self._resolve_image_topics()
        subs = [
            # created before the image subscriptions: the executor serves ready subscriptions
            # in creation order, so a set that arrived with its frame is handed over first
            self.create_subscription(LabelInfo, "frame_prompts", self._on_frame_prompts, frame_sets_qos,
                                     event_callbacks=sub_events("frame_prompts")),
            self._subscribe_camera(Image, image_topic, self._on_image, camera_qos, sub_events("image")),
            self._subscribe_camera(CompressedImage, compressed, self._on_compressed, camera_qos,
                                   sub_events("image/compressed")),
        ]
        self._entities = [self._pub_dets, self._pub_debug, self._pub_labels, *subs]
        self._create_spatial(camera_qos, pub_events, sub_events)
        self.destroy_timer(self._diag_timer)
        self._diag_timer = self.create_timer(self.config.diagnostics_period, self._publish_diagnostics)

    def _subscribe_camera(self, msg_type: Any, topic: str, callback: Any, qos: QoSProfile,
                          events: SubscriptionEventCallbacks) -> Any:
        """A raw camera subscription that also counts the messages the middleware reports
        lost (where it does: else stamp gaps alone tell the loss)."""
        events.message_lost = self._on_message_lost
        try:
            sub = self.create_subscription(msg_type, topic, callback, qos, raw=True, event_callbacks=events)
            self.transport.events_reported = True
            return sub
        except UnsupportedEventTypeError:
            events.message_lost = None
            return self.create_subscription(msg_type, topic, callback, qos, raw=True, event_callbacks=events)

    def _create_spatial(self, camera_qos: QoSProfile, pub_events: Any, sub_events: Any) -> None:
        """Tracking (``tracking``) and the depth input and 3D outputs (``depth_topic``)."""
        cfg = self.config
        depth_topic = cfg.depth_topic.strip()
        self._spatial = None
        if not depth_topic and not cfg.tracking:
            return
        self._spatial = SpatialStage(SpatialSettings(depth=bool(depth_topic), tracking=cfg.tracking,
                                                     tolerance_s=cfg.depth_tolerance,
                                                     min_depth_pixels=cfg.min_depth_pixels))
        if not depth_topic:
            return
        info_topic = cfg.camera_info_topic.strip() or camera_info_beside(depth_topic)
        reliable10 = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._pub_3d = self.create_lifecycle_publisher(Detection3DArray, "detections_3d", reliable10,
                                                       event_callbacks=pub_events("detections_3d"))
        self._pub_pose = self.create_lifecycle_publisher(PoseStamped, "target_pose", reliable10,
                                                         event_callbacks=pub_events("target_pose"))
        self._pub_markers = self.create_lifecycle_publisher(MarkerArray, "markers", reliable10,
                                                            event_callbacks=pub_events("markers"))
        self._entities += [
            self._pub_3d, self._pub_pose, self._pub_markers,
            self.create_subscription(Image, depth_topic, self._on_depth, camera_qos, raw=True,
                                     event_callbacks=sub_events(depth_topic)),
            self.create_subscription(CameraInfo, info_topic, self._on_camera_info, camera_qos,
                                     event_callbacks=sub_events(info_topic)),
        ]
        self.get_logger().info(f"3D input: {self.resolve_topic_name(depth_topic)} (depth), "
                               f"{self.resolve_topic_name(info_topic)} (CameraInfo)")

    def _resolve_image_topics(self) -> tuple[str, str]:
        """The camera topics after remapping: one remap of ``image`` moves ``image/compressed``
        too, unless that one is remapped itself (:func:`node_spec.compressed_topic`)."""
        image = self.resolve_topic_name("image")
        compressed = compressed_topic(image, self.resolve_topic_name("image/compressed"),
                                      self.resolve_topic_name("image/compressed", only_expand=True))
        self._image_topics = (image, compressed)
        self.get_logger().info(f"camera input: {image} (Image), {compressed} (CompressedImage)")
        return image, compressed

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        ret = super().on_activate(state)  # enables the lifecycle publishers first
        self._active_since = time.monotonic()
        self.worker.activate()
        self.get_logger().info("active")
        return ret

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.worker.deactivate()  # returns once the frame in flight is published
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        self.finalized.set()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return TransitionCallbackReturn.SUCCESS  # back to unconfigured

    def _release(self, destroy_entities: bool = True, frame_wait_s: float = 30.0) -> None:
        """Stop the worker (waiting up to ``frame_wait_s`` for the frame in flight), destroy
        configure-time entities and free the model."""
        self.worker.stop(timeout=frame_wait_s)
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        if destroy_entities:
            for ent in self._entities:
                if hasattr(ent, "on_activate"):  # lifecycle publishers
                    self.destroy_lifecycle_publisher(ent)
                else:
                    self.destroy_subscription(ent)
        self._entities = []
        if self._detector is not None:
            self._detector = None
            gc.collect()
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available():
                torch.cuda.empty_cache()

    # -- diagnostics --------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        period = self._cfg.diagnostics_period if self._cfg else self._param("diagnostics_period")
        snap = self.stats.snapshot(stale_after_s=max(2.0, 2 * period))
        state = self._state_machine.current_state[1]
        active = self.worker.active_prompts
        values: dict[str, Any] = {
            "state": state, "model": self._param("model"), "device": self._param("device"),
            "precision": self._param("precision"), "prompts": " ; ".join(active),
            "n_prompts": len(active), **snap,
        }
        detector = self._detector
        if detector is not None:
            cache = detector.text_cache_stats()
            values.update(text_encoder_calls=detector.text_encoder_calls, text_cache_hits=cache["hits"],
                          text_cache_misses=cache["misses"], text_cache_evictions=cache["evictions"])
        values.update(self.frame_sets.counters())
        values.update(self._policy_diagnostics(active))
        values.update(image_topic=self._image_topics[0], compressed_topic=self._image_topics[1])
        loss = self.transport.snapshot()
        values.update(loss)
        transport = loss_warning(loss, " or ".join(self._image_topics)) if state == "active" else ""
        if transport:
            from probench.ros.dds_profile import fast_dds_profile_hint

            values["transport_hint"] = hint = loss_hint(fast_dds_profile_hint())
            self.get_logger().warning(f"{transport}: {hint}", throttle_duration_sec=30.0)
        if self._spatial is not None:
            values.update(self._spatial.diagnostics())
        new_errors = int(snap["errors"]) - self._errors_reported
        new_processed = int(snap["frames_processed"]) - self._processed_reported
        self._errors_reported, self._processed_reported = int(snap["errors"]), int(snap["frames_processed"])
        last = self.stats.last_arrival
        since = self._active_since if last is None else max(last, self._active_since)
        camera_timeout = self._cfg.camera_timeout if self._cfg else self._param("camera_timeout")
        level, message = diagnostic_level(Health(
            state=state, n_prompts=len(active), new_processed=new_processed, new_errors=new_errors,
            rate_hz=float(snap["rate_hz"]), silent_s=time.monotonic() - since, camera_timeout=camera_timeout,
            topics=" or ".join(self._image_topics), last_error=self.last_frame_error, transport=transport))
        self._diag_pub.publish(convert.stats_to_diagnostics(
            diagnostic_status_name(self.get_fully_qualified_name()), str(self._param("device")), level,
            message, values, self.get_clock().now().to_msg(),
        ))


def main(argv: list[str] | None = None) -> int:
    """``grounding_node [--ros-args ...]``: run until SIGINT/SIGTERM or a shutdown transition.

    A signal is a request to stop, answered with exit code 0: while the model loads it
    abandons the load, otherwise the loop ends at its next turn (at most 0.1 s); the frame in
    flight is finished (up to ``_SHUTDOWN_FRAME_WAIT_S``), and every further signal is
    ignored while the node cleans up (:mod:`probench.ros.shutdown`)."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from probench.ros.dds_profile import apply_profile
    from probench.ros.shutdown import ShutdownRequested, SignalShutdown

    t_start = time.monotonic()
    shutdown = SignalShutdown.install()
    profile = apply_profile()  # before the participant exists; never over the user's choice
    rc = 0
    node = None
    executor = None
    try:
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
        executor = SingleThreadedExecutor()
        node = GroundingNode()
        executor.add_node(node)
        log = node.get_logger()
        if profile:
            log.info(f"Fast DDS profile {profile} (set FASTDDS_DEFAULT_PROFILES_FILE to use your own)")
        if node.autostart:
            t_load = time.monotonic()
            log.info(f"loading model {node._param('model')}")
            with shutdown.interruptible():  # a signal abandons the load
                configured = node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            if not configured:
                print(f"grounding_node: {node.last_error or 'configure failed'}", file=sys.stderr)
                rc = 1
            elif node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                print("grounding_node: activate failed", file=sys.stderr)
                rc = 1
            else:
                now = time.monotonic()
                log.info(f"active {now - t_start:.2f} s after main() began (model load {now - t_load:.2f} s)")
        while rc == 0 and not shutdown.requested and rclpy.ok() and not node.finalized.is_set():
            executor.spin_once(timeout_sec=0.1)
    except ShutdownRequested:
        pass
    except ProbenchError as exc:
        print(f"grounding_node: {exc}", file=sys.stderr)
        rc = exc.exit_code
    except ParameterException as exc:  # e.g. `-p max_detections:=abc` at startup
        print(f"grounding_node: bad parameter: {exc}", file=sys.stderr)
        rc = 2
    finally:
        # From here on every signal is ignored (the first one set `requested`, or none came).
        if node is not None:
            node._release(destroy_entities=False, frame_wait_s=_SHUTDOWN_FRAME_WAIT_S)
            if executor is not None:
                executor.remove_node(node)
            node.destroy_node()
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
        rclpy.try_shutdown()
        shutdown.ignore_from_now()  # the interpreter's finalization would restore the default action
    if shutdown.requested:
        print(f"grounding_node: stopped ({shutdown.signal_name})", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
