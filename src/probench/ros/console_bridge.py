"""The ROS side of ``probench console``: a small rclpy node that watches one grounding node
and implements :class:`probench.console.bridge.ConsoleBridge` for the web app.

It subscribes the node's ``label_info`` (the active prompt set), ``detections``,
``/diagnostics`` and ``<node>/transition_event``, asks ``<node>/get_state`` once a second,
publishes on ``prompt`` and calls ``<node>/change_state``. Images are subscribed only while a
page shows the stream (:meth:`want_frames`): ``debug_image`` (drawn by the node, which draws
only while someone subscribes) or, with ``stream_source="image"``, the camera topic, drawn
here from the image and the detections with the same stamp (the node draws nothing). The
camera topic is the one the node itself subscribes (found on the graph, so a remapped
``image`` needs no option), unless ``image_topic`` names one.

rclpy runs in a private context on a thread of its own; the web server's threads only read
snapshots under a lock, publish, and wait on service futures. Subscriptions are created and
destroyed on the executor's thread (a timer), never from the web side.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.console.bridge import (
    STREAM_SOURCES,
    TRANSITIONS,
    DetectionItem,
    DiagnosticsView,
    Frame,
    NodeView,
    graph_names,
    split_node_name,
)
from probench.console.errors import BridgeError, ConsoleUsageError
from probench.console.params import ParamInfo, table_applies
from probench.errors import ProbenchError
from probench.ros import convert

if TYPE_CHECKING:  # the messages' own classes (untyped packages: their attributes are Any to mypy)
    from diagnostic_msgs.msg import DiagnosticArray
    from lifecycle_msgs.msg import TransitionEvent
    from rclpy.client import Client
    from rclpy.qos import QoSProfile
    from rclpy.task import Future
    from vision_msgs.msg import Detection2D, Detection2DArray, Detection3DArray, LabelInfo


# The page may ask TRANSITIONS only; `probench node` (which shares this bridge) cleanup too.
LIFECYCLE_TRANSITIONS = (*TRANSITIONS, "cleanup")
_RECENT_IMAGES = 60  # camera frames kept to meet their detections (stream_source="image")
_STATE_POLL_S = 1.0  # get_state while the state is known (transition events update it at once)
_STATE_POLL_UNKNOWN_S = 0.2  # until the first answer: the page shows the node sooner
# rcl_interfaces/ParameterType -> the parameter tables' type names
_TYPE_NAMES = {0: "unset", 1: "bool", 2: "integer", 3: "double", 4: "string", 5: "byte_array",
               6: "bool_array", 7: "integer_array", 8: "double_array", 9: "string_array"}


class RosConsoleBridge:
    """See the module docstring. ``node``: the grounding node's name (``/grounding_node``);
    ``domain_id``: the ROS domain (default: ``ROS_DOMAIN_ID`` of the environment);
    ``transitions``: the lifecycle transitions :meth:`change_state` accepts (the page's
    by default; one of :data:`LIFECYCLE_TRANSITIONS`)."""

    def __init__(self, node: str = "/grounding_node", *, stream_source: str = "debug_image",
                 image_topic: str | None = None, domain_id: int | None = None,
                 transitions: tuple[str, ...] = TRANSITIONS) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from lifecycle_msgs.msg import TransitionEvent
        from lifecycle_msgs.srv import ChangeState, GetState
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Int64, String
        from vision_msgs.msg import Detection2D, Detection2DArray, Detection3DArray, LabelInfo

        from probench.realtime.node_spec import diagnostic_status_name

        if stream_source not in STREAM_SOURCES:
            raise ConsoleUsageError(f"stream source must be one of {', '.join(STREAM_SOURCES)}")
        self.names = graph_names(node, image_topic)
        self._diag_name = diagnostic_status_name(self.names["node"])
        self.node_ns, self.node_name = split_node_name(node)
        self._explicit_image_topic = image_topic is not None
        self._transitions = tuple(t for t in transitions if t in LIFECYCLE_TRANSITIONS)
        self._stream_topic = self.names["debug_image" if stream_source == "debug_image" else "image"]
        self.stream_source = stream_source
        self._lock = threading.Lock()
        self._lifecycle = "unknown"
        self._prompts: tuple[str, ...] = ()
        self._prompts_at: float | None = None
        self._threshold: float | None = None  # the score threshold in force (the node's LabelInfo)
        self._target: tuple[str, str] | None = None  # (track id, prompt) of the latched `target`
        self._detections: tuple[DetectionItem, ...] = ()
        self._detections_stamp: float | None = None
        # the newest detections_3d: stamp (ns), distance by (class, score, id), distance by id
        self._d3: tuple[int, dict[tuple[str, float, str], float], dict[str, float]] = (-1, {}, {})
        self._diag: tuple[str, str, dict[str, str], float] | None = None
        self._frame: Frame | None = None
        self._seq = 0
        self._want = False
        self._image_subs: list[Any] = []
        self._recent: OrderedDict[int, tuple[str, bytes]] = OrderedDict()  # by stamp (ns)
        self._state_future: Future | None = None
        self._state_asked = -float("inf")

        from rclpy.signals import SignalHandlerOptions

        self._ctx = rclpy.Context()
        # No rclpy signal handlers: Ctrl-C is the program's (a KeyboardInterrupt in its main
        # thread, then close()), never a context shut down under the spin thread first.
        init = {"context": self._ctx, "signal_handler_options": SignalHandlerOptions.NO}
        if domain_id is None:
            rclpy.init(**init)
        else:
            rclpy.init(**init, domain_id=domain_id)
        try:
            self._node = rclpy.create_node(f"probench_console_{os.getpid()}", context=self._ctx,
                                           start_parameter_services=False)
            reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            n, names = self._node, self.names
            self._String = String
            self._pub_prompt = n.create_publisher(String, names["prompt"], reliable)
            self._Int64 = Int64
            self._pub_target = n.create_publisher(Int64, names["target_select"], reliable)
            n.create_subscription(Detection2D, names["target"], self._on_target, latched)
            n.create_subscription(LabelInfo, names["label_info"], self._on_label_info, latched)
            n.create_subscription(Detection2DArray, names["detections"], self._on_detections,
                                  QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE))
            n.create_subscription(Detection3DArray, names["detections_3d"], self._on_detections_3d,
                                  QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE))
            n.create_subscription(DiagnosticArray, names["diagnostics"], self._on_diagnostics, reliable)
            n.create_subscription(TransitionEvent, names["transition_event"], self._on_transition, reliable)
            self._get_state = n.create_client(GetState, names["get_state"])
            self._change_state = n.create_client(ChangeState, names["change_state"])
            self._GetState, self._ChangeState = GetState, ChangeState
            n.create_timer(_STATE_POLL_UNKNOWN_S, self._poll_state)
            n.create_timer(0.2, self._sync_image_subscriptions)
            self._executor = SingleThreadedExecutor(context=self._ctx)
            self._executor.add_node(n)
        except Exception:
            self._ctx.try_shutdown()
            raise
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name="console-ros", daemon=True)
        self._thread.start()

    # -- the ConsoleBridge protocol ------------------------------------------------------
    def view(self) -> NodeView:
        now = time.monotonic()
        present = self._get_state.service_is_ready()
        with self._lock:
            diag = None
            if self._diag is not None:
                level, message, values, at = self._diag
                diag = DiagnosticsView(level, message, dict(values), now - at)
            return NodeView(
                node=self.names["node"], present=present,
                lifecycle=self._lifecycle if present else "unknown",
                prompts=self._prompts, threshold=self._threshold, target=self._target,
                prompts_age_s=None if self._prompts_at is None else now - self._prompts_at,
                detections=self._detections, detections_stamp=self._detections_stamp,
                diagnostics=diag,
                topics={k: self.names[k] for k in ("prompt", "label_info", "detections", "diagnostics")}
                | {"stream": self._stream_topic},
            )

    def latest_frame(self) -> Frame | None:
        with self._lock:
            return self._frame

    def want_frames(self, wanted: bool) -> None:
        self._want = bool(wanted)

    def node_listens(self) -> bool:
        """Whether a node subscribes the prompt topic (discovery takes a moment after start)."""
        return bool(self._pub_prompt.get_subscription_count() > 0)

    def send_prompts(self, prompts: tuple[str, ...]) -> None:
        if self._pub_prompt.get_subscription_count() == 0:
            raise BridgeError(f"no grounding node subscribes {self.names['prompt']} (is it running, "
                              "with the same ROS_DOMAIN_ID?)", 503)
        self._pub_prompt.publish(self._String(data="; ".join(prompts)))

    def change_state(self, transition: str, timeout_s: float) -> str:
        from lifecycle_msgs.msg import Transition

        ids = {name: getattr(Transition, f"TRANSITION_{name.upper()}") for name in self._transitions}
        if transition not in ids:
            raise BridgeError(f"unknown transition {transition!r}", 400)
        if not self._change_state.service_is_ready():
            raise BridgeError(f"no lifecycle node {self.names['node']} on the graph", 503)
        req = self._ChangeState.Request()
        req.transition.id = ids[transition]
        req.transition.label = transition
        deadline = time.monotonic() + timeout_s
        if not self._call(self._change_state, req, timeout_s).success:
            raise BridgeError(f"{self.names['node']} refused '{transition}' (it is {self._lifecycle})", 409)
        state = self._call(self._get_state, self._GetState.Request(),
                           max(1.0, deadline - time.monotonic())).current_state.label
        with self._lock:
            self._lifecycle = state
        return str(state)

    def set_prompt_policy(self, policy: str, profile: str, timeout_s: float) -> None:
        """Set the node's ``prompt_policy`` and ``prompt_profile`` (atomically); a
        :class:`BridgeError` with the node's one-line reason when it refuses them."""
        from rcl_interfaces.srv import SetParametersAtomically

        client = self._node.create_client(SetParametersAtomically,
                                          f"{self.names['node']}/set_parameters_atomically")
        node = self.names["node"]
        try:
            deadline = time.monotonic() + timeout_s
            while not client.service_is_ready():
                if time.monotonic() > deadline:
                    raise BridgeError(f"no node {node} on the graph within {timeout_s:.0f} s", 503)
                time.sleep(0.1)
            req = convert.string_parameters_request({"prompt_policy": policy, "prompt_profile": profile})
            result = self._call(client, req, timeout_s).result
            if not result.successful:
                raise BridgeError(f"{node} refused prompt_policy {policy!r}: {result.reason}", 409)
        finally:
            self._node.destroy_client(client)

    # -- parameters (probench node param, the console's controls) ------------------------
    def _client(self, srv_type: type, service: str, timeout_s: float) -> Client:
        """A client of the node's ``service``, once the node offers it (BridgeError 503 otherwise)."""
        client = self._node.create_client(srv_type, f"{self.names['node']}/{service}")
        deadline = time.monotonic() + timeout_s
        while not client.service_is_ready():
            if time.monotonic() > deadline:
                self._node.destroy_client(client)
                raise BridgeError(f"no node {self.names['node']} offers {service} (is it running, with the "
                                  f"same ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}?)", 503)
            time.sleep(0.05)
        return client

    def _ask(self, srv_type: type, service: str, request: object, timeout_s: float) -> Any:
        client = self._client(srv_type, service, timeout_s)
        try:
            return self._call(client, request, timeout_s)
        finally:
            self._node.destroy_client(client)

    def parameters(self, names: Sequence[str] | None, timeout_s: float) -> list[ParamInfo]:
        """The node's parameters (``names``; None: every one it declares, by ListParameters),
        each with its declared type, description and value (DescribeParameters, GetParameters)."""
        from rcl_interfaces.srv import DescribeParameters, GetParameters, ListParameters
        from rclpy.parameter import parameter_value_to_python

        deadline = time.monotonic() + timeout_s

        def left() -> float:
            return max(1.0, deadline - time.monotonic())

        if names is None:
            listed = self._ask(ListParameters, "list_parameters", ListParameters.Request(), left())
            names = sorted(str(n) for n in listed.result.names)
        wanted = list(names)
        descs = list(self._ask(DescribeParameters, "describe_parameters",
                               DescribeParameters.Request(names=wanted), left()).descriptors)
        if len(descs) != len(wanted):  # rclpy answers nothing at all when one name is not declared
            listed = self._ask(ListParameters, "list_parameters", ListParameters.Request(), left())
            missing = sorted(set(wanted) - {str(n) for n in listed.result.names})
            raise BridgeError(f"{self.names['node']} has no parameter {', '.join(map(repr, missing))} "
                              "(`probench node param list` lists them)", 404)
        values = list(self._ask(GetParameters, "get_parameters", GetParameters.Request(names=wanted),
                                left()).values)
        if len(values) != len(wanted):  # ... and no value at all when one is unset (prompts, at first)
            values = []
            for name in wanted:
                got = self._ask(GetParameters, "get_parameters", GetParameters.Request(names=[name]),
                                left()).values
                values.append(got[0] if got else None)
        out = []
        for name, desc, value in zip(wanted, descs, values, strict=True):
            kind = _TYPE_NAMES.get(int(desc.type), "other")
            py = parameter_value_to_python(value) if value is not None and int(value.type) else None
            out.append(ParamInfo(name, kind, py, str(desc.description), bool(desc.read_only),
                                 table_applies(name)))
        return out

    def set_parameter(self, name: str, value: object, kind: str, timeout_s: float) -> None:
        """Set one parameter (of declared type ``kind``) through the node's SetParameters; a
        BridgeError 409 with the node's reason, word for word, when it refuses."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        types = {"bool": Parameter.Type.BOOL, "integer": Parameter.Type.INTEGER,
                 "double": Parameter.Type.DOUBLE, "string": Parameter.Type.STRING,
                 "string_array": Parameter.Type.STRING_ARRAY}
        if kind not in types:
            raise BridgeError(f"{name} has type {kind}: probench node cannot set it", 400)
        msg = Parameter(name, types[kind], value).to_parameter_msg()
        result = self._ask(SetParameters, "set_parameters", SetParameters.Request(parameters=[msg]),
                           timeout_s).results[0]
        if not result.successful:
            why = result.reason or "(no reason given)"
            raise BridgeError(f"{self.names['node']} refused {name}: {why}", 409)

    # -- target (interaction-driven grounding) ---------------------------------------------
    def target_listens(self) -> bool:
        """Whether a node subscribes ``target_select``."""
        return bool(self._pub_target.get_subscription_count() > 0)

    def select_target(self, track_id: int | None) -> None:
        """Make track ``track_id`` the node's target (None: back to the best detection)."""
        if not self.target_listens():
            raise BridgeError(f"no grounding node subscribes {self.names['target_select']} (a node without "
                              "target selection, or none running)", 503)
        self._pub_target.publish(self._Int64(data=-1 if track_id is None else int(track_id)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._executor.shutdown(timeout_sec=1.0)
        self._node.destroy_node()
        self._ctx.try_shutdown()

    # -- rclpy side ----------------------------------------------------------------------
    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            while not self._stop.is_set() and self._ctx.ok():
                self._executor.spin_once(timeout_sec=0.1)
        except ExternalShutdownException:
            pass

    def _call(self, client: Client, request: object, timeout_s: float) -> Any:
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            client.remove_pending_request(future)
            raise BridgeError(f"{self.names['node']} did not answer within {timeout_s:.0f} s "
                              "(still working? the state updates when it finishes)", 504)
        if future.exception() is not None:
            raise BridgeError(f"call to {self.names['node']} failed: {future.exception()}", 502)
        return future.result()

    def _poll_state(self) -> None:
        if self._state_future is not None and not self._state_future.done():
            return
        if not self._get_state.service_is_ready():
            with self._lock:
                self._lifecycle = "unknown"  # asked afresh when the node (re)appears
            return
        now = time.monotonic()
        if self._lifecycle != "unknown" and now - self._state_asked < _STATE_POLL_S:
            return
        self._state_asked = now
        self._state_future = self._get_state.call_async(self._GetState.Request())
        self._state_future.add_done_callback(self._on_state)

    def _on_state(self, future: Future) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        with self._lock:
            self._lifecycle = str(future.result().current_state.label)

    def _on_transition(self, msg: TransitionEvent) -> None:
        with self._lock:
            self._lifecycle = str(msg.goal_state.label)

    def _on_label_info(self, msg: LabelInfo) -> None:
        prompts = tuple(convert.label_info_to_prompts(msg))
        with self._lock:
            self._prompts, self._prompts_at = prompts, time.monotonic()
            self._threshold = float(msg.threshold)

    def _on_target(self, msg: Detection2D) -> None:
        prompt = str(msg.results[0].hypothesis.class_id) if msg.results else ""
        with self._lock:
            self._target = (str(msg.id), prompt) if msg.id else None

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for name, level, message, values in convert.diagnostics_to_statuses(msg):
            if name == self._diag_name:
                with self._lock:
                    self._diag = (level, message, values, time.monotonic())

    def _on_detections(self, msg: Detection2DArray) -> None:
        xyxy, scores, labels = convert.detection_array_to_arrays(msg)
        ids = [str(d.id) for d in msg.detections]
        stamp_ns = convert.stamp_ns(msg.header.stamp)
        with self._lock:
            items = self._with_distances(stamp_ns, tuple(
                DetectionItem(lab, float(s), (float(b[0]), float(b[1]), float(b[2]), float(b[3])), tid)
                for b, s, lab, tid in zip(xyxy, scores, labels, ids, strict=True)))
            self._detections, self._detections_stamp = items, stamp_ns / 1e9
        if self.stream_source == "image" and self._want:
            self._draw(stamp_ns, xyxy, scores, labels, [d.extra() for d in items])

    def _on_detections_3d(self, msg: Detection3DArray) -> None:
        """Distances for the table and the stream: the same frame's detections by (prompt,
        score, id), a later frame's by track id."""
        by_key, by_id = {}, {}
        for d in msg.detections:
            p = d.bbox.center.position
            dist = float((p.x * p.x + p.y * p.y + p.z * p.z) ** 0.5)
            hyp = d.results[0].hypothesis if d.results else None
            if hyp is not None:
                by_key[(str(hyp.class_id), float(hyp.score), str(d.id))] = dist
            if d.id:
                by_id[str(d.id)] = dist
        stamp_ns = convert.stamp_ns(msg.header.stamp)
        with self._lock:
            self._d3 = (stamp_ns, by_key, by_id)
            if self._detections_stamp is not None and round(self._detections_stamp * 1e9) == stamp_ns:
                self._detections = self._with_distances(stamp_ns, self._detections)

    def _with_distances(self, stamp_ns: int, items: tuple[DetectionItem, ...]) -> tuple[DetectionItem, ...]:
        """(lock held) ``items`` with the distances the newest detections_3d gives them."""
        d3_stamp, by_key, by_id = self._d3
        if not by_key and not by_id:
            return items

        def dist(d: DetectionItem) -> float | None:
            if d3_stamp == stamp_ns:
                return by_key.get((d.label, d.score, d.track_id))
            return by_id.get(d.track_id) if d.track_id else None

        return tuple(DetectionItem(d.label, d.score, d.box, d.track_id, dist(d)) for d in items)

    # -- stream --------------------------------------------------------------------------
    def _sync_image_subscriptions(self) -> None:
        """Executor thread: subscribe images while a page watches the stream, else not."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CompressedImage, Image

        if self._want and not self._image_subs:
            n, names = self._node, self.names
            if self.stream_source == "debug_image":
                qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
                self._image_subs = [n.create_subscription(Image, names["debug_image"], self._on_debug_image,
                                                          qos, raw=True)]
            else:  # what the node reads
                topics = self._camera_topics()
                if topics is None:
                    return  # the node is not on the graph yet: ask again on the next tick
                raw, compressed = topics
                self._stream_topic = raw
                self._image_subs = [
                    n.create_subscription(Image, raw, self._remember("raw"), self._camera_qos(raw), raw=True),
                    n.create_subscription(CompressedImage, compressed, self._remember("compressed"),
                                          self._camera_qos(compressed), raw=True),
                ]
        elif not self._want and self._image_subs:
            for sub in self._image_subs:
                self._node.destroy_subscription(sub)
            self._image_subs = []
            self._recent.clear()

    def _camera_topics(self) -> tuple[str, str] | None:
        """The camera topics (raw, compressed): ``image_topic`` when given, else the ones the
        node subscribes (its remapped ``image`` and ``image/compressed``); None while the node
        is not discovered."""
        from rclpy.node import NodeNameNonExistentError

        default = self.names["image"], self.names["image/compressed"]
        if self._explicit_image_topic:
            return default
        try:
            subs = self._node.get_subscriber_names_and_types_by_node(self.node_name, self.node_ns)
        except NodeNameNonExistentError:
            return None
        raw = [t for t, types in subs if "sensor_msgs/msg/Image" in types]
        compressed = [t for t, types in subs if "sensor_msgs/msg/CompressedImage" in types]
        return (raw[0] if raw else default[0]), (compressed[0] if compressed else default[1])

    def _camera_qos(self, topic: str) -> QoSProfile:
        """Reliable when every publisher of the camera topic is (on one host, best effort loses
        many large frames under load: measured 15 vs 26 of 30 frames/s drawn), else best effort,
        which matches any publisher (a camera that starts later gets best effort)."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        pubs = self._node.get_publishers_info_by_topic(topic)
        reliable = bool(pubs) and all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in pubs)
        return QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE if reliable
                          else ReliabilityPolicy.BEST_EFFORT)

    def _publish_frame(self, rgb: np.ndarray, stamp_ns: int) -> None:
        with self._lock:
            self._seq += 1
            self._frame = Frame(self._seq, rgb, stamp_ns / 1e9)

    def _on_debug_image(self, data: bytes) -> None:
        try:
            header, rgb = convert.rgb_from_cdr(data, compressed=False)
        except ProbenchError as exc:
            self._node.get_logger().warning(f"debug image not shown: {exc}", throttle_duration_sec=5.0)
            return
        self._publish_frame(rgb, convert.stamp_ns(header.stamp))

    def _remember(self, kind: str) -> Callable[[bytes], None]:
        def cb(data: bytes) -> None:
            try:
                parse = convert.image_from_cdr if kind == "raw" else convert.compressed_from_cdr
                header = parse(data).header
            except ProbenchError:
                return
            self._recent[convert.stamp_ns(header.stamp)] = (kind, data)
            while len(self._recent) > _RECENT_IMAGES:
                self._recent.popitem(last=False)
        return cb

    def _draw(self, stamp_ns: int, xyxy: np.ndarray, scores: np.ndarray, labels: list[str],
              extras: list[str] | None = None) -> None:
        from probench.detections import Detections
        from probench.viz import draw_detections

        found = self._recent.pop(stamp_ns, None)
        if found is None:
            return  # the camera frame was lost (best effort) or is older than the window
        kind, data = found
        try:
            rgb = convert.rgb_from_cdr(data, compressed=kind != "raw")[1]
            names = list(self._prompts)
            index = []
            for label in labels:
                if label not in names:
                    names.append(label)
                index.append(names.index(label))
            dets = Detections.from_arrays(xyxy, scores, np.array(index, dtype=np.int64),
                                          image_size=rgb.shape[:2])
            # (a box wholly outside the image is dropped: then the labels cannot be matched)
            shown = extras if extras is not None and len(extras) == len(dets) else None
            drawn = draw_detections(rgb, dets, names, extras=shown)
        except (ProbenchError, ValueError) as exc:
            self._node.get_logger().warning(f"frame not drawn: {exc}", throttle_duration_sec=5.0)
            return
        self._publish_frame(drawn, stamp_ns)
