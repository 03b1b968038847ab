"""``evaluator_node``: replays a probench bag through the grounding node and scores it.

In the operator's role (docs/DESIGN.md, "ROS graph contract"): for each formulation, frames
are grouped by identical prompt set (:mod:`probench.ros.eval_plan`); per group the node
publishes the prompt set on ``prompt``, waits for the grounding node's LabelInfo
acknowledgement, then streams the group's frames on ``image`` (or ``image/compressed``) with
FRESH unique stamps, either at ``rate_hz`` (camera-rate: frames the grounding node drops are
missed) or one after the other as answers come back (as-fast-as-answered: none dropped).
A frame is answered by the Detection2DArray carrying its stamp; one nobody answers within
``answer_timeout`` counts as missed, with no detections.

Everything lands in the run folder as it happens (resumable, CONTRACTS §2): one cache line
per frame (``PredictionWriter.add_image``) and one realtime record per frame
(``realtime_frames.jsonl``), ``finalize()`` per formulation; then ``realtime.json``,
``run.json`` and ``metrics.json`` (``probench.scoring.score_run``). Then the node exits, so
the launch (or ``probench eval``) shuts down.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from probench.errors import ProbenchError
from probench.ros.errors import ParameterValueError, RosError
from probench.ros.eval_plan import AttributionError, FramePlan, Group, results_for_frame
from probench.ros.node_spec import EVALUATOR_NAME, EVALUATOR_PARAMS, EvaluatorConfig

NODE_NAME = EVALUATOR_NAME
_PROMPT_RETRY_S = 5.0
_GROUNDING_PARAMS = ("model", "device", "precision", "weights", "score_threshold", "max_detections",
                     "image_reliability")


class Interrupted(ProbenchError):
    """ROS was shut down (Ctrl-C, SIGTERM) before the evaluation finished."""

    exit_code = 130


def _stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _make_node_class() -> type:
    """Defined lazily so that importing this module needs no rclpy."""
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from vision_msgs.msg import Detection2DArray, LabelInfo

    from probench.ros import convert

    class EvaluatorNode(Node):
        def __init__(self) -> None:
            super().__init__(NODE_NAME)
            for spec in EVALUATOR_PARAMS:  # declared once, here; config/eval.yaml sets values
                self.declare_parameter(spec.name, *convert.param_declaration(spec))
            self.cfg = self._read_parameters()
            self._cv = threading.Condition()
            self._pending: dict[int, tuple[FramePlan, int]] = {}  # stamp -> (frame, sent_ns)
            self._answered: set[int] = set()
            self._intervals: dict[int, float] = {}  # stamp -> ms since the group's previous send
            self._acks: list[tuple[int, tuple[str, ...]]] = []
            self.stray = 0
            self.sink: queue.Queue | None = None  # finished frames, for the writer thread
            reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
            latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.prompt_pub = self.create_publisher(String, "prompt", QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE))
            self.create_subscription(Detection2DArray, "detections", self._on_detections, reliable)
            self.create_subscription(LabelInfo, "label_info", self._on_label_info, latched)
            self.image_pub = None

        # -- configuration ------------------------------------------------------------
        def _read_parameters(self) -> EvaluatorConfig:
            values = {name: self.get_parameter(name).value for name in EVALUATOR_PARAMS.names()}
            try:
                return EVALUATOR_PARAMS.to_config(EvaluatorConfig, values)
            except (ProbenchError, ValueError) as exc:
                raise ParameterValueError(f"{NODE_NAME}: {exc}") from None

        def make_image_publisher(self, compressed: bool) -> None:
            from sensor_msgs.msg import CompressedImage, Image

            qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            if compressed:
                self.image_type, topic = CompressedImage, "image/compressed"
            else:
                self.image_type, topic = Image, "image"
            self.image_pub = self.create_publisher(self.image_type, topic, qos)

        # -- callbacks (executor thread) -------------------------------------------------
        def _on_label_info(self, msg: Any) -> None:
            with self._cv:
                self._acks.append((_stamp_ns(msg.header.stamp), tuple(convert.label_info_to_prompts(msg))))
                self._cv.notify_all()

        def _on_detections(self, msg: Any) -> None:
            recv_ns = time.time_ns()
            stamp = _stamp_ns(msg.header.stamp)
            with self._cv:
                entry = self._pending.get(stamp)
                if entry is None or stamp in self._answered:
                    self.stray += 1  # not a frame of the current group: counted, never credited
                    return
                fp, sent_ns = entry
            try:
                xyxy, scores, class_ids = convert.detection_array_to_arrays(msg)
                results = results_for_frame(fp, xyxy, scores, class_ids)
            except (AttributionError, ValueError) as exc:
                self.get_logger().warning(f"image {fp.image_id}: answer not credited: {exc}")
                with self._cv:
                    self.stray += 1
                return
            with self._cv:
                if stamp in self._answered or stamp not in self._pending:
                    self.stray += 1
                    return
                self._answered.add(stamp)
                self._emit(fp, stamp, sent_ns, recv_ns, results)
                self._cv.notify_all()

        def _emit(self, fp: FramePlan, stamp: int, sent_ns: int, recv_ns: int | None,
                  results: list[dict]) -> None:
            interval = self._intervals.get(stamp)
            record = {
                "formulation": fp.formulation, "image_id": fp.image_id, "sent_ns": sent_ns,
                "received_ns": recv_ns,
                "latency_ms": None if recv_ns is None else round((recv_ns - sent_ns) / 1e6, 4),
                "send_interval_ms": interval, "n_results": len(results),
            }
            if self.sink is None:
                raise RuntimeError("no sink: run_evaluation() sets it before streaming")
            self.sink.put((fp, record, results))

        # -- the replay (main thread) --------------------------------------------------
        def wait_for(self, predicate: Any, timeout: float) -> bool:
            deadline = time.monotonic() + timeout
            with self._cv:
                while not predicate():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    if not rclpy.ok():
                        raise Interrupted("ROS shut down")
                    self._cv.wait(timeout=min(left, 0.2))
            return True

        def hand_over(self, group: Group, timeout: float) -> None:
            """Publish the group's prompt set and wait for its LabelInfo acknowledgement."""
            deadline = time.monotonic() + timeout
            if not self.wait_for(lambda: self.prompt_pub.get_subscription_count() > 0, timeout):
                raise RosError(f"nobody subscribes to the prompt topic within {timeout:.0f} s "
                               "(is the grounding node running, with the same ROS_DOMAIN_ID?)")
            t_pub = time.time_ns()
            msg = String()
            msg.data = group.prompt_message
            ok = False
            while not ok and time.monotonic() < deadline:
                # Repeating the same set is harmless (the node re-acknowledges it and drops
                # nothing), so a message lost before discovery settled cannot stall the run.
                self.prompt_pub.publish(msg)
                ok = self.wait_for(
                    lambda: any(s >= t_pub and texts == group.texts for s, texts in self._acks),
                    min(_PROMPT_RETRY_S, max(0.0, deadline - time.monotonic())))
            if not ok:
                raise RosError(
                    f"the grounding node did not acknowledge the prompt set {group.prompt_message[:80]!r} "
                    f"within {timeout:.0f} s (is it running, with the same ROS_DOMAIN_ID?)")
            with self._cv:
                self._acks.clear()

        def stream(self, group: Group, messages: Iterator[Any]) -> None:
            """Send the group's frames (``messages``: their image messages, in order, made
            lazily: the next is prepared right after a send, while the clock waits)."""
            period = 1.0 / self.cfg.rate_hz
            timeout = self.cfg.answer_timeout
            fast = self.cfg.mode == "as-fast-as-answered"
            with self._cv:
                self._pending.clear()
                self._answered.clear()
                self._intervals = {}
            last_stamp = 0
            t0 = time.perf_counter()
            stamps: list[int] = []
            upcoming = iter(messages)
            msg = next(upcoming)
            for i, fp in enumerate(group.frames):
                if not fast:
                    delay = t0 + i * period - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                stamp = max(time.time_ns(), last_stamp + 1)  # fresh and unique
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
                with self._cv:
                    self._pending[stamp] = (fp, stamp)
                    if last_stamp:
                        self._intervals[stamp] = round((stamp - last_stamp) / 1e6, 4)
                self.image_pub.publish(msg)
                last_stamp = stamp
                stamps.append(stamp)
                msg = next(upcoming, None) if i + 1 < len(group.frames) else None
                if fast:
                    self.wait_for(lambda s=stamp: s in self._answered, timeout)
                elif not rclpy.ok():
                    raise Interrupted("ROS shut down")
            if not fast:
                # The node answers in arrival order and keeps only the newest waiting frame, so
                # once the last frame is answered no earlier one can still come: no need to sit
                # out answer_timeout for frames it skipped.
                self.wait_for(lambda: stamps[-1] in self._answered, timeout)
            with self._cv:  # whatever is still unanswered is missed; later answers are strays
                for s in stamps:
                    if s not in self._answered:
                        fp, sent = self._pending[s]
                        self._emit(fp, s, sent, None, [])
                self._pending.clear()

        def query_grounding_parameters(self, timeout: float) -> dict[str, Any]:
            """The grounding node's model settings, for run.json. Its parameter service answers
            only once the node spins, i.e. after its model loaded: hence the long timeout."""
            from rcl_interfaces.srv import GetParameters

            name = self.cfg.grounding_node.rstrip("/")
            deadline = time.monotonic() + timeout
            client = self.create_client(GetParameters, f"{name}/get_parameters")
            try:
                while not client.wait_for_service(timeout_sec=0.5):
                    if not rclpy.ok():
                        raise Interrupted("ROS shut down")
                    if time.monotonic() > deadline:
                        raise RosError(f"no grounding node {name!r} within {timeout:.0f} s (is it running, "
                                       "with the same ROS_DOMAIN_ID and ROS_AUTOMATIC_DISCOVERY_RANGE?)")
                req = GetParameters.Request()
                req.names = list(_GROUNDING_PARAMS)
                future = client.call_async(req)
                done = threading.Event()
                future.add_done_callback(lambda _f: done.set())
                while not done.wait(0.2):
                    if not rclpy.ok():
                        raise Interrupted("ROS shut down")
                    if time.monotonic() > deadline:
                        raise RosError(f"grounding node {name!r} did not answer a parameter request within "
                                       f"{timeout:.0f} s (still loading its model? raise startup_timeout)")
                result = future.result()
                if result is None:
                    raise RosError(f"grounding node {name!r}: parameter request failed")
                return {n: _param_value(v) for n, v in zip(req.names, result.values, strict=False)}
            finally:
                self.destroy_client(client)

    return EvaluatorNode


