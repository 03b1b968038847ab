"""The grounding node's real-time core: a one-slot frame mailbox and a prompt queue served
by one worker thread, and the map of per-frame (stamped) prompt sets (pure Python, no rclpy,
so their rules are unit-tested directly).

Rules (docs/DESIGN.md, ROS graph contract):
- only the newest frame waits; a frame replaced before processing is counted as skipped;
- accepted operator prompt sets are applied in order, before any waiting frame, each
  acknowledged by ``handle_prompts`` (the node publishes a LabelInfo);
- an operator prompt CHANGE drops the pending (not yet started) frame, counted as skipped;
- each frame is processed with the prompt set stamped with the frame's own stamp when there
  is one (:class:`StampedPromptSets`), else with the operator's set active when its
  processing starts;
- frames are taken only while active; ``deactivate`` returns once the frame in flight is done.

The node runs the worker thread (``start``); ``probench ground --realtime`` drives the same
rules on a bag's clock without the thread, through :meth:`FrameWorker.take_job` and
:meth:`FrameWorker.run_job` (what the thread does, one job at a time).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar

from probench.realtime.grounding_stats import GroundingStats

if TYPE_CHECKING:
    from probench.prompting.policy import PromptPolicy

Prompts = tuple[str, ...]
V = TypeVar("V")
# A frame as its producer gives it (the node: serialized bytes; a replay: a recorded frame),
# and a prompt set's acceptance time (the node: a builtin_interfaces/Time; a replay: bag ns)
D = TypeVar("D")
S = TypeVar("S")
# What a frame's data is: a serialized sensor_msgs/Image ("raw") or CompressedImage
# ("compressed") off a raw subscription, or a recorded bag frame (``probench ground``).
ImageKind = Literal["raw", "compressed", "recorded"]


@dataclass(frozen=True)
class FrameJob(Generic[D]):
    """A frame waiting in (or taken from) the one-slot mailbox."""

    kind: ImageKind
    data: D  # the message as the producer gave it (serialized bytes, a recorded frame)
    t_arrival: float  # time.perf_counter() at arrival (a replay: the bag's clock, in s)


@dataclass(frozen=True)
class PromptJob(Generic[S]):
    """An accepted operator prompt set, queued until the worker applies it."""

    prompts: Prompts
    stamp: S  # the acceptance time (a builtin_interfaces/Time from the node's clock, a bag's ns)




class WaitClock(Protocol):
    """The time a :class:`StampedMap` waits on: real time for the node, a simulated one for
    the evaluator's fake link (whose transport delivers held sets while a frame waits)."""

    def monotonic(self) -> float: ...

    def wait(self, cond: threading.Condition, seconds: float) -> None:
        """Wait on ``cond`` (held) up to ``seconds``, or until notified."""
        ...


