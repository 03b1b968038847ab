"""The live grounding node: camera images + typed prompts -> Detection2DArray at camera rate.

A lifecycle node (configure loads the model, activate starts processing, deactivate stops,
cleanup releases the model; ``autostart`` does configure+activate on start). Real time:
the image callbacks only put the newest message into a one-slot mailbox; a worker thread
processes the newest frame, so frames never queue behind a slow model (the replaced ones
are counted as skipped). Prompt changes are queued for the worker, which encodes the text
once per prompt set and acknowledges each accepted set with a LabelInfo. The topic/param
contract with the evaluator is in docs/DESIGN.md ("ROS graph contract").
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections import deque
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
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
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header, String
from vision_msgs.msg import Detection2DArray, LabelInfo

from probench.detections import Detections
from probench.errors import ProbenchError
from probench.models.base import MAX_PROMPT_CHARS, MAX_PROMPTS, check_prompts
from probench.ros import convert
from probench.ros.grounding_stats import GroundingStats
from probench.ros.node_spec import NODE_NAME, PARAMETERS, RELIABILITIES, split_prompts

_TYPES = {
    "string": ParameterType.PARAMETER_STRING,
    "double": ParameterType.PARAMETER_DOUBLE,
    "integer": ParameterType.PARAMETER_INTEGER,
    "bool": ParameterType.PARAMETER_BOOL,
    "string_array": ParameterType.PARAMETER_STRING_ARRAY,
}
_THROTTLE_S = 5.0
_MAX_PROMPT_MSG = MAX_PROMPTS * (MAX_PROMPT_CHARS + 1)


class GroundingNode(LifecycleNode):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        for spec in PARAMETERS:  # declared once, here; config/grounding.yaml holds the same defaults
            desc = ParameterDescriptor(
                name=spec.name, type=_TYPES[spec.type],
                description=f"{spec.description} [applies: {spec.applies}]",
                read_only=spec.applies == "startup",
            )
            if spec.name == "score_threshold":
                desc.floating_point_range = [FloatingPointRange(from_value=0.0, to_value=1.0)]
            elif spec.name == "max_detections":
                desc.integer_range = [IntegerRange(from_value=1, to_value=10000)]
            default = spec.default
            if spec.type == "string_array" and not default:
                # An empty list would be typed as a byte array (and YAML `[]` arrives unset):
                # declare the type only; "unset" means "no prompts yet".
                default = Parameter.Type.STRING_ARRAY
            self.declare_parameter(spec.name, default, desc)

        self.stats = GroundingStats()
        self._cond = threading.Condition()
        self._mailbox: tuple[str, Any, float] | None = None  # (kind, msg, arrival time)
        self._prompt_queue: deque[tuple[tuple[str, ...], Any]] = deque()  # (prompts, acceptance stamp)
        self._latest_prompts: tuple[str, ...] = ()  # last accepted (worker may not have applied it yet)
        self._active_prompts: tuple[str, ...] = ()  # what the worker processes frames with
        self._active = False
        self._busy = False
        self._stop = False
        self._worker: threading.Thread | None = None
        self._detector: Any = None
        self._entities: list[Any] = []  # created at configure, destroyed at cleanup
        self._syncing_param = False
        self.finalized = threading.Event()
        self.last_error = ""
        self._errors_reported = 0

        try:
            initial = self.get_parameter("prompts").value or []
        except ParameterUninitializedException:
            initial = []
        if initial:
            try:
                self._latest_prompts = check_prompts(list(initial))
            except ProbenchError as exc:
                self.get_logger().error(f"ignoring the prompts parameter: {exc}")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        reliable10 = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(String, "prompt", self._on_prompt_raw, reliable10, raw=True)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_timer = self.create_timer(self._param("diagnostics_period"), self._publish_diagnostics)

    # -- parameters ---------------------------------------------------------------------
    def _param(self, name: str) -> Any:
        return self.get_parameter(name).value

    @property
    def autostart(self) -> bool:
        return bool(self._param("autostart"))

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        for p in params:
            v = p.value
            try:
                if p.name == "prompts":
                    prompts = check_prompts(list(v or []))
                    if not self._syncing_param:
                        self._accept_prompts(prompts, "parameter")
                elif p.name == "image_reliability" and v not in RELIABILITIES:
                    raise ValueError(f"image_reliability must be one of {RELIABILITIES}, got {v!r}")
                elif p.name == "diagnostics_period" and not (v > 0):
                    raise ValueError(f"diagnostics_period must be > 0 s, got {v}")
                elif p.name in ("model", "device", "precision") and not str(v).strip():
                    raise ValueError(f"{p.name} must not be empty")
            except (ProbenchError, ValueError) as exc:
                if p.name == "prompts":
                    self.stats.count("prompts_rejected")
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    # -- prompts ------------------------------------------------------------------------
    def _on_prompt_raw(self, data: bytes) -> None:
        """Raw subscription: rclpy would silently turn invalid UTF-8 into U+FFFD prompts;
        a malformed message must be a logged rejection instead."""
        try:
            text = convert.prompt_text(data)
        except ProbenchError as exc:
            self._reject_prompt(str(exc))
            return
        if len(text) > _MAX_PROMPT_MSG:
            self._reject_prompt(f"message is {len(text)} characters long (limit {_MAX_PROMPT_MSG})")
            return
        pieces = split_prompts(text)
        if not pieces:
            self._reject_prompt(f"empty or whitespace-only prompt message ({text[:20]!r})")
            return
        try:
            prompts = check_prompts(pieces)
        except ProbenchError as exc:
            self._reject_prompt(f"{exc} (message {text[:60]!r})")
            return
        self._accept_prompts(prompts, "topic")
        self._syncing_param = True  # keep `ros2 param get prompts` truthful without a second ack
        try:
            self.set_parameters([Parameter("prompts", Parameter.Type.STRING_ARRAY, list(prompts))])
        finally:
            self._syncing_param = False

    def _reject_prompt(self, why: str) -> None:
        self.stats.count("prompts_rejected")
        self.get_logger().warning(f"prompt rejected, previous prompts stay active: {why}")

    def _accept_prompts(self, prompts: tuple[str, ...], source: str) -> None:
        stamp = self.get_clock().now().to_msg()
        with self._cond:
            if prompts != self._latest_prompts and self._mailbox is not None:
                self._mailbox = None  # contract: a prompt change drops the pending frame
                self.stats.count("skipped")
            self._latest_prompts = prompts
            self._prompt_queue.append((prompts, stamp))
            self._cond.notify_all()
        self.get_logger().info(f"prompts from {source}: {' ; '.join(prompts)}")

    # -- images -------------------------------------------------------------------------
    # Raw subscriptions: the callback keeps the serialized bytes (no rclpy conversion, which
    # would copy the pixels); the worker parses them into a zero-copy view (convert.*_from_cdr).
    def _on_image(self, data: bytes) -> None:
        self._store("raw", data)

    def _on_compressed(self, data: bytes) -> None:
        self._store("compressed", data)

    def _store(self, kind: str, msg: Any) -> None:
        t = time.perf_counter()
        with self._cond:
            self.stats.count("received")
            if not self._active:
                return
            if self._mailbox is not None:
                self.stats.count("skipped")
            self._mailbox = (kind, msg, t)  # one slot: only the newest frame waits
            self._cond.notify_all()

    def _on_incompatible_qos(self, topic: str, side: str) -> Any:
        def cb(info: Any) -> None:
            try:
                policy = QoSPolicyKind(info.last_policy_kind).name
            except ValueError:
                policy = str(info.last_policy_kind)
            other = "publisher" if side == "sub" else "subscriber"
            self.get_logger().warning(
                f"a {other} on '{topic}' has incompatible QoS (policy {policy}); no messages flow "
                f"between them (image_reliability={self._param('image_reliability')})"
            )
        return cb

    # -- worker -------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._stop and not (
                    self._active and (self._prompt_queue or self._mailbox is not None)
                ):
                    self._cond.wait(timeout=0.5)
                if self._stop:
                    return
                job: tuple[str, Any] = (
                    ("prompts", self._prompt_queue.popleft()) if self._prompt_queue
                    else ("frame", self._mailbox)
                )
                if job[0] == "frame":
                    self._mailbox = None
                self._busy = True
            try:
                if job[0] == "prompts":
                    self._apply_prompts(*job[1])
                else:
                    self._process(*job[1])
            except Exception as exc:  # noqa: BLE001 - the worker must outlive any one bad frame
                self.stats.count("errors")
                self.get_logger().error(f"frame failed: {type(exc).__name__}: {exc}",
                                        throttle_duration_sec=_THROTTLE_S)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _apply_prompts(self, prompts: tuple[str, ...], stamp: Any) -> None:
        try:
            self._detector.set_prompts(prompts)  # text side encoded once per prompt set
        except ProbenchError as exc:
            self.stats.count("prompts_rejected")
            self.get_logger().error(f"model refused prompts, previous stay active: {exc}")
            with self._cond:
                self._latest_prompts = self._active_prompts
            return
        self._active_prompts = prompts
        header = Header(stamp=stamp, frame_id="")
        self._pub_labels.publish(
            convert.prompts_to_label_info(prompts, header, float(self._param("score_threshold")))
        )

    def _process(self, kind: str, data: bytes, t_arrival: float) -> None:
        prompts = self._active_prompts  # snapshot: the set this frame is answered with
        try:
            if kind == "raw":
                msg = convert.image_from_cdr(data)
                rgb = convert.image_to_rgb(msg)
            else:
                msg = convert.compressed_from_cdr(data)
                rgb = convert.compressed_to_rgb(msg)
        except ProbenchError as exc:
            self.stats.count("errors")
            self.get_logger().warning(f"image dropped: {exc}", throttle_duration_sec=_THROTTLE_S)
            return
        if prompts:
            if not rgb.flags.writeable:  # a view of the immutable wire bytes: models may write
                rgb = rgb.copy()
            dets = self._detector.detect(rgb)
        else:
            dets = Detections.empty()
            self.get_logger().warning("no prompts yet: publish one on 'prompt' (or set the prompts "
                                      "parameter)", throttle_duration_sec=_THROTTLE_S)
        # serialized directly: same bytes a Detection2DArray would give, a fraction of the cost
        out = convert.detections_to_cdr(dets, msg.header, prompts,
                                        max_detections=int(self._param("max_detections")))
        self._pub_dets.publish(out)
        self.stats.record_frame((time.perf_counter() - t_arrival) * 1000.0)
        if self._pub_debug.get_subscription_count() > 0:  # drawing costs: only for a viewer
            from probench.viz import draw_detections

            kept = dets.filter(convert_order(dets, int(self._param("max_detections"))))
            drawn = draw_detections(rgb, kept, prompts)
            self._pub_debug.publish(convert.rgb_to_image_msg(drawn, msg.header))

    # -- lifecycle ----------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        from probench.models import load_detector

        name, device = self._param("model"), self._param("device")
        try:
            self._detector = load_detector(
                name, device=device, precision=self._param("precision"),
                score_threshold=float(self._param("score_threshold")),
                weights=self._param("weights") or None,
            )
        except ProbenchError as exc:
            return self._fail(f"cannot load model {name!r}: {exc}")
        except Exception as exc:  # noqa: BLE001 - e.g. a torch/CUDA error; reported, node stays up
            return self._fail(f"cannot load model {name!r}: {type(exc).__name__}: {exc}")
        self._create_entities()
        with self._cond:
            self._stop = False
            if self._latest_prompts:  # acknowledged (LabelInfo) once active
                self._prompt_queue.append((self._latest_prompts, self.get_clock().now().to_msg()))
        self._worker = threading.Thread(target=self._work, name="grounding-worker", daemon=True)
        self._worker.start()
        self.get_logger().info(f"configured: model {name} on {device}")
        return super().on_configure(state)

    def _fail(self, why: str) -> TransitionCallbackReturn:
        self.last_error = why
        self.get_logger().error(why)
        self._release()
        return TransitionCallbackReturn.FAILURE

    def _create_entities(self) -> None:
        rel = (ReliabilityPolicy.RELIABLE if self._param("image_reliability") == "reliable"
               else ReliabilityPolicy.BEST_EFFORT)
        image_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5, reliability=rel,
                               durability=DurabilityPolicy.VOLATILE)
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
        subs = [
            self.create_subscription(Image, "image", self._on_image, image_qos, raw=True,
                                     event_callbacks=sub_events("image")),
            self.create_subscription(CompressedImage, "image/compressed", self._on_compressed,
                                     image_qos, raw=True, event_callbacks=sub_events("image/compressed")),
        ]
        self._entities = [self._pub_dets, self._pub_debug, self._pub_labels, *subs]
        self.destroy_timer(self._diag_timer)
        self._diag_timer = self.create_timer(self._param("diagnostics_period"), self._publish_diagnostics)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        ret = super().on_activate(state)  # enables the lifecycle publishers
        with self._cond:
            self._active = True
            self._cond.notify_all()
        self.get_logger().info("active")
        return ret

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._halt()
        return super().on_deactivate(state)

    def _halt(self) -> None:
        """Stop taking frames and wait for the one in flight: none is published afterwards."""
        with self._cond:
            self._active = False
            if self._mailbox is not None:
                self._mailbox = None
                self.stats.count("skipped")
            deadline = time.monotonic() + 30.0
            while self._busy and time.monotonic() < deadline:
                self._cond.wait(timeout=0.1)

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

    def _release(self) -> None:
        """Stop the worker, destroy configure-time entities and free the model."""
        self._halt()
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._worker is not None:
            self._worker.join(timeout=30.0)
            self._worker = None
        for ent in self._entities:
            if hasattr(ent, "on_activate"):  # lifecycle publishers
                self.destroy_lifecycle_publisher(ent)
            else:
                self.destroy_subscription(ent)
        self._entities = []
        with self._cond:
            self._prompt_queue.clear()
            self._active_prompts = ()
        if self._detector is not None:
            self._detector = None
            gc.collect()
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available():
                torch.cuda.empty_cache()

    # -- diagnostics --------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        snap = self.stats.snapshot(stale_after_s=max(2.0, 2 * self._param("diagnostics_period")))
        state = self._state_machine.current_state[1]
        values: dict[str, Any] = {
            "state": state, "model": self._param("model"), "device": self._param("device"),
            "precision": self._param("precision"), "prompts": " ; ".join(self._active_prompts),
            "n_prompts": len(self._active_prompts), **snap,
        }
        calls = getattr(self._detector, "text_encoder_calls", None)
        if calls is not None:
            values["text_encoder_calls"] = calls
        new_errors = snap["errors"] - self._errors_reported
        self._errors_reported = snap["errors"]
        if state != "active":
            level, message = "WARN", f"{state}: not processing"
        elif not self._active_prompts:
            level, message = "WARN", "active, no prompts"
        elif new_errors:
            level, message = "WARN", f"{new_errors} frame errors since last report"
        else:
            level, message = "OK", f"{snap['rate_hz']:.1f} Hz"
        self._diag_pub.publish(convert.stats_to_diagnostics(
            f"{self.get_name()}: grounding", str(self._param("device")), level, message, values,
            self.get_clock().now().to_msg(),
        ))


def convert_order(dets: Detections, max_detections: int) -> Any:
    """Indices of the ``max_detections`` highest-scoring detections (what gets published)."""
    import numpy as np

    return np.argsort(-dets.scores, kind="stable")[:max_detections]


def main(argv: list[str] | None = None) -> int:
    """``grounding_node [--ros-args ...]``: run until Ctrl-C or a shutdown transition."""
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    rclpy.init(args=argv)
    rc = 0
    node = None
    executor = SingleThreadedExecutor()
    try:
        node = GroundingNode()
        executor.add_node(node)
        if node.autostart:
            if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                print(f"grounding_node: {node.last_error or 'configure failed'}", file=sys.stderr)
                rc = 1
            elif node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                print("grounding_node: activate failed", file=sys.stderr)
                rc = 1
        while rc == 0 and rclpy.ok() and not node.finalized.is_set():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ProbenchError as exc:
        print(f"grounding_node: {exc}", file=sys.stderr)
        rc = exc.exit_code
    except ParameterException as exc:  # e.g. `-p max_detections:=abc` at startup
        print(f"grounding_node: bad parameter: {exc}", file=sys.stderr)
        rc = 2
    finally:
        if node is not None:
            node._release()
            executor.remove_node(node)
            node.destroy_node()
        executor.shutdown(timeout_sec=1.0)
        rclpy.try_shutdown()
    return rc


if __name__ == "__main__":
    sys.exit(main())