def _param_value(v: Any) -> Any:
    # rcl_interfaces/ParameterValue: type 1 bool, 2 int, 3 double, 4 string
    return {1: v.bool_value, 2: v.integer_value, 3: v.double_value, 4: v.string_value}.get(v.type)


def main(argv: list[str] | None = None) -> int:
    """``evaluator_node --ros-args -p bag:=... -p out:=...``: replay, score, exit."""
    import rclpy
    from rclpy.exceptions import ParameterException
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    # The replay clock thread must get the GIL back promptly from the executor's callbacks
    # (default switch interval 5 ms, a sixth of a 30 Hz period).
    sys.setswitchinterval(0.0005)
    rclpy.init(args=argv)
    node = None
    executor = SingleThreadedExecutor()
    spinner = None
    rc = 0
    try:
        node = _make_node_class()()
        executor.add_node(node)
        spinner = threading.Thread(target=_spin, args=(executor,), name="evaluator-spin", daemon=True)
        spinner.start()
        from probench.ros.eval_run import run_evaluation

        metrics = run_evaluation(node)
        rt = metrics.get("realtime") or {}
        node.get_logger().info(
            f"done: map50={metrics.get('map50')} frames sent={rt.get('frames_sent')} "
            f"missed={rt.get('frames_missed')} -> {Path(node.cfg.out) / 'metrics.json'}")
    except ProbenchError as exc:
        print(f"evaluator_node: error: {exc}", file=sys.stderr)
        rc = exc.exit_code
    except (KeyboardInterrupt, ExternalShutdownException):
        print("evaluator_node: interrupted; rerun the same command to resume", file=sys.stderr)
        rc = 130
    except ParameterException as exc:  # e.g. `-p rate_hz:=30`: an integer for a double
        print(f"evaluator_node: error: bad parameter: {exc} (doubles need a decimal point, e.g. 30.0)",
              file=sys.stderr)
        rc = 2
    finally:
        # Stop the spin thread before anything is destroyed under it (else rclpy aborts).
        rclpy.try_shutdown()
        if spinner is not None:
            spinner.join(timeout=5.0)
        executor.shutdown(timeout_sec=1.0)
        if node is not None:
            node.destroy_node()
    return rc


def _spin(executor: Any) -> None:
    from rclpy.executors import ExternalShutdownException

    with contextlib.suppress(ExternalShutdownException, KeyboardInterrupt):
        executor.spin()


if __name__ == "__main__":
    sys.exit(main())
