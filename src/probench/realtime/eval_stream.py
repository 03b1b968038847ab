"""Steps 2 and 3 of the evaluator, ``stream`` and ``collect`` (no rclpy: the transport is a
:class:`Link`, DDS in :mod:`probench.ros.evaluator_node`, an in-process fake in the tests).

Clocks: every send and arrival time is read from one monotonic clock of the evaluator's
process (:class:`Clock`; ``time.monotonic_ns`` by default), so a step of the wall clock
changes no latency. Wall time is used only for the stamps the frames carry.

Warm-up (:func:`warm_up`): before the first measured stream of a session, ``warmup_frames``
frames go out one at a time, each when the previous was answered (as in ros2_benchmark's
discarded trial run): the node's lazy start-up (first decode, first inference) delays no
measured frame. Their answers are scored nowhere; their trace records are of kind
``warmup``, counted apart.

Stream (:func:`stream`): the frames of one formulation go out one after the other with
fresh, unique, increasing stamps. Before each frame its own prompt set is announced,
stamped with the frame's stamp (``Link.announce``: a LabelInfo on ``frame_prompts``), then
the image is published (``Link.send``). Every formulation's stream is measured the same
way: the same frames at the same rate.

- camera-rate: frame i is published at t0 + i / rate_hz, whatever the node does; its stamp
  is that scheduled time on the wall clock, and its prompt set is announced right after
  frame i-1 went out (a period ahead). A frame the evaluator sends late (its process did not
  get the CPU in time) goes out at once and the next ones keep their scheduled times, so the
  mean rate holds; a stall longer than ``RESTART_PERIODS`` periods restarts the grid at the
  late frame instead (no burst of catch-up frames). The replay jitter and the achieved rate
  show both. The node's newest-frame mailbox drops what it cannot keep up with: those
  frames are missed.
- as-fast-as-answered: the next frame goes out when the previous one is answered (or given
  up after ``answer_timeout``): none is dropped, for accuracy.

Collect (:class:`Collector`, called from the transport's thread for every answer): both
links hand it the grounding node's bytes as they came (:class:`AnswerInbox`: one reader,
:mod:`probench.msgs.wire`, so both build the same :class:`Answer`, track ids included):
- an answer is credited only to the pending frame whose stamp it carries, and only when
  every class id is in that frame's prompt set (else ``misattributed``: the frame is
  recorded missed, nothing credited; so is an answer whose detections cannot be read);
- a frame the node reports failed (its model call raised: a ``diagnostic_msgs/DiagnosticArray``
  on ``frame_errors`` stamped with the frame's stamp) is ``failed``, its record carrying the
  node's error: counted apart from missed frames (``frames_failed``, ``first_error`` of the
  real-time figures, :mod:`probench.realtime.eval_realtime`);
- a frame is pending until it is answered or ``answer_timeout`` passed since it was sent:
  an answer that arrives out of order, within the timeout, is credited (it is not proof
  that earlier frames were dropped). A frame unanswered after ``answer_timeout`` is given
  up (missed);
- an answer for a stamp that is not pending (given up, answered already, unknown) is
  ``stray``: counted in the trace, never credited.

Every resolved frame becomes one trace record (:mod:`probench.realtime.eval_realtime`) and its
COCO results, handed to ``emit`` (the run's writer).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from probench.cache.trace import ANSWERED, FAILED, MISATTRIBUTED, MISSED, STRAY, frame_record
from probench.detections import Detections
from probench.errors import Interrupted
from probench.msgs import shapes, wire
from probench.msgs.errors import MessageConversionError
from probench.realtime.eval_plan import FramePlan, results_for_frame
from probench.realtime.node_spec import MODES
from probench.vocabulary import AttributionError, CocoResult

# Interrupted lives in probench.errors (a run folder records it); re-exported for the nodes
__all__ = ["RESTART_PERIODS", "Answer", "AnswerInbox", "Clock", "Collector", "Emit", "Interrupted", "Link",
           "MonotonicClock", "stream", "warm_up"]

RESTART_PERIODS = 3  # a send later than this many periods restarts the replay grid


class Clock(Protocol):
    """The evaluator's time: one monotonic clock for send and arrival times, the wall clock
    for stamps only (a fake in the tests)."""

    def now_ns(self) -> int:
        """Monotonic time (ns): every send and arrival time."""

    def wall_ns(self) -> int:
        """Wall time (ns): the frames' stamps only."""

    def sleep(self, seconds: float) -> None: ...

    def wait(self, cond: threading.Condition, seconds: float) -> None:
        """Wait on ``cond`` (held) at most ``seconds``: a notify may end it early."""


