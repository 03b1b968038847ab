"""The live grounding node: camera images + typed prompts -> Detection2DArray at camera rate.

A thin lifecycle shell (configure loads the model, activate starts processing, deactivate
stops, cleanup releases the model; ``autostart`` does configure+activate on start) over the
rclpy-free core: the image callbacks only put the newest (still serialized) message into the
worker's one-slot mailbox (:mod:`probench.realtime.grounding_worker`); the worker hands it to
:class:`probench.realtime.frame_core.FrameCore`, which answers it, and the node publishes the
answer (:mod:`probench.ros.grounding_outputs`). Operator prompt changes (``prompt`` topic,
``prompts`` parameter) are queued for the worker, which makes the text side ready and
acknowledges each accepted set with a LabelInfo. A frame may carry its own prompt set (a
LabelInfo on ``frame_prompts`` stamped with the frame's stamp). The contract with the
evaluator is in docs/DESIGN.md ("ROS graph contract") and docs/EVALUATION.md.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo
from std_msgs.msg import Int64, String
from vision_msgs.msg import LabelInfo

from probench.errors import ProbenchError
from probench.models.base import check_prompts
from probench.msgs.errors import MessageConversionError
from probench.msgs.shapes import Stamp
from probench.prompting.messages import prompts_from_message
from probench.prompting.policy import PromptPolicy, resolve_policy
from probench.realtime.errors import ParameterValueError
from probench.realtime.frame_core import FrameCore, enable_masks, free_model_memory, node_core
from probench.realtime.grounding_stats import GroundingStats, TransportLoss
from probench.realtime.grounding_trace import NodeTrace
from probench.realtime.grounding_worker import FrameWorker, ImageKind, Prompts
from probench.realtime.node_diagnostics import DIAGNOSTICS_PARAMS, NodeDiagnostics
from probench.realtime.node_spec import (
    GROUNDING_PARAMS,
    NODE_NAME,
    GroundingConfig,
    diagnostic_status_name,
    start_time_refusal,
)
from probench.realtime.params import ParamValue
from probench.ros import convert
from probench.ros.dds_profile import fast_dds_profile_hint
from probench.ros.grounding_topics import RELIABLE_10, GroundingInputs, GroundingOutputs, image_qos
from probench.spatial.target import DEFAULT_TIMEOUT_S, TargetSelector
from probench.vocabulary import escape_for_log as esc  # logs escape control characters (docs/SECURITY.md)

_THROTTLE_S = 5.0
# On SIGINT/SIGTERM: how long the frame in flight may take to finish. ros2 launch sends
# SIGTERM 5 s after SIGINT and SIGKILL 5 s later; the node ignores the SIGTERM.
_SHUTDOWN_FRAME_WAIT_S = 5.0
__all__ = ["GroundingNode", "image_qos", "main"]


class GroundingNode(LifecycleNode):  # type: ignore[misc]  # rclpy is not followed by mypy: Any
    def __init__(self, **kwargs: object) -> None:
        super().__init__(NODE_NAME, **kwargs)
        for spec in GROUNDING_PARAMS:  # declared once, here; config/grounding.yaml holds the same defaults
            self.declare_parameter(spec.name, *convert.param_declaration(spec))
        self.stats = GroundingStats()
        self.transport = TransportLoss()  # frames lost between the camera and this node
        self.health = NodeDiagnostics(self.stats, self.transport)
        self.worker: FrameWorker[bytes, Stamp] = FrameWorker(self.stats, self._process, self._apply_prompts,
                                                             self._on_worker_error)
        self.core: FrameCore | None = None  # configure .. cleanup
        self.outputs: GroundingOutputs | None = None
        self._cfg: GroundingConfig | None = None
        self.inputs: GroundingInputs | None = None
        self._trace: NodeTrace | None = None  # trace_file: the node's per-frame evidence
        self._syncing_param = False
        self._policy_rejected = 0
        self._said: dict[str, float] = {}  # warning line -> when it was last logged
        self.state_label = "unconfigured"
        self.finalized = threading.Event()
        self.last_error = ""  # why the last configure failed, "" once one works (configure_error)
        self.configure_failures = 0  # configures that failed: a caller tells its own refusal by the count
        self._good: dict[str, Any] | None = None  # the values of the last configure that worked
        self.last_frame_error = ""  # the latest frame's failure, for /diagnostics
        given = convert.checked_parameters(self, GROUNDING_PARAMS)  # startup values, as the callback checks
        self._started = dict(given)  # what configure may load (start_time_refusal): the start-up values
        self.worker.latest_prompts = given.get("prompts", ())
        # the operator's target (docs/GROUNDING_NODE.md, "Choosing the target"): it outlives configure
        self.target = TargetSelector(given.get("target_timeout", DEFAULT_TIMEOUT_S))
        try:
            self.worker.policy = self._resolve_policy()
        except ProbenchError as exc:
            raise ParameterValueError(f"parameter prompt_policy: {exc}") from exc
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_subscription(String, "prompt", self.on_prompt_raw, RELIABLE_10, raw=True)
        self.create_subscription(Int64, "target_select", self.on_target_select, RELIABLE_10)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_timer = self.create_timer(self.param("diagnostics_period"), self._publish_diagnostics)

    def param(self, name: str) -> ParamValue:  # a parameter's current value
        value: ParamValue = self.get_parameter(name).value
        return value

    # -- parameters and the prompt policy (docs/PROMPTING.md) ---------------------------------
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Validate every value first (the set is atomic), then apply live prompts and the
        prompt policy (a policy that cannot be resolved is refused; the previous stays)."""
        checked: dict[str, Any] = {}
        try:
            for p in params:
                try:
                    checked[p.name] = GROUNDING_PARAMS.check(p.name, p.value)
                except (ProbenchError, ValueError):
                    if p.name == "prompts":
                        self.stats.count("prompts_rejected")
                    raise
            policy_values = {k: v for k, v in checked.items() if k in ("prompt_policy", "prompt_profile")}
            policy = self._resolve_policy(**policy_values) if policy_values else None
        except (ProbenchError, ValueError) as exc:
            if any(p.name in ("prompt_policy", "prompt_profile") for p in params):
                self._policy_rejected += 1
                self._warn(f"prompt policy rejected, the previous stays active: {exc}")
            return SetParametersResult(successful=False, reason=str(exc))
        if "target_timeout" in checked:
            self.target.timeout_s = checked["target_timeout"]
        if "prompts" in checked and not self._syncing_param:
            self._accept_prompts(checked["prompts"], "parameter")
        if policy is not None:
            self.worker.put_policy(policy, self.get_clock().now().to_msg())
            self.get_logger().info(f"prompt policy: {policy.describe()}")
        return SetParametersResult(successful=True)

    def _resolve_policy(self, prompt_policy: str | None = None,
                        prompt_profile: str | None = None) -> PromptPolicy:
        """The policy for the node's model (its zoo name and Table II row); one-line errors."""
        name = self.param("prompt_policy") if prompt_policy is None else prompt_policy
        profile = str(self.param("prompt_profile") if prompt_profile is None else prompt_profile).strip()
        model = str(self.param("model"))
        policy = resolve_policy(str(name), model=model, profile=profile or None)
        if policy.warning:
            self.get_logger().warning(policy.warning)
        return policy

    # -- prompts ------------------------------------------------------------------------------
    def on_prompt_raw(self, data: bytes) -> None:
        """Raw subscription: rclpy would silently turn invalid UTF-8 into U+FFFD prompts;
        a malformed message must be a logged rejection instead."""
        try:
            prompts = prompts_from_message(convert.prompt_text(data))
        except ProbenchError as exc:
            self.stats.count("prompts_rejected")
            self.get_logger().warning(f"prompt rejected, previous prompts stay active: {esc(str(exc))}")
            return
        self._accept_prompts(prompts, "topic")
        self._syncing_param = True  # keep `ros2 param get prompts` truthful without a second ack
        try:
            self.set_parameters([Parameter("prompts", Parameter.Type.STRING_ARRAY, list(prompts))])
        finally:
            self._syncing_param = False

    def on_frame_prompts(self, msg: LabelInfo) -> None:
        """A prompt set for one frame: kept until the frame with the same stamp is processed."""
        try:
            prompts = check_prompts(convert.label_info_to_prompts(msg))
        except ProbenchError as exc:
            self.stats.count("prompts_rejected")
            self.get_logger().warning(f"frame prompt set rejected, its frame gets the operator's prompts: "
                                      f"{esc(str(exc))}", throttle_duration_sec=_THROTTLE_S)
            return
        if self.core is not None:
            self.core.put_frame_prompts(convert.stamp_ns(msg.header.stamp), prompts)

    def on_target_select(self, msg: Int64) -> None:
        """A track id makes that track the target; -1 clears it."""
        try:
            self.target.select(int(msg.data))
        except ProbenchError as exc:
            return self._warn(f"target selection refused: {exc}")
        self.get_logger().info(f"target: track {msg.data}" if msg.data >= 0 else "target: cleared")

    def _accept_prompts(self, prompts: Prompts, source: str) -> None:
        self.worker.put_prompts(prompts, self.get_clock().now().to_msg())
        self.get_logger().info(f"prompts from {source}: {' ; '.join(map(esc, prompts))}")

    def _apply_prompts(self, prompts: Prompts, stamp: Stamp) -> bool:
        """Worker thread: the core makes the text side ready; acknowledged with a LabelInfo."""
        core, outputs = self.core, self.outputs
        if core is None or outputs is None:
            return False
        try:
            ready = core.make_ready(prompts, stamp, self.worker.policy)
        except ProbenchError as exc:
            self.stats.count("prompts_rejected")
            self.get_logger().error(f"model refused prompts, previous stay active: {esc(str(exc))}")
            return False
        outputs.labels.publish(ready.label_info_cdr)
        return True

    # -- frames (raw subscriptions: the bytes are decoded by the core, on the worker) ----------
    def on_frame(self, kind: ImageKind, data: bytes) -> None:
        try:
            stamp: int | None = convert.header_stamp_ns(data)
        except MessageConversionError:
            stamp = None  # not CDR: the core names it when it decodes the frame
        self.transport.arrived(kind, stamp)
        replaced = self.worker.put_frame(kind, data)
        if replaced is not None and self._trace is not None:
            self._trace.replaced(replaced)

    def _process(self, kind: ImageKind, data: bytes, t_arrival: float, prompts: Prompts) -> None:
        """Worker thread: one frame, answered by the core, published."""
        core, outputs, cfg, trace = self.core, self.outputs, self._cfg, self._trace
        if core is None or outputs is None or cfg is None:  # the worker runs from configure to cleanup
            return
        if trace is not None:
            trace.begin()
        # the detections are published the moment they are encoded, before 3D, masks and drawing
        policy, wanted = self.worker.policy, outputs.wanted()
        answer = core.answer(data, compressed=kind == "compressed", prompts=prompts, policy=policy,
                             wanted=wanted, on_2d=outputs.publish_detections)
        for line in [*answer.problems, answer.error]:
            self._warn(line)
        if answer.error:
            self.stats.count("errors")
            self.last_frame_error = answer.error
            return
        if answer.failed:  # the model call raised: reported on frame_errors, counted, logged
            outputs.publish_failure(answer)
            self.stats.count("errors")
            self._frame_failed(answer.failed)
        if answer.answered:
            outputs.publish_rest(answer)
            self.stats.record_frame((answer.published_at - t_arrival) * 1000.0, stages_ms=answer.stages_ms)
        if trace is not None:  # the frame is done (answered or given up)
            trace.end(answer.stamp_ns, prompt_wait_ms=answer.prompt_wait_ms, bound=answer.bound)

    def on_depth(self, data: bytes) -> None:  # only the header is read: the pixels wait in the bytes
        self._warn(None if self.core is None else self.core.put_depth_cdr(data))

    def on_camera_info(self, msg: CameraInfo) -> None:
        problem = None if self.core is None else self.core.put_camera_info(list(msg.k), msg.width, msg.height)
        self._warn(f"no 3D output: {problem} (2D detections go on)" if problem else None)

    def _warn(self, line: str | None) -> None:
        """A warning, each distinct line at most once per ``_THROTTLE_S`` (rclpy's throttle
        is per call site: one site here would let one message hide another)."""
        now = time.monotonic()
        if line and now - self._said.get(line, -_THROTTLE_S) >= _THROTTLE_S:
            self._said[line] = now
            if len(self._said) > 256:  # bounded: lines may carry varying details
                self._said.pop(next(iter(self._said)))
            self.get_logger().warning(esc(line))

    def _on_worker_error(self, exc: BaseException) -> None:  # (the worker counted it)
        self._frame_failed(f"{type(exc).__name__}: {exc}")

    def _frame_failed(self, error: str) -> None:
        self.last_frame_error = f"frame failed: {error}"
        self.get_logger().error(esc(self.last_frame_error), throttle_duration_sec=_THROTTLE_S)

    # -- lifecycle ----------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        values = {spec.name: self.param(spec.name) for spec in GROUNDING_PARAMS if spec.name != "prompts"}
        try:
            ret = self._configure(values)
        except Exception as exc:  # noqa: BLE001 - any failure is the refusal's reason, the node stays up
            return self._fail(f"configure failed: {type(exc).__name__}: {exc}")
        if ret != TransitionCallbackReturn.SUCCESS:
            return ret
        self._good, self.last_error = values, ""
        return super().on_configure(state)

    def _configure(self, values: dict[str, Any]) -> TransitionCallbackReturn:
        from probench.models import load_detector
        from probench.models.head import WARMUP_PROMPTS, parse_warmup_size
        from probench.models.threads import apply_threads

        cfg = self._cfg = GROUNDING_PARAMS.to_config(GroundingConfig, values)
        refused = start_time_refusal(values, self._started)  # before anything is imported or loaded
        if refused:
            return self._fail(refused)
        try:  # first: a refused trace_file fails configure at once, before the model loads
            self._trace = NodeTrace(cfg.trace_file) if cfg.trace_file else None
        except ProbenchError as exc:
            return self._fail(str(exc))
        try:
            detector = load_detector(cfg.model, device=cfg.device, precision=cfg.precision,
                                     score_threshold=float(cfg.score_threshold), weights=cfg.weights or None,
                                     preprocess=cfg.preprocess, runtime=cfg.runtime)
        except ProbenchError as exc:
            return self._fail(f"cannot load model {cfg.model!r}: {exc}")
        except Exception as exc:  # noqa: BLE001 - e.g. a torch/CUDA error; reported, node stays up
            return self._fail(f"cannot load model {cfg.model!r}: {type(exc).__name__}: {exc}")
        apply_threads(cfg.threads, "threads")  # once per process: the model is built, it has not run
        warmup_size = parse_warmup_size(cfg.warmup_size)
        if warmup_size is not None:  # graphs captured here, outside any frame's budget
            try:
                detector.warmup(warmup_size, WARMUP_PROMPTS)
            except ProbenchError as exc:
                return self._fail(f"warm-up of {cfg.model!r} failed: {exc}")
        try:  # the model may have changed since: best reads its profile entry again
            self.worker.policy = self._resolve_policy()
        except ProbenchError as exc:
            return self._fail(f"prompt policy: {exc}")
        masks = enable_masks(detector, cfg.masks)
        if not masks:
            self.get_logger().info(f"model {cfg.model} gives no instance masks here: no segmentation topics")
        self.core = node_core(detector, cfg, target=self.target)
        self.outputs = GroundingOutputs(self, cfg, masks=masks)
        self.inputs = GroundingInputs(self, cfg, self)
        self.destroy_timer(self._diag_timer)
        self._diag_timer = self.create_timer(cfg.diagnostics_period, self._publish_diagnostics)
        if self.worker.latest_prompts:  # acknowledged (LabelInfo) once active
            self.worker.put_prompts(self.worker.latest_prompts, self.get_clock().now().to_msg())
        self.worker.start()
        self.state_label = "inactive"
        self.get_logger().info(f"configured: model {cfg.model} on {cfg.device}")
        return TransitionCallbackReturn.SUCCESS

    def _fail(self, why: str) -> TransitionCallbackReturn:
        """A refused configure: released, its configure-time parameters back to the last
        configuration that worked (the next configure brings that back), and the reason on
        /diagnostics at once (``configure_error``, ``configure_failures``) for the caller."""
        self.last_error = why
        self.configure_failures += 1
        self.get_logger().error(esc(why))
        self.release()
        self._cfg = None
        restored = self._restore_good()
        if restored:
            self.get_logger().warning(esc(f"back to the last configuration that worked: {restored}"))
        self._publish_diagnostics()
        return TransitionCallbackReturn.FAILURE

    def _restore_good(self) -> str:
        """The configure-time parameters set back to the last configure that worked; what changed."""
        if self._good is None:
            return ""
        changed = [Parameter(name, value=value) for name, value in self._good.items()
                   if GROUNDING_PARAMS[name].applies == "configure" and self.param(name) != value]
        if changed:
            self.set_parameters(changed)
        return ", ".join(f"{p.name}={p.value!r}" for p in changed)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        ret = super().on_activate(state)  # enables the lifecycle publishers first
        self.health.active_since = time.monotonic()
        self.worker.activate()
        self.state_label = "active"
        self.get_logger().info("active")
        return ret

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.worker.deactivate()  # returns once the frame in flight is published
        self.state_label = "inactive"
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        self.state_label = "finalized"
        self.finalized.set()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS  # back to unconfigured

    def release(self, destroy_entities: bool = True, frame_wait_s: float = 30.0) -> None:
        """Stop the worker (waiting up to ``frame_wait_s`` for the frame in flight), destroy
        the configure-time entities and free the model."""
        self.worker.stop(timeout=frame_wait_s)
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        if destroy_entities:
            for pub in self.outputs.all if self.outputs is not None else []:
                self.destroy_lifecycle_publisher(pub)
            for sub in self.inputs.all if self.inputs is not None else []:
                self.destroy_subscription(sub)
        self.outputs, self.inputs, self.state_label = None, None, "unconfigured"
        if self.core is not None:
            self.core = None
            free_model_memory()

    def _publish_diagnostics(self) -> None:  # (never reads `prompts`: an empty array is uninitialized)
        w, params = self.worker, {k: self.param(k) for k in DIAGNOSTICS_PARAMS}
        topics = self.inputs.image_topics if self.inputs else ("image", "image/compressed")
        level, message, values, transport = self.health.report(
            state=self.state_label, params=params, cfg=self._cfg, active=w.active_prompts, policy=w.policy,
            policy_rejected=self._policy_rejected, core=self.core, topics=topics,
            last_error=self.last_frame_error, profile_hint=fast_dds_profile_hint,
            configure_error=self.last_error, configure_failures=self.configure_failures)
        if transport:
            self.get_logger().warning(f"{transport}: {values['transport_hint']}", throttle_duration_sec=30.0)
        self._diag_pub.publish(convert.stats_to_diagnostics(
            diagnostic_status_name(self.get_fully_qualified_name()), str(self.param("device")), level,
            message, values, self.get_clock().now().to_msg()))


def main(argv: list[str] | None = None) -> int:
    """``grounding_node [--ros-args ...]``: run until SIGINT/SIGTERM or a shutdown transition
    (:func:`probench.ros.lifecycle_run.run_lifecycle_node`)."""
    from probench.ros.lifecycle_run import run_lifecycle_node

    return run_lifecycle_node(GroundingNode, "grounding_node", argv, frame_wait_s=_SHUTDOWN_FRAME_WAIT_S)


if __name__ == "__main__":
    sys.exit(main())
