"""``evaluator_node``: replays a probench bag through the grounding node and scores it.

The node is the DDS side of the replay (an :class:`probench.realtime.eval_run.EvaluatorLink`):
it publishes each frame's prompt set as a ``vision_msgs/LabelInfo`` on ``frame_prompts``
whose header.stamp is the frame's stamp, then the frame on ``image`` (or
``image/compressed``), and hands the bytes of every Detection2DArray arriving on
``detections`` and of every failed frame's report on ``frame_errors`` to the run's
collector, through the :class:`~probench.realtime.eval_stream.AnswerInbox` (the reader the
fake link uses too). The run itself (plan, stream, collect, finish) is
:func:`probench.realtime.eval_run.run_evaluation`; docs/EVALUATION.md describes the design.
When the run is scored the node exits, so the launch (or ``probench eval``) shuts down.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Header, String
from vision_msgs.msg import Detection2DArray, LabelInfo

if TYPE_CHECKING:
    from rcl_interfaces.msg import ParameterValue
    from rclpy.client import Client
    from rclpy.executors import Executor
    from rclpy.publisher import Publisher
    from sensor_msgs.msg import CompressedImage, Image

from probench.errors import ProbenchError
from probench.realtime.errors import ParameterValueError
from probench.realtime.eval_run import write_result
from probench.realtime.eval_stream import Answer, AnswerInbox, Interrupted
from probench.realtime.node_spec import EVALUATOR_NAME, EVALUATOR_PARAMS, GROUNDING_PARAMS, EvaluatorConfig
from probench.ros import convert
from probench.ros.errors import RosError

NODE_NAME = EVALUATOR_NAME
# A prompt set that binds to no frame (stamp 1 ns): sent once, acknowledged, before the
# stream, so that the first frame's set does not travel while discovery is still settling.
_HANDSHAKE = ("probench evaluator: link check",)
_IN_USE_MARGIN_S = 0.5  # beyond the node's in_use_s for stamped sets


class EvaluatorNode(Node):  # type: ignore[misc]  # rclpy is not followed by mypy: Any
    def __init__(self, stop_requested: Callable[[], bool] = lambda: False) -> None:
        super().__init__(NODE_NAME)
        self._stop_requested = stop_requested  # the process got SIGINT/SIGTERM
        for spec in EVALUATOR_PARAMS:  # declared once, here; config/eval.yaml sets values
            self.declare_parameter(spec.name, *convert.param_declaration(spec))
        self.cfg = self._read_parameters()
        reliable = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                              reliability=ReliabilityPolicy.RELIABLE)
        self.inbox = AnswerInbox(self.warning)
        self.frame_prompts_pub = self.create_publisher(LabelInfo, "frame_prompts", reliable)
        subscribe_answers(self, self.inbox, reliable)
        # a sequence bag (realtime/eval_sequence.py): operator prompts and their acknowledgements
        self.prompt_pub = self.create_publisher(String, "prompt", QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE))
        latched = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(LabelInfo, "label_info", self._on_label_info, latched)
        self._ack_handler: Callable[[tuple[str, ...], int], object] | None = None
        self._last_announce = float("-inf")  # monotonic time of the last stamped set
        self.image_pub: Publisher | None = None  # wait_ready: of the bag's image type
        self.image_type: type[Image] | type[CompressedImage] | None = None

    def _read_parameters(self) -> EvaluatorConfig:
        values = {name: self.get_parameter(name).value for name in EVALUATOR_PARAMS.names()}
        try:
            return EVALUATOR_PARAMS.to_config(EvaluatorConfig, values)
        except (ProbenchError, ValueError) as exc:
            raise ParameterValueError(f"{NODE_NAME}: {exc}") from None

    # -- the link (probench.realtime.eval_stream.Link) -------------------------------------------
    def announce(self, stamp_ns: int, texts: Sequence[str]) -> None:
        self._last_announce = time.monotonic()
        header = Header()
        convert.set_stamp(header.stamp, stamp_ns)
        self.frame_prompts_pub.publish(convert.prompts_to_label_info(list(texts), header))

    def send(self, image: Image | CompressedImage, stamp_ns: int) -> None:
        if self.image_pub is None:
            raise RosError("no image publisher: wait_ready comes first")
        convert.set_stamp(image.header.stamp, stamp_ns)
        self.image_pub.publish(image)

    def ok(self) -> bool:
        """False once the process was asked to stop (or ROS shut down): every wait and the
        stream end at their next turn with :class:`Interrupted`."""
        return rclpy.ok() and not self._stop_requested()

    def set_answer_handler(self, handler: Callable[[Answer], object]) -> None:
        self.inbox.handler = handler

    # -- operator prompts (probench.realtime.eval_sequence.OperatorLink) -------------------------
    def set_prompts(self, texts: Sequence[str]) -> None:
        """An operator prompt on the grounding node's ``prompt`` topic (``;``-separated)."""
        self.prompt_pub.publish(String(data=";".join(texts)))

    def set_ack_handler(self, handler: Callable[[tuple[str, ...], int], object]) -> None:
        self._ack_handler = handler

    def ready_for_operator_prompts(self, timeout: float) -> None:
        """Until the node's stamped prompt sets (this link's handshake, a warm-up) are no longer
        in use: until then it holds each frame up to ``frame_prompts_wait`` for one."""
        from probench.realtime.grounding_worker import StampedPromptSets

        left = self._last_announce + StampedPromptSets().in_use_s + _IN_USE_MARGIN_S - time.monotonic()
        if left > 0:
            self.info(f"waiting {left:.1f} s until the grounding node no longer waits for stamped sets")
            deadline = time.monotonic() + left
            self._wait(lambda: time.monotonic() >= deadline, left + 1.0)  # Interrupted on shutdown

    def _on_label_info(self, msg: LabelInfo) -> None:  # executor thread
        received_ns = time.monotonic_ns()
        handler = self._ack_handler
        if handler is not None:
            handler(tuple(convert.label_info_to_prompts(msg)), received_ns)

    def image_from_bag(self, raw: bytes) -> Image | CompressedImage:
        from rclpy.serialization import deserialize_message

        return deserialize_message(raw, self.image_type)

    def info(self, text: str) -> None:
        self.get_logger().info(text)

    def warning(self, text: str) -> None:
        self.get_logger().warning(text)

    # -- set-up ------------------------------------------------------------------------------
    def _wait(self, ready: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not ready():
            if not self.ok():
                raise Interrupted("shutdown requested")
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def wait_ready(self, compressed: bool, timeout: float) -> None:
        """Publish images of the bag's kind; return once the grounding node subscribes to
        them and to frame_prompts, and has acknowledged one (handshake) prompt set."""
        from sensor_msgs.msg import CompressedImage, Image

        image_pub = self.image_pub
        if image_pub is None:
            qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            self.image_type, topic = (CompressedImage, "image/compressed") if compressed else (Image, "image")
            image_pub = self.image_pub = self.create_publisher(self.image_type, topic, qos)
        hint = "(is the grounding node running, with the same ROS_DOMAIN_ID?)"
        if not self._wait(lambda: self.frame_prompts_pub.get_subscription_count() > 0, timeout):
            raise RosError(f"nobody subscribes to frame_prompts within {timeout:.0f} s {hint}; a "
                           "grounding node older than the per-frame prompt sets does not")
        if not self._wait(lambda: image_pub.get_subscription_count() > 0, timeout):
            raise RosError(f"nobody subscribes to {image_pub.topic_name} within {timeout:.0f} s {hint}")
        self.announce(1, _HANDSHAKE)
        if not self.frame_prompts_pub.wait_for_all_acked(Duration(seconds=timeout)):
            raise RosError(f"the grounding node did not acknowledge a frame_prompts message within "
                           f"{timeout:.0f} s {hint}")

    def grounding_parameters(self, timeout: float) -> dict[str, Any]:
        """The grounding node's model settings, for run.json (and its operator prompts, when
        set). Its parameter service answers only once the node spins, i.e. after its model
        loaded: hence the long timeout."""
        from rcl_interfaces.srv import GetParameters

        name = self.cfg.grounding_node.rstrip("/")
        deadline = time.monotonic() + timeout
        client: Client = self.create_client(GetParameters, f"{name}/get_parameters")
        try:
            while not client.wait_for_service(timeout_sec=0.5):
                if not self.ok():
                    raise Interrupted("shutdown requested")
                if time.monotonic() > deadline:
                    raise RosError(f"no grounding node {name!r} within {timeout:.0f} s (is it running, "
                                   "with the same ROS_DOMAIN_ID and ROS_AUTOMATIC_DISCOVERY_RANGE?)")

            def get(names: Sequence[str]) -> dict[str, Any]:
                req = GetParameters.Request()
                req.names = list(names)
                future = client.call_async(req)
                done = threading.Event()
                future.add_done_callback(lambda _f: done.set())
                while not done.wait(0.2):
                    if not self.ok():
                        raise Interrupted("shutdown requested")
                    if time.monotonic() > deadline:
                        raise RosError(f"grounding node {name!r} did not answer a parameter request within "
                                       f"{timeout:.0f} s (still loading its model? raise startup_timeout)")
                result = future.result()
                if result is None:
                    raise RosError(f"grounding node {name!r}: parameter request failed")
                return {n: _param_value(v) for n, v in zip(names, result.values, strict=False)}

            values = get(GROUNDING_PARAMS.identity_names())
            if not values.get("model"):
                raise RosError(f"grounding node {name!r} reports no model parameter")
            # asked apart: a never-set prompts parameter makes the service answer nothing at all
            values["prompts"] = get(["prompts"]).get("prompts") or []
            values["tracking"] = bool(get(["tracking"]).get("tracking"))  # a sequence bag's identity
            return values
        finally:
            self.destroy_client(client)


    def set_prompt_policy(self, policy: str, profile: str, timeout: float) -> None:
        """Set the grounding node's ``prompt_policy`` and ``prompt_profile`` (atomically);
        returns once it has taken them (its set-parameters callback applies a policy at once)."""
        from rcl_interfaces.srv import SetParametersAtomically

        name = self.cfg.grounding_node.rstrip("/")
        client: Client = self.create_client(SetParametersAtomically, f"{name}/set_parameters_atomically")
        try:
            if not self._wait(lambda: client.service_is_ready(), timeout):
                raise RosError(f"grounding node {name!r}: no parameter service within {timeout:.0f} s")
            req = convert.string_parameters_request({"prompt_policy": policy, "prompt_profile": profile})
            future = client.call_async(req)
            if not self._wait(future.done, timeout) or future.result() is None:
                raise RosError(f"grounding node {name!r} did not answer setting prompt_policy within "
                               f"{timeout:.0f} s")
            result = future.result().result
            if not result.successful:
                raise RosError(f"grounding node {name!r} refused prompt_policy {policy!r}: {result.reason}")
            self.info(f"grounding node prompt policy: {policy}")
        finally:
            self.destroy_client(client)


def subscribe_answers(node: Node, inbox: AnswerInbox, qos: QoSProfile) -> None:
    """The DDS link's side of the grounding node's answers: raw subscriptions to
    ``detections`` and ``frame_errors`` handing their bytes to ``inbox`` (the reader the fake
    link uses too) with the arrival time on the evaluator's one clock
    (``eval_stream.MONOTONIC``), taken on the raw bytes before any decoding (whose cost grows
    with the detections), as ros2_benchmark's monitor does. The evaluator node's; the
    contract test (test/ros/test_ros_contract.py) subscribes through it too. (The node keeps
    its subscriptions.)"""
    node.create_subscription(Detection2DArray, "detections",
                             lambda data: inbox.detections(data, time.monotonic_ns()), qos, raw=True)
    node.create_subscription(DiagnosticArray, "frame_errors",
                             lambda data: inbox.failure(data, time.monotonic_ns()), qos, raw=True)


def _param_value(v: ParameterValue) -> object:
    """A ``rcl_interfaces/ParameterValue`` as Python (None when not set); arrays as lists."""
    from rclpy.parameter import parameter_value_to_python

    value = parameter_value_to_python(v)
    return list(value) if isinstance(value, (list, tuple)) else value


def main(argv: list[str] | None = None) -> int:
    """``evaluator_node --ros-args -p bag:=... -p out:=...``: replay, score, exit.

    SIGINT/SIGTERM stop the replay at its next frame (:mod:`probench.ros.shutdown`; repeats
    are ignored while it cleans up): the run folder is left resumable with run.json's status
    ``interrupted``, and the process exits 0 (it did what it was asked; ``probench eval``
    reads the status and reports the interruption)."""
    from rclpy.exceptions import ParameterException
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from probench.ros.dds_profile import apply_profile
    from probench.ros.lifecycle_run import init_ros
    from probench.ros.shutdown import SignalShutdown

    shutdown = SignalShutdown.install()
    apply_profile()  # before the participant exists; never over the user's choice
    # The replay clock thread must get the GIL back promptly from the executor's callbacks
    # (default switch interval 5 ms, a sixth of a 30 Hz period).
    sys.setswitchinterval(0.0005)
    node = None
    executor = None
    spinner = None
    rc = 0
    result: dict[str, Any] = {"status": "failed", "error": "the node did not start"}
    try:
        init_ros(argv, signal_handler_options=SignalHandlerOptions.NO)
        executor = SingleThreadedExecutor()
        node = EvaluatorNode(stop_requested=lambda: shutdown.requested)
        executor.add_node(node)
        spinner = threading.Thread(target=_spin, args=(executor,), name="evaluator-spin", daemon=True)
        spinner.start()
        result = _evaluate(node)
    except Interrupted:  # (never ShutdownRequested: the evaluator has no interruptible step)
        # no cause, no advice: probench eval also stops it this way when the grounding node failed
        print(f"evaluator_node: stopped ({shutdown.signal_name or 'ROS shut down'}) before the run finished; "
              "its run folder stays resumable", file=sys.stderr)
        result = {"status": "interrupted", "error": shutdown.signal_name or "ROS shut down"}
    except ProbenchError as exc:
        print(f"evaluator_node: error: {exc}", file=sys.stderr)
        rc = exc.exit_code
        result = {"status": "failed", "error": str(exc)}
    except ParameterException as exc:  # e.g. `-p rate_hz:=30`: an integer for a double
        print(f"evaluator_node: error: bad parameter: {exc} (doubles need a decimal point, e.g. 30.0)",
              file=sys.stderr)
        rc = 2
        result = {"status": "failed", "error": f"bad parameter: {exc}"}
    except Exception as exc:
        result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        raise
    finally:
        # From here on every signal is ignored. Stop the spin thread before anything is
        # destroyed under it (else rclpy aborts).
        rclpy.try_shutdown()
        if spinner is not None:
            spinner.join(timeout=5.0)
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
        if node is not None:
            if node.cfg.result_file:
                write_result(node.cfg.result_file, **result)
            node.destroy_node()
        shutdown.ignore_from_now()  # the interpreter's finalization would restore the default action
    return rc


def _evaluate(node: EvaluatorNode) -> dict[str, Any]:
    """The run (or the peak-rate search) the node's parameters ask for; its result record."""
    cfg = node.cfg
    if cfg.find_max_rate:
        from probench.realtime.eval_peak import MAX_RATE_FILE, find_max_rate_run

        found = find_max_rate_run(node, cfg)
        node.get_logger().info(f"done: max rate {found.get('max_rate_hz')} Hz with at most "
                               f"{cfg.max_missed:g} of the frames missed -> {Path(cfg.out) / MAX_RATE_FILE}")
        return {"status": "complete", "max_rate": str(Path(cfg.out) / MAX_RATE_FILE)}
    from probench.cache.records import METRICS_FILE
    from probench.cache.run import RunDir
    from probench.realtime.eval_run import run_evaluation

    metrics = run_evaluation(node, cfg)
    rt = metrics.realtime
    failed = f" failed={rt.frames_failed}" if rt and rt.frames_failed else ""
    node.get_logger().info(
        f"done: map50={metrics.map50} frames sent={rt and rt.frames_sent} missed={rt and rt.frames_missed}"
        f"{failed} -> {Path(cfg.out) / METRICS_FILE}")
    info = RunDir(cfg.out).info
    status = str(info.status)
    return {"status": status if status in ("complete", "incomplete") else "failed", "error": info.error,
            "metrics": str(Path(cfg.out) / METRICS_FILE)}


def _spin(executor: Executor) -> None:
    from rclpy.executors import ExternalShutdownException
    from rclpy.impl.implementation_singleton import rclpy_implementation

    try:
        executor.spin()
    except ExternalShutdownException:
        pass
    except (rclpy_implementation.RCLError, rclpy_implementation.InvalidHandle):
        # main() shut the context down between two waits of this thread (a signal's stop):
        # the next wait set cannot be made, or one of its entities is already being
        # destroyed. Any such failure while the context is still up is raised.
        if executor.context.ok():
            raise


if __name__ == "__main__":
    sys.exit(main())