class RealClock:
    """:class:`WaitClock` on ``time.monotonic`` and the condition's own wait."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, cond: threading.Condition, seconds: float) -> None:
        cond.wait(timeout=seconds)


class FrameWorker(Generic[D, S]):
    def __init__(
        self,
        stats: GroundingStats,
        handle_frame: Callable[[ImageKind, D, float, Prompts], None],
        handle_prompts: Callable[[Prompts, S], bool],
        on_error: Callable[[BaseException], None],
        max_pending_prompts: int = 64,
    ) -> None:
        self.stats = stats
        self._handle_frame = handle_frame
        self._handle_prompts = handle_prompts  # False: the model refused them
        self._on_error = on_error
        self._cond = threading.Condition()
        self._mailbox: FrameJob[D] | None = None
        # bounded: while inactive nothing is acknowledged yet
        self._prompt_queue: deque[PromptJob[S]] = deque(maxlen=max_pending_prompts)
        self.latest_prompts: Prompts = ()  # last accepted (maybe not applied yet)
        self.active_prompts: Prompts = ()  # what frames are processed with
        # the prompt policy frames and prompt sets go through; None: as typed. Replaced whole
        # by put_policy, read by the handlers.
        self.policy: PromptPolicy | None = None
        self._active = False
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None

    # -- producers (executor thread) ----------------------------------------------------
    def put_frame(self, kind: ImageKind, data: D, t_arrival: float | None = None) -> D | None:
        """Put a frame in the mailbox. Returns the data of the waiting frame it replaced
        (counted as skipped), else None (the node ignores it; a replay reports the drop)."""
        t = time.perf_counter() if t_arrival is None else t_arrival
        with self._cond:
            self.stats.frame_arrived()
            if not self._active:
                return None
            replaced = self._mailbox
            if replaced is not None:
                self.stats.count("skipped")
            self._mailbox = FrameJob(kind, data, t)
            self._cond.notify_all()
        return None if replaced is None else replaced.data

    def put_prompts(self, prompts: Prompts, stamp: S) -> D | None:
        """Queue a prompt set. Returns the data of the waiting frame a prompt change dropped
        (counted as skipped), else None."""
        dropped: FrameJob[D] | None = None
        with self._cond:
            if prompts != self.latest_prompts and self._mailbox is not None:
                dropped, self._mailbox = self._mailbox, None
                self.stats.count("skipped")
            self.latest_prompts = prompts
            self._prompt_queue.append(PromptJob(prompts, stamp))
            self._cond.notify_all()
        return None if dropped is None else dropped.data

    def put_policy(self, policy: PromptPolicy | None, stamp: S) -> None:
        """Switch the prompt policy at once; the operator's prompts stay and are queued again,
        so the new policy's texts are made ready and acknowledged like a prompt set (the same
        set: no pending frame is dropped)."""
        with self._cond:
            self.policy = policy
            if self.latest_prompts:
                self._prompt_queue.append(PromptJob(self.latest_prompts, stamp))
            self._cond.notify_all()

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        with self._cond:
            self._stop = False
        self._thread = threading.Thread(target=self._run, name="grounding-worker", daemon=True)
        self._thread.start()

    def activate(self) -> None:
        with self._cond:
            self._active = True
            self._cond.notify_all()

    def deactivate(self, timeout: float = 30.0) -> None:
        """Stop taking frames, drop the pending one, wait (up to ``timeout``) for the one in flight."""
        self._deactivate(time.monotonic() + timeout)

    def _deactivate(self, deadline: float) -> None:
        with self._cond:
            self._active = False
            if self._mailbox is not None:
                self._mailbox = None
                self.stats.count("skipped")
            while self._busy and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(timeout=min(0.1, left))

    def stop(self, timeout: float = 30.0) -> None:
        """Deactivate, end the thread, forget queued prompts and the active set; ``timeout``
        bounds the whole wait (frame in flight and thread end together)."""
        deadline = time.monotonic() + timeout
        self._deactivate(deadline)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
            self._thread = None
        with self._cond:
            self._prompt_queue.clear()
            self.active_prompts = ()

    # -- the thread ---------------------------------------------------------------------
    def _ready(self) -> bool:
        return self._active and bool(self._prompt_queue or self._mailbox)

    def _take(self) -> FrameJob[D] | PromptJob[S]:
        """The next job (lock held, one is ready): prompt changes first, so frames use the
        newest accepted set."""
        self._busy = True
        if self._prompt_queue:
            return self._prompt_queue.popleft()
        job, self._mailbox = self._mailbox, None
        assert job is not None  # _ready()
        return job

    def _next_job(self) -> FrameJob[D] | PromptJob[S] | None:
        with self._cond:
            while not self._stop and not self._ready():
                self._cond.wait(timeout=0.5)
            if self._stop:
                return None
            return self._take()

    def take_job(self) -> FrameJob[D] | PromptJob[S] | None:
        """The job the worker would start now, or None when there is none (never waits)."""
        with self._cond:
            return self._take() if self._ready() else None

    def run_job(self, job: FrameJob[D] | PromptJob[S]) -> None:
        """Do one job from :meth:`take_job`; a failure is counted and given to ``on_error``."""
        try:
            if isinstance(job, PromptJob):
                if self._handle_prompts(job.prompts, job.stamp):
                    self.active_prompts = job.prompts
                else:
                    with self._cond:
                        self.latest_prompts = self.active_prompts
            else:
                self._handle_frame(job.kind, job.data, job.t_arrival, self.active_prompts)  # snapshot
        except Exception as exc:  # noqa: BLE001 - the worker must outlive any one bad frame
            self.stats.count("errors")
            self._on_error(exc)
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _run(self) -> None:
        while (job := self._next_job()) is not None:
            self.run_job(job)


class StampedMap(Generic[V]):
    """Values each stamped for one frame, kept until that frame is processed: the node's one
    stamp-pairing mechanism (per-frame prompt sets, depth images).

    A bounded map stamp -> value. :meth:`take` hands a frame the value stamped for it (the
    nearest within ``tolerance_ns``; exact by default) and forgets every value stamped before
    it: frames arrive in stamp order and the node only ever processes the newest, so those
    belong to frames it passed over. Beyond ``capacity`` the oldest value is evicted
    (counted). Values arrive on their own topic, so a frame can be taken from the mailbox a
    moment before its value is handed over by the executor: while stamped values are in use
    (one arrived within ``in_use_s``) and none stamped at or after the frame has come yet,
    :meth:`take` waits up to ``wait_s`` for it. A stream that sends none never waits.
    """

    def __init__(self, capacity: int = 1024, in_use_s: float = 5.0, clock: WaitClock | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.in_use_s = in_use_s
        self.clock: WaitClock = clock if clock is not None else RealClock()
        self._cond = threading.Condition()
        self._sets: OrderedDict[int, V] = OrderedDict()
        self._newest = -1  # the highest stamp ever put
        self._last_put = float("-inf")  # monotonic time of the last put
        self.bound = 0  # frames processed with their own stamped value
        self.unbound = 0  # frames that found none while stamped values were in use
        self.evicted = 0

    def put(self, stamp_ns: int, value: V, now: float | None = None) -> None:
        with self._cond:
            self._last_put = self.clock.monotonic() if now is None else now
            self._sets[int(stamp_ns)] = value
            self._newest = max(self._newest, int(stamp_ns))
            while len(self._sets) > self.capacity:
                self._sets.popitem(last=False)
                self.evicted += 1
            self._cond.notify_all()

    def in_use(self, now: float | None = None) -> bool:
        now = self.clock.monotonic() if now is None else now
        return now - self._last_put <= self.in_use_s

    def _match(self, stamp_ns: int, tolerance_ns: int) -> int | None:
        if stamp_ns in self._sets:
            return stamp_ns
        near = [s for s in self._sets if abs(s - stamp_ns) <= tolerance_ns] if tolerance_ns > 0 else []
        return min(near, key=lambda s: abs(s - stamp_ns)) if near else None

    def take(self, stamp_ns: int, wait_s: float = 0.0, tolerance_ns: int = 0) -> V | None:
        """The value stamped ``stamp_ns`` (or the nearest within ``tolerance_ns``), forgetting
        it and every older one; None when there is none."""
        stamp_ns = int(stamp_ns)
        clock = self.clock
        deadline = clock.monotonic() + wait_s
        with self._cond:
            while self._match(stamp_ns, tolerance_ns) is None and self._newest < stamp_ns and self.in_use():
                left = deadline - clock.monotonic()
                if left <= 0:
                    break
                clock.wait(self._cond, left)
            key = self._match(stamp_ns, tolerance_ns)
            found = None if key is None else self._sets.pop(key)
            for s in [s for s in self._sets if s < stamp_ns]:
                del self._sets[s]
            if found is not None:
                self.bound += 1
            elif self.in_use():
                self.unbound += 1
            return found

    def __len__(self) -> int:
        with self._cond:
            return len(self._sets)


class StampedPromptSets(StampedMap[Prompts]):
    """Prompt sets each stamped for one frame (``frame_prompts``: header.stamp = the frame's
    stamp, matched exactly). Live operation sends no stamped sets, so it never waits."""

    def counters(self) -> dict[str, int]:
        with self._cond:
            return {"frames_bound": self.bound, "frames_unbound": self.unbound,
                    "stamped_sets_pending": len(self._sets), "stamped_sets_evicted": self.evicted}