class MonotonicClock:
    """The real clocks: ``time.monotonic_ns`` and ``time.time_ns``."""

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def wall_ns(self) -> int:
        return time.time_ns()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, cond: threading.Condition, seconds: float) -> None:
        cond.wait(timeout=max(0.0, seconds))


MONOTONIC = MonotonicClock()


@dataclass(frozen=True)
class Answer:
    """A Detection2DArray (or the node's report of a failed frame) as the collector sees it."""

    stamp_ns: int
    received_ns: int  # the evaluator's monotonic clock, taken on the message's raw bytes
    # the detections, their prompt indices into ``labels``; tracker_id: Detection2D.id of a tracking node
    detections: Detections = field(default_factory=Detections.empty)
    labels: tuple[str, ...] = ()  # the answer's distinct class ids
    error: str = ""  # a failed frame: the node's error ("ExcType: message"), no detections
    unreadable: str = ""  # a Detection2DArray whose detections could not be read: why

    @property
    def class_ids(self) -> list[str]:
        """Each detection's class id."""
        return [self.labels[i] for i in self.detections.prompt_index.tolist()]


class AnswerInbox:
    """Where a link hands the grounding node's serialized messages (the DDS link from its
    raw subscriptions, the fake link from the core's bytes): decoded by the one reader
    (:func:`probench.msgs.wire.detections_from_cdr`, :func:`~probench.msgs.wire.frame_failure_from_cdr`)
    into :class:`Answer` s for the handler. A message that cannot be read is logged and not
    credited; one whose stamp can be read but not its detections is handed on as
    ``unreadable`` (its frame is misattributed, never credited)."""

    def __init__(self, warn: Callable[[str], object]) -> None:
        self.warn = warn
        self.handler: Callable[[Answer], object] | None = None

    def detections(self, data: bytes, received_ns: int) -> None:
        """A serialized ``vision_msgs/Detection2DArray`` (``detections``)."""
        handler = self.handler
        if handler is None:
            return
        try:
            read = wire.detections_from_cdr(data)
        except MessageConversionError as exc:
            try:
                stamp = wire.header_stamp_ns(data)
            except MessageConversionError:
                self.warn(f"undecodable Detection2DArray, not credited: {exc}")
                return
            self.warn(f"unreadable Detection2DArray, not credited: {exc}")
            handler(Answer(stamp, received_ns, unreadable=str(exc)))
            return
        handler(Answer(shapes.stamp_ns(read.header.stamp), received_ns, read.detections, read.labels))

    def failure(self, data: bytes, received_ns: int) -> None:
        """A serialized ``diagnostic_msgs/DiagnosticArray`` (``frame_errors``): a frame whose
        model call raised."""
        handler = self.handler
        if handler is None:
            return
        try:
            header, error = wire.frame_failure_from_cdr(data)
        except MessageConversionError as exc:
            self.warn(f"undecodable frame_errors message, not counted: {exc}")
            return
        handler(Answer(shapes.stamp_ns(header.stamp), received_ns, error=error))


class Link(Protocol):
    """What the replay needs from the transport to the grounding node."""

    def announce(self, stamp_ns: int, texts: Sequence[str]) -> None:
        """Publish the prompt set of the frame that will carry ``stamp_ns``."""

    def send(self, image: object, stamp_ns: int) -> None:
        """Publish the frame's image with header.stamp = ``stamp_ns``."""

    def ok(self) -> bool:
        """False once the transport is shut down (Ctrl-C)."""


# (frame or None for a stray or warm-up answer, trace record, the frame's COCO results)
Emit = Callable[[FramePlan | None, dict[str, Any], list[CocoResult]], None]


@dataclass
class _Pending:
    frame: FramePlan
    seq: int  # position among the measured frames this session sent (warm-up: its own count)
    scheduled_ns: int
    sent_ns: int
    warmup: bool


