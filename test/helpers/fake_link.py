"""The evaluator's fake link: an in-process grounding node behind the evaluator's
:class:`~probench.realtime.eval_run.EvaluatorLink` (no DDS, no rclpy), a test double of the
tests' (no command uses it), built on the node's own real-time core: the real
:class:`~probench.realtime.grounding_worker.FrameWorker` (one-slot mailbox that keeps the
newest frame, one worker), :class:`~probench.realtime.grounding_worker.StampedPromptSets`
(each frame answered with the prompt set stamped for it) and the node's frame core
(:func:`~probench.realtime.frame_core.node_core`), with the scripted ``test-instant``
detector. Frames travel as the bag's serialized image bytes and are decoded by the worker,
as in the node; the answers travel as the core's serialized messages (a Detection2DArray,
or a failed frame's report on ``frame_errors``) and are decoded by the evaluator's
:class:`~probench.realtime.eval_stream.AnswerInbox`, as the DDS link decodes them: both
links build the same :class:`~probench.realtime.eval_stream.Answer`.

Two ways to run it:
- on real time (``clock=None``): the worker thread of :meth:`FrameWorker.start`, the model
  time slept;
- on a :class:`FakeClock`: no thread; the clock drives :meth:`FrameWorker.take_job` /
  :meth:`FrameWorker.run_job` at the simulated instants, so a whole stream runs in
  milliseconds and its timing is exact (used by the fake-clock tests and the peak-rate
  search's test).

Its own trace (:attr:`FakeGroundingLink.node_trace`) is the node's evidence: for each frame
processed, when it started and ended, how long it waited for its stamped prompt set, and
the stamps replaced in the mailbox while it was in flight. Knobs make it misbehave on
purpose: slow (``model_s``), answering with a class id the frame was not asked
(``wrong_class``), answering twice (``duplicate``), answering a stamp nobody sent
(``stray_after``), holding one answer back (``late``), delivering a frame's prompt set late
(``late_prompts``), or "shutting down" after some frames (``stop_after``). ``detector``: any
detector instead of ``test-instant`` (the parity tests run tiny-owlv2 through it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any

from probench.models.base import Detector
from probench.models.testing import ScriptedDetector
from probench.msgs.wire import detections_to_cdr, restamp_cdr
from probench.realtime.eval_stream import Answer, AnswerInbox
from probench.realtime.frame_core import FrameAnswer, Wanted, enable_masks, node_core
from probench.realtime.grounding_stats import GroundingStats
from probench.realtime.grounding_worker import FrameWorker, ImageKind, Prompts, StampedPromptSets
from probench.realtime.node_spec import GROUNDING_PARAMS, GroundingConfig

__all__ = ["GROUNDING", "FakeClock", "FakeGroundingLink", "NodeFrame"]

GROUNDING = {
    "model": "test-instant",
    "device": "cpu",
    "precision": "fp32",
    "weights": "",
    "score_threshold": 0.0,
    "max_detections": 10000,
    "image_reliability": "reliable",
    "preprocess": "device",
    "prompts": [],
}


class FakeClock:
    """A :class:`~probench.realtime.eval_stream.Clock` whose time moves only when the
    evaluator sleeps or waits; each registered link's events (answers due, prompt sets
    delivered late) fire at their exact instants on the way. ``step_wall`` steps the wall
    clock alone (an NTP correction): stamps move, monotonic times do not."""

    def __init__(self, start_ns: int = 10_000_000_000, wall_ns: int = 1_700_000_000_000_000_000) -> None:
        self._now = int(start_ns)
        self._wall_offset = int(wall_ns) - int(start_ns)
        self.links: list[FakeGroundingLink] = []

    def now_ns(self) -> int:
        return self._now

    def wall_ns(self) -> int:
        return self._now + self._wall_offset

    def step_wall(self, delta_ns: int) -> None:
        self._wall_offset += int(delta_ns)

    def sleep(self, seconds: float) -> None:
        self._advance_to(self._now + max(0, round(seconds * 1e9)), stop_at_event=False)

    def wait(self, cond: threading.Condition, seconds: float) -> None:
        # a notify can only come from an event: stop at the first one
        self._advance_to(self._now + max(1, round(seconds * 1e9)), stop_at_event=True)

    def _advance_to(self, target: int, *, stop_at_event: bool) -> None:
        while True:
            due = [t for link in self.links if (t := link.next_event_ns()) is not None and t <= target]
            if not due:
                break
            self._now = max(self._now, min(due))
            for link in self.links:
                link.advance(self._now)
            if stop_at_event:
                return
        self._now = max(self._now, target)
        for link in self.links:
            link.advance(self._now)


@dataclass
class NodeFrame:
    """One frame the fake node processed (its trace: the node's own evidence)."""

    n: int  # the frame's number in send order
    stamp_ns: int
    start_ns: int
    end_ns: int
    prompt_wait_ms: float  # waiting for the frame's stamped prompt set
    bound: bool  # answered with its own stamped set
    replaced: list[int] = field(default_factory=list)  # stamps replaced in the mailbox meanwhile

    @property
    def busy_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


DETECTIONS, FAILURE = "detections", "frame_errors"  # the node's topics the evaluator takes in


@dataclass(frozen=True)
class _Message:
    """A serialized message of the node to the evaluator, and when it arrives (simulated mode)."""

    topic: str  # DETECTIONS or FAILURE
    data: bytes
    due_ns: int


@dataclass
class _InFlight:
    frame: NodeFrame
    messages: list[_Message]
    due_ns: int  # when the answers arrive (simulated mode)


_NEVER = 2**63 - 1
_ZERO_STAMP = SimpleNamespace(sec=0, nanosec=0)


class _WorkerClock:
    """The stamped-set map's clock on a :class:`FakeClock`: the evaluator's time, except while
    the fake node answers a frame, when the frame's own time runs on alone. Waiting for a
    stamped set then delivers the link's held sets due within the wait (the fake transport)
    without moving the evaluator's clock, so the evaluator keeps sending on time meanwhile,
    as it would while a real node waits."""

    def __init__(self, link: FakeGroundingLink) -> None:
        self.link = link
        self.local_ns: int | None = None

    def now_ns(self) -> int:
        if self.local_ns is not None:
            return self.local_ns
        return self.link.clock.now_ns() if self.link.clock is not None else time.monotonic_ns()

    def monotonic(self) -> float:
        return self.now_ns() / 1e9

    def wait(self, cond: threading.Condition, seconds: float) -> None:
        if self.local_ns is None:  # not inside a frame: no simulated wait to run
            return
        target = self.local_ns + max(1, round(seconds * 1e9))
        due = [d for d, _, _ in self.link.held_sets() if d <= target]
        self.local_ns = min(due) if due else target
        self.link.advance_sets(self.local_ns)  # delivered sets notify ``cond`` (an RLock: re-entrant)


class FakeGroundingLink:
    def __init__(
        self,
        *,
        model_s: float = 0.0,
        wrong_class: Sequence[int] = (),
        duplicate: Sequence[int] = (),
        stray_after: Sequence[int] = (),
        late: dict[int, float] | None = None,
        late_prompts: dict[int, float] | None = None,
        stop_after: int | None = None,
        frame_prompts_wait: float = 0.5,
        clock: FakeClock | None = None,
        detector: Detector | None = None,
        grounding: dict[str, Any] | None = None,
        ack_s: float = 0.0,
    ) -> None:
        self.model_s = model_s
        self.wrong_class, self.duplicate = set(wrong_class), set(duplicate)
        self.stray_after = set(stray_after)
        self.late = dict(late or {})  # frame number (0-based, in send order) -> extra seconds
        self.late_prompts = dict(late_prompts or {})  # frame number -> seconds its set is held back
        self.stop_after = stop_after
        self.frame_prompts_wait = frame_prompts_wait
        self.clock = clock
        self.detector = detector if detector is not None else ScriptedDetector("test-instant")
        self.worker_clock = _WorkerClock(self)
        self.sets = StampedPromptSets(clock=self.worker_clock if clock is not None else None)
        # the node's own core: every frame is answered exactly as the grounding node answers it
        # the node's parameters (``grounding``: overrides, e.g. tracking, depth_topic) and its own core
        self.parameters = {**GROUNDING, "frame_prompts_wait": frame_prompts_wait, **(grounding or {})}
        cfg = GROUNDING_PARAMS.to_config(GroundingConfig, {
            **GROUNDING_PARAMS.defaults(), **{k: v for k, v in self.parameters.items() if k != "prompts"}})
        enable_masks(self.detector, cfg.masks)
        self.core = node_core(self.detector, cfg, frame_sets=self.sets)
        self.stats = GroundingStats()
        self.worker = FrameWorker(self.stats, self._handle_frame, self._apply_prompts, self._on_error)
        self.acks: list[bytes] = []  # the acknowledgements (LabelInfo) of operator prompt sets
        self.ack_s = ack_s  # an acknowledgement reaches the evaluator this long after the set is ready
        self._ack: Callable[[tuple[str, ...], int], object] | None = None
        self.prompts_sent: list[tuple[int, tuple[str, ...]]] = []  # operator prompts: (time, texts)
        self.ready_calls = 0
        self._last_announce_ns: int | None = None
        self.wanted = Wanted()  # the optional outputs a subscriber would want (masks, debug image)
        self.answers: list[FrameAnswer] = []  # the core's answers, in order (its encoded messages)
        self.compressed = False
        self._lock = threading.RLock()
        self.inbox = AnswerInbox(self.warning)  # the evaluator's side: decodes the bytes, as the DDS link
        self.sent: list[int] = []  # stamps, in send order
        self.announced = 0
        self.node_trace: list[NodeFrame] = []
        self.errors: list[BaseException] = []
        self.logs: list[str] = []
        self._in_flight: _InFlight | None = None
        self._free_ns = 0  # simulated mode: when the worker is free again
        self._held_sets: list[tuple[int, int, Prompts]] = []  # simulated: (due, stamp, set)
        self._started = False
        self.policies: list[str] = []  # every policy set, in order
        if clock is not None:
            clock.links.append(self)

    @property
    def skipped(self) -> int:
        return self.stats.skipped

    @property
    def processed(self) -> list[int]:
        return [f.stamp_ns for f in self.node_trace]

    def node_records(self) -> list[dict[str, Any]]:
        """The node's trace as records (:func:`probench.realtime.eval_realtime.explain_misses`)."""
        with self._lock:
            return [asdict(f) for f in self.node_trace]

    # -- EvaluatorLink ----------------------------------------------------------------------
    def grounding_parameters(self, timeout: float) -> dict[str, Any]:
        info = getattr(self.detector, "model_info", None) or {}
        return {**self.parameters, "model": info.get("name", self.parameters["model"])}

    def wait_ready(self, compressed: bool, timeout: float) -> None:
        self.compressed = compressed
        if not self._started:
            self._started = True
            self.worker.activate()
            if self.clock is None:
                self.worker.start()

    def image_from_bag(self, raw: bytes) -> Any:
        if not self._started:  # as the DDS link: the image type is known once wait_ready ran
            raise RuntimeError("image_from_bag before wait_ready")
        return raw  # the serialized message, decoded by the worker as the node does

    def set_answer_handler(self, handler: Callable[[Answer], object]) -> None:
        self.inbox.handler = handler

    def set_prompt_policy(self, policy: str, profile: str, timeout: float) -> None:
        from probench.prompting.policy import resolve_policy

        self.policies.append(policy)
        # as the node: the worker holds the policy; the operator's prompts are made ready again
        model = str((getattr(self.detector, "model_info", None) or {}).get("name", GROUNDING["model"]))
        self.worker.put_policy(resolve_policy(policy, model=model, profile=profile or None), None)
        self.advance(self._now())

    @property
    def policy(self) -> Any:
        """The prompt policy in force (the worker's, as in the node)."""
        return self.worker.policy

    def info(self, text: str) -> None:
        self.logs.append(text)

    def warning(self, text: str) -> None:
        self.logs.append("WARNING " + text)

    def announce(self, stamp_ns: int, texts: Sequence[str]) -> None:
        n = self.announced  # the frame this set is for (sets go out in frame order)
        self._last_announce_ns = self._now()
        self.announced += 1
        delay = self.late_prompts.get(n)
        if delay is None:
            self._put_set(stamp_ns, tuple(texts))
        elif self.clock is not None:
            with self._lock:
                self._held_sets.append((self.clock.now_ns() + round(delay * 1e9), stamp_ns, tuple(texts)))
        else:
            threading.Timer(delay, self._put_set, (stamp_ns, tuple(texts))).start()

    def send(self, image: Any, stamp_ns: int) -> None:
        now = self._now()
        with self._lock:
            self.advance(now)
            n = len(self.sent)
            self.sent.append(stamp_ns)
            data = restamp_cdr(image, stamp_ns)  # stamped as the DDS link stamps the recorded frame
            replaced = self.worker.put_frame("compressed" if self.compressed else "raw", (n, stamp_ns, data),
                                             now / 1e9)
            if replaced is not None and self._in_flight is not None:  # (idle: no frame to blame)
                self._in_flight.frame.replaced.append(int(replaced[1]))
            self.advance(now)

    def ok(self) -> bool:
        return self.stop_after is None or len(self.sent) < self.stop_after

    def close(self) -> None:
        self.worker.stop(timeout=5.0)

    # -- the simulated clock's side ------------------------------------------------------------
    def next_event_ns(self) -> int | None:
        with self._lock:
            times = [due for due, _, _ in self._held_sets]
            if self._in_flight is not None:
                times.append(self._in_flight.due_ns)
            return min(times, default=None)

    def advance(self, now_ns: int) -> None:
        """Simulated mode: everything due by ``now_ns`` happens, in order (no-op on real time)."""
        if self.clock is None:
            return
        with self._lock:
            self.advance_sets(now_ns)
            while True:
                flight = self._in_flight
                if flight is not None and flight.due_ns <= now_ns:
                    self._in_flight = None
                    self._free_ns = flight.frame.end_ns
                    for msg in flight.messages:
                        self._deliver(msg, msg.due_ns)
                    continue
                if flight is not None or self._free_ns > now_ns:
                    return
                job = self.worker.take_job()
                if job is None:
                    return
                self.worker.run_job(job)  # -> _handle_frame: sets self._in_flight

    # -- the "node" ---------------------------------------------------------------------------
    def _now(self) -> int:
        return self.clock.now_ns() if self.clock is not None else time.monotonic_ns()

    def _handle_frame(self, kind: ImageKind, data: Any, t_arrival: float, prompts: Prompts) -> None:
        n, stamp, raw = data
        start = self._now()
        frame = NodeFrame(n, stamp, start, start, 0.0, False)
        self._in_flight = _InFlight(frame, [], _NEVER)  # its answers are due once it is done
        self.worker_clock.local_ns = start if self.clock is not None else None  # the frame's own time
        try:
            answer = self.core.answer(raw, compressed=kind != "raw", prompts=prompts,
                                      policy=self.worker.policy, wanted=self.wanted)
        finally:
            self.worker_clock.local_ns = None
        if self.clock is None and self.model_s:
            time.sleep(self.model_s)
        frame.prompt_wait_ms, frame.bound = answer.prompt_wait_ms, answer.bound
        if answer.answered:
            with self._lock:
                self.answers.append(answer)
        wait_ns = round(answer.prompt_wait_ms * 1e6)
        ran = answer.answered or bool(answer.failed)  # no set: no inference, no answer
        model_ns = round(self.model_s * 1e9) if ran else 0
        messages = self._messages(n, stamp, answer, start + wait_ns + model_ns)
        if self.clock is None:
            frame.end_ns = self._now()
            with self._lock:
                self.node_trace.append(frame)
                self._in_flight = None
            for msg in messages:  # received now, on the evaluator's clock
                self._deliver(msg, time.monotonic_ns())
        else:
            frame.end_ns = start + wait_ns + model_ns
            self.node_trace.append(frame)
            done = max([frame.end_ns, *(m.due_ns for m in messages)])
            self._in_flight = _InFlight(frame, messages, done)

    def _messages(self, n: int, stamp: int, answer: FrameAnswer, done_ns: int) -> list[_Message]:
        """What the node publishes for frame ``n`` (the core's bytes; the knobs' misbehaviour
        made of bytes too), each due when it reaches the evaluator."""
        if answer.failed and answer.failure_cdr is not None:  # the node logs it and reports it
            self.logs.append(f"ERROR frame failed: {answer.failed}")
            return [_Message(FAILURE, answer.failure_cdr, done_ns)]
        if answer.detections_cdr is None:
            return []
        data = answer.detections_cdr
        if n in self.wrong_class:
            data = detections_to_cdr(answer.detections, answer.header,
                                     ["something never asked"] * len(answer.prompts))
        extra_ns = round(self.late.get(n, 0.0) * 1e9)
        if self.clock is None and extra_ns:
            time.sleep(extra_ns / 1e9)
        first = _Message(DETECTIONS, data, done_ns + extra_ns)
        out = [first]
        if n in self.duplicate:
            out.append(first)
        if n in self.stray_after:
            out.append(_Message(DETECTIONS, restamp_cdr(data, stamp + 1234), first.due_ns))
        return out

    def held_sets(self) -> list[tuple[int, int, Prompts]]:
        with self._lock:
            return list(self._held_sets)

    def advance_sets(self, now_ns: int) -> None:
        for item in sorted(s for s in self._held_sets if s[0] <= now_ns):
            self._held_sets.remove(item)
            self._put_set(item[1], item[2])

    def _put_set(self, stamp: int, texts: Prompts) -> None:
        self.sets.put(stamp, texts)

    def send_depth(self, raw: bytes) -> None:
        """A serialized depth Image, delivered at once (the node's depth subscription)."""
        problem = self.core.put_depth_cdr(raw)
        if problem:
            self.logs.append("WARNING " + problem)

    def send_camera_info(self, k: Sequence[float], width: int, height: int) -> None:
        problem = self.core.put_camera_info(list(k), width, height)
        if problem:
            self.logs.append("WARNING no 3D output: " + problem)

    # -- OperatorLink (a sequence bag's replay: realtime/eval_sequence.py) ---------------------
    def set_prompts(self, texts: Sequence[str]) -> None:
        """An operator prompt set, as on the node's ``prompt`` topic."""
        self.prompts_sent.append((self._now(), tuple(texts)))
        self.put_prompts(texts)

    def set_ack_handler(self, handler: Callable[[tuple[str, ...], int], object]) -> None:
        self._ack = handler

    def ready_for_operator_prompts(self, timeout: float) -> None:
        """As the DDS link: until the stamped sets announced so far are no longer in use (on a
        fake clock the wait is simulated)."""
        self.ready_calls += 1
        if self.clock is None or self._last_announce_ns is None:
            return
        left = self._last_announce_ns + round(self.sets.in_use_s * 1e9) - self.clock.now_ns()
        if left >= 0:
            self.clock.sleep(left / 1e9 + 0.001)

    def put_prompts(self, prompts: Sequence[str]) -> None:
        """Operator prompts, as the node's ``prompt`` topic gives them (checked as it checks them)."""
        from probench.prompting.messages import check_prompt_specs

        with self._lock:
            self.worker.put_prompts(check_prompt_specs(list(prompts)), None)
        self.advance(self._now())

    def _apply_prompts(self, prompts: Prompts, stamp: Any) -> bool:
        """The worker's prompt job, as the node's: the core makes the set ready, then the ack."""
        from probench.errors import ProbenchError

        try:
            ready = self.core.make_ready(prompts, stamp or _ZERO_STAMP, self.worker.policy)
        except ProbenchError as exc:
            self.logs.append(f"ERROR model refused prompts, previous stay active: {exc}")
            return False
        self.acks.append(ready.label_info_cdr)
        if self._ack is not None:  # the node's label_info, received by the evaluator
            self._ack(ready.plan.operator, self._now() + round(self.ack_s * 1e9))
        return True

    def _on_error(self, exc: BaseException) -> None:
        self.errors.append(exc)

    def _deliver(self, msg: _Message, received_ns: int) -> None:
        """A message reaches the evaluator: its link's inbox decodes it (module doc)."""
        if msg.topic == FAILURE:
            self.inbox.failure(msg.data, received_ns)
        else:
            self.inbox.detections(msg.data, received_ns)