class Collector:
    """Attributes answers to frames and resolves every sent frame exactly once (module doc).
    Thread-safe: :meth:`collect` runs on the transport's thread, the rest on the replay's."""

    def __init__(self, emit: Emit, *, answer_timeout_s: float, session: int = 0,
                 ok: Callable[[], bool] = lambda: True, clock: Clock = MONOTONIC) -> None:
        self._emit = emit
        self.answer_timeout_ns = int(answer_timeout_s * 1e9)
        self.session = int(session)
        self.clock = clock
        self._ok = ok
        self._cond = threading.Condition()
        self._pending: dict[int, _Pending] = {}
        self.sent = 0  # measured frames sent this session
        self.warmup_sent = 0
        self.stray = 0
        self.misattributed = 0
        self._last_stamp = 0

    def stamp(self, wall_ns: int) -> int:
        """The stamp of the next frame: ``wall_ns``, or one more than the last stamp when the
        wall clock stepped back (stamps stay unique and increasing for the whole session)."""
        with self._cond:
            self._last_stamp = max(int(wall_ns), self._last_stamp + 1)
            return self._last_stamp

    # -- the replay's side ---------------------------------------------------------------
    def expect(self, frame: FramePlan, stamp_ns: int, scheduled_ns: int, sent_ns: int, *,
               warmup: bool = False) -> None:
        """Register a frame just before its image is published (times: the monotonic clock)."""
        with self._cond:
            seq = self.warmup_sent if warmup else self.sent
            self._pending[int(stamp_ns)] = _Pending(frame, seq, int(scheduled_ns), int(sent_ns), warmup)
            if warmup:
                self.warmup_sent += 1
            else:
                self.sent += 1

    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def is_pending(self, stamp_ns: int) -> bool:
        with self._cond:
            return int(stamp_ns) in self._pending

    def expire(self, now_ns: int | None = None) -> int:
        """Give up the frames sent more than ``answer_timeout`` ago; returns how many."""
        now_ns = self.clock.now_ns() if now_ns is None else now_ns
        with self._cond:
            old = [s for s, p in self._pending.items() if now_ns - p.sent_ns > self.answer_timeout_ns]
            for s in sorted(old):
                self._resolve(s, MISSED)
            return len(old)

    def wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) until ``done()``; :class:`Interrupted` on shutdown."""
        deadline = self.clock.now_ns() + int(timeout_s * 1e9)
        with self._cond:
            while not done():
                left = (deadline - self.clock.now_ns()) / 1e9
                if left <= 0:
                    return False
                if not self._ok():
                    raise Interrupted("ROS shut down")
                self.clock.wait(self._cond, min(left, 0.1))
        return True

    def drain(self) -> None:
        """At the end of a stream: wait until every frame is answered or ``answer_timeout``
        old; whatever is left then is given up."""
        with self._cond:
            newest = max((p.sent_ns for p in self._pending.values()), default=self.clock.now_ns())
        left = (newest + self.answer_timeout_ns - self.clock.now_ns()) / 1e9
        self.wait(lambda: not self._pending, max(0.0, left))
        with self._cond:
            for s in sorted(self._pending):
                self._resolve(s, MISSED)

    # -- the transport's side ------------------------------------------------------------
    def collect(self, answer: Answer) -> str:
        """Credit one answer (module doc); returns what it was: answered, misattributed,
        failed or stray."""
        stamp = int(answer.stamp_ns)
        with self._cond:
            entry = self._pending.get(stamp)
            if entry is None:
                self.stray += 1
                self._emit_stray(answer)
                return STRAY
            if answer.error:  # (a warm-up frame's record is counted nowhere)
                self._resolve(stamp, FAILED, answer.received_ns, error=answer.error)
                return FAILED
            try:
                if answer.unreadable:
                    raise AttributionError(answer.unreadable)
                results = results_for_frame(entry.frame, answer.detections, answer.labels)
                status = ANSWERED
            except (AttributionError, ValueError):
                results, status = [], MISATTRIBUTED
                self.misattributed += 1
            self._resolve(stamp, status, answer.received_ns, results, len(answer.detections))
            return status

    # -- records ---------------------------------------------------------------------------
    def _resolve(self, stamp: int, status: str, received_ns: int | None = None,
                 results: list[CocoResult] | None = None, n_detections: int = 0,
                 error: str | None = None) -> None:
        p = self._pending.pop(stamp)
        record = frame_record(
            p.frame.formulation, p.frame.image_id, sent_ns=p.sent_ns, received_ns=received_ns, status=status,
            session=self.session, seq=p.seq, warmup=p.warmup, stamp_ns=stamp, scheduled_ns=p.scheduled_ns,
            n_prompts=len(p.frame.texts), n_detections=n_detections, n_results=len(results or []),
            error=error,
        )
        # a warm-up answer is scored nowhere: no frame, no results
        self._emit(None if p.warmup else p.frame, record, [] if p.warmup else results or [])
        self._cond.notify_all()

    def _emit_stray(self, answer: Answer) -> None:
        record = {"kind": STRAY, "session": self.session, "stamp_ns": int(answer.stamp_ns),
                  "received_ns": int(answer.received_ns), "n_detections": len(answer.detections)}
        self._emit(None, record, [])  # a stray belongs to no frame


# -- warm-up and stream ----------------------------------------------------------------------
# called with a frame's position in the stream just before it is sent (a sequence's prompt changes)
BeforeSend = Callable[[int, FramePlan], None]


def warm_up(link: Link, frames: Sequence[FramePlan], images: Sequence[Any], collector: Collector, *,
            n: int, answer_timeout_s: float, announce: bool = True) -> None:
    """The discarded trial (module doc): ``n`` frames, cycling through ``frames`` (``images``:
    their image messages), one at a time; every one resolved before this returns.
    ``announce=False``: no stamped prompt sets (the node answers with the operator's)."""
    if n <= 0 or not frames:
        return
    picks = [i % len(frames) for i in range(n)]
    _stream_as_answered(link, [frames[i] for i in picks], iter([images[i] for i in picks]), collector,
                        answer_timeout_s, warmup=True, announce=announce)
    collector.drain()


def stream(
    link: Link,
    frames: Sequence[FramePlan],
    images: Iterator[Any],
    collector: Collector,
    *,
    mode: str,
    rate_hz: float,
    answer_timeout_s: float,
    announce: bool = True,
    before_send: BeforeSend | None = None,
) -> None:
    """Send ``frames`` (``images``: their image messages, in order, made lazily) and return
    once every one is resolved (module doc). ``announce=False`` sends no stamped prompt sets
    (a sequence's frames are answered with the operator's prompts); ``before_send(i, frame)``
    runs just before frame ``i`` is sent (a sequence's prompt changes)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not frames:
        return
    if mode == "camera-rate":
        _stream_at_rate(link, frames, images, collector, rate_hz, announce, before_send)
    else:
        _stream_as_answered(link, frames, images, collector, answer_timeout_s, announce=announce,
                            before_send=before_send)
    collector.drain()


def _stream_at_rate(link: Link, frames: Sequence[FramePlan], images: Iterator[Any], collector: Collector,
                    rate_hz: float, announce: bool = True, before_send: BeforeSend | None = None) -> None:
    clock = collector.clock
    period_ns = round(1e9 / rate_hz)
    lead_ns = period_ns  # the first set gets a period's head start too
    image = next(images)  # the clock starts once the first frame is ready (reading it can take a while)
    t0 = clock.now_ns() + lead_ns
    stamp = t0_wall = collector.stamp(clock.wall_ns() + lead_ns)
    k0 = 0  # index of the frame the grid starts at (restarted when the sender fell behind)
    if announce:
        link.announce(stamp, frames[0].texts)
    for i, frame in enumerate(frames):
        if i:
            image = next(images)
        tick = t0 + (i - k0) * period_ns
        delay = tick - clock.now_ns()
        if delay > 0:
            clock.sleep(delay / 1e9)
        elif -delay > RESTART_PERIODS * period_ns:  # a long stall: restart the grid here, no burst
            t0, t0_wall, k0 = clock.now_ns(), stamp, i
            tick = t0
        if before_send is not None:
            before_send(i, frame)
        sent_ns = clock.now_ns()
        collector.expect(frame, stamp, tick, sent_ns)
        link.send(image, stamp)
        if i + 1 < len(frames):
            stamp = collector.stamp(t0_wall + (i + 1 - k0) * period_ns)
            if announce:
                link.announce(stamp, frames[i + 1].texts)
        collector.expire()
        if not link.ok():
            raise Interrupted("ROS shut down")


def _answered(collector: Collector, stamp_ns: int) -> bool:
    return not collector.is_pending(stamp_ns)


def _stream_as_answered(link: Link, frames: Sequence[FramePlan], images: Iterator[Any], collector: Collector,
                        answer_timeout_s: float, *, warmup: bool = False, announce: bool = True,
                        before_send: BeforeSend | None = None) -> None:
    clock = collector.clock
    for i, frame in enumerate(frames):
        image = next(images)
        if before_send is not None:
            before_send(i, frame)
        stamp = collector.stamp(clock.wall_ns())
        if announce:
            link.announce(stamp, frame.texts)
        sent_ns = clock.now_ns()
        collector.expect(frame, stamp, sent_ns, sent_ns, warmup=warmup)
        link.send(image, stamp)
        collector.wait(functools.partial(_answered, collector, stamp), answer_timeout_s)
        collector.expire()
        if not link.ok():
            raise Interrupted("ROS shut down")
