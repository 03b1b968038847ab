"""FrameWorker (the grounding node's mailbox + prompt queue + worker thread) and StampedMap,
without ROS.

The rules are stepped: the test takes each job (``take_job``: what the thread would start
now) and runs it (``run_job``), so "nothing happened" is an empty ``take_job()``, never a
sleep. The thread itself is tested for what only it does (taking jobs as they come, the
deactivate and stop waits), by events and by the order of events, not by wall-clock bounds.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from helpers.stepped_clock import SteppedClock
from probench.realtime import grounding_worker
from probench.realtime.grounding_stats import GroundingStats
from probench.realtime.grounding_worker import FrameJob, FrameWorker, PromptJob, StampedPromptSets

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """Handlers that record calls, in order with other events (``events``); frames can be held
    (a slow model) with a gate."""

    def __init__(self) -> None:
        self.frames: list[tuple[object, tuple[str, ...]]] = []
        self.acks: list[tuple[str, ...]] = []
        self.errors: list[BaseException] = []
        self.events: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.refuse: set[tuple[str, ...]] = set()

    def frame(self, kind: str, data: object, t: float, prompts: tuple[str, ...]) -> None:
        self.started.set()
        self.gate.wait(30)
        if data == "boom":
            raise RuntimeError("model exploded")
        self.frames.append((data, prompts))
        self.events.append(f"frame {data} done")

    def prompts(self, prompts: tuple[str, ...], stamp: object) -> bool:
        if prompts in self.refuse:
            return False
        self.acks.append(prompts)
        return True


def _stepped() -> tuple[FrameWorker, Recorder]:
    """An active worker without its thread: the test is the thread."""
    rec = Recorder()
    w = FrameWorker(GroundingStats(), rec.frame, rec.prompts, rec.errors.append)
    w.activate()
    return w, rec


def _drain(w: FrameWorker) -> int:
    """Run every job the worker has now; how many."""
    n = 0
    while (job := w.take_job()) is not None:
        w.run_job(job)
        n += 1
    return n


def _until(pred, timeout: float = 20.0) -> bool:
    """Poll until ``pred()`` holds (a positive outcome awaited, never an absence)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.002)
    return bool(pred())


def test_only_the_newest_frame_waits() -> None:
    w, rec = _stepped()
    w.put_prompts(("a",), None)
    assert _drain(w) == 1
    assert w.put_frame("raw", 1) is None
    in_flight = w.take_job()  # frame 1 is in the (slow) model
    assert in_flight == FrameJob("raw", 1, in_flight.t_arrival)
    replaced = [w.put_frame("raw", i) for i in range(2, 7)]  # 2..5 are replaced while waiting
    assert replaced == [None, 2, 3, 4, 5]  # each put names the frame it replaced
    w.run_job(in_flight)
    assert _drain(w) == 1 and w.take_job() is None
    assert [f for f, _ in rec.frames] == [1, 6]
    assert w.stats.skipped == 4 and w.stats.received == 6


def test_prompt_change_drops_pending_frame_and_is_applied_first() -> None:
    w, rec = _stepped()
    w.put_prompts(("a",), None)
    _drain(w)
    w.put_frame("raw", 1)
    in_flight = w.take_job()
    w.put_frame("raw", 2)  # pending
    assert w.put_prompts(("a",), None) is None  # a repeat: acknowledged, the pending frame stays
    assert w.put_prompts(("b", "c"), None) == 2  # a change: the pending frame is dropped
    w.put_frame("raw", 3)  # arrives after the change: answered with the new set
    assert in_flight is not None
    w.run_job(in_flight)
    kinds = []
    while (job := w.take_job()) is not None:
        kinds.append(type(job).__name__)
        w.run_job(job)
    assert kinds == ["PromptJob", "PromptJob", "FrameJob"]  # both prompt jobs before the waiting frame
    assert rec.frames == [(1, ("a",)), (3, ("b", "c"))]
    assert rec.acks == [("a",), ("a",), ("b", "c")]
    assert w.stats.skipped == 1


def test_refused_prompts_keep_the_previous_set() -> None:
    w, rec = _stepped()
    w.put_prompts(("a",), None)
    rec.refuse.add(("bad",))
    w.put_prompts(("bad",), None)
    assert w.latest_prompts == ("bad",)  # accepted, not yet applied
    assert _drain(w) == 2
    assert w.latest_prompts == w.active_prompts == ("a",) and rec.acks == [("a",)]
    w.put_frame("raw", 1)
    _drain(w)
    assert rec.frames == [(1, ("a",))]


def test_handler_errors_are_counted_and_the_worker_goes_on() -> None:
    w, rec = _stepped()
    w.put_prompts(("a",), None)
    w.put_frame("raw", "boom")  # queued after the prompts: not dropped (the set is new, the mailbox empty)
    assert _drain(w) == 2
    assert w.stats.errors == 1 and "exploded" in str(rec.errors[0])
    w.put_frame("raw", 2)
    _drain(w)
    assert rec.frames == [(2, ("a",))]


def test_an_inactive_worker_takes_nothing() -> None:
    rec = Recorder()
    w = FrameWorker(GroundingStats(), rec.frame, rec.prompts, rec.errors.append)
    w.put_prompts(("a",), None)  # accepted before activation: acknowledged once active
    assert w.put_frame("raw", 1) is None
    assert w.take_job() is None and rec.acks == [] and w.stats.received == 1
    w.activate()
    assert w.take_job() == PromptJob(("a",), None)  # frame 1 came while inactive: gone


def test_jobs_are_frozen_records_taken_prompts_first() -> None:
    """As ``probench ground`` drives it: typed jobs, in the rule's order."""
    import dataclasses

    w, rec = _stepped()
    w.put_frame("compressed", b"jpeg", 1.5)
    w.put_prompts(("a",), "stamp")  # a change drops the waiting frame
    w.put_frame("raw", b"image", 2.0)
    first = w.take_job()
    assert first == PromptJob(("a",), "stamp")
    w.run_job(first)
    second = w.take_job()
    assert second == FrameJob("raw", b"image", 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        second.kind = "compressed"  # type: ignore[misc]
    w.run_job(second)
    assert w.take_job() is None
    assert rec.acks == [("a",)] and rec.frames == [(b"image", ("a",))]


def test_stop_forgets_prompts_until_reacknowledged() -> None:
    w, rec = _stepped()
    w.put_prompts(("a",), None)
    _drain(w)
    assert w.active_prompts == ("a",)
    w.stop(5)
    assert w.active_prompts == () and w.latest_prompts == ("a",) and w.take_job() is None
    assert rec.acks == [("a",)]


# -- the thread ---------------------------------------------------------------------------------
@pytest.fixture
def threaded():
    rec = Recorder()
    w = FrameWorker(GroundingStats(), rec.frame, rec.prompts, rec.errors.append)
    w.start()
    w.activate()
    yield w, rec
    rec.gate.set()
    w.stop(5)


def test_the_thread_runs_the_jobs_as_they_come(threaded) -> None:
    w, rec = threaded
    w.put_prompts(("a",), None)
    rec.gate.clear()
    w.put_frame("raw", 1)
    assert rec.started.wait(20)  # frame 1 in the model
    for i in range(2, 5):
        w.put_frame("raw", i)
    rec.gate.set()
    assert _until(lambda: rec.frames == [(1, ("a",)), (4, ("a",))])  # the newest waited
    w.put_frame("raw", "boom")
    assert _until(lambda: len(rec.errors) == 1)
    w.put_frame("raw", 5)  # the thread outlived the error
    assert _until(lambda: rec.frames[-1:] == [(5, ("a",))])
    assert w.stats.skipped == 2 and w.stats.errors == 1


def test_deactivate_returns_only_after_the_frame_in_flight() -> None:
    w, rec = _stepped()
    w.put_prompts(("a",), None)
    _drain(w)
    w.put_frame("raw", 1)
    in_flight = w.take_job()  # the worker is busy with frame 1
    assert in_flight is not None

    def deactivate() -> None:
        w.deactivate(30)
        rec.events.append("deactivated")

    thread = threading.Thread(target=deactivate)
    thread.start()
    assert _until(lambda: not w._active)  # deactivate has begun: no frame is taken any more
    assert w.put_frame("raw", 2) is None and w.take_job() is None  # received, never processed
    w.run_job(in_flight)  # the frame in flight ends ...
    thread.join(30)
    assert rec.events == ["frame 1 done", "deactivated"]  # ... and only then deactivate returns
    assert rec.frames == [(1, ("a",))] and w.stats.received == 2
    w.activate()
    w.put_frame("raw", 3)
    _drain(w)
    assert rec.frames[-1] == (3, ("a",))


def test_stop_has_one_deadline_for_the_frame_and_the_thread(threaded, monkeypatch) -> None:
    """The node's shutdown wait (_SHUTDOWN_FRAME_WAIT_S) is a bound, not half of one: on a
    clock that moves 0.25 s per reading, stop(1.0) waits for the frame in flight until the
    deadline, then gives the thread's join what is left of it: nothing."""
    w, rec = threaded
    w.put_prompts(("a",), None)
    rec.gate.clear()  # the frame blocks far longer than the timeout
    w.put_frame("raw", 1)
    assert rec.started.wait(20)
    now = [0.0]

    def monotonic() -> float:
        now[0] += 0.25
        return now[0]

    monkeypatch.setattr(grounding_worker, "time", SimpleNamespace(monotonic=monotonic,
                                                                  perf_counter=time.perf_counter))
    joins: list[float | None] = []
    thread = w._thread
    assert thread is not None
    monkeypatch.setattr(thread, "join", lambda timeout=None: joins.append(timeout))
    w.stop(timeout=1.0)
    assert rec.frames == []  # gave up on the frame
    assert now[0] >= 1.0  # ... after waiting for it until the deadline
    assert joins == [0.0]  # and the join got what was left of the same deadline
    monkeypatch.undo()
    rec.gate.set()
    thread.join(20)
    assert not thread.is_alive()


# -- per-frame prompt sets, bound by stamp ----------------------------------------------------
class CountingCondition(threading.Condition):
    """A Condition that counts its waits and can act on the first one (then the waiter has
    released the lock: whatever the hook starts runs while the waiter waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0
        self.on_first_wait: threading.Thread | None = None

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        if self.waits == 1 and self.on_first_wait is not None:
            self.on_first_wait.start()  # blocks on the lock until wait() below releases it
        return super().wait(timeout)


def _counted(sets: StampedPromptSets) -> CountingCondition:
    sets._cond = cond = CountingCondition()
    return cond


def test_stamped_set_is_taken_once_and_older_sets_are_forgotten() -> None:
    sets = StampedPromptSets()
    for stamp, texts in ((10, ("a",)), (20, ("b", "c")), (30, ("d",))):
        sets.put(stamp, texts)
    assert sets.take(20) == ("b", "c")  # frame 10 was passed over by the node: its set goes too
    assert len(sets) == 1 and sets.take(10) is None and sets.take(20) is None
    assert sets.take(30) == ("d",) and len(sets) == 0
    assert sets.counters()["frames_bound"] == 2 and sets.counters()["frames_unbound"] == 2


def test_stamped_sets_are_bounded() -> None:
    sets = StampedPromptSets(capacity=3)
    for stamp in range(1, 6):
        sets.put(stamp, (f"p{stamp}",))
    assert len(sets) == 3 and sets.evicted == 2
    assert sets.take(1) is None and sets.take(3) == ("p3",)


def test_live_frames_never_wait() -> None:
    live = StampedPromptSets()
    cond = _counted(live)
    assert live.take(5, wait_s=30.0) is None  # no stamped sets ever: no wait at all
    assert cond.waits == 0 and live.unbound == 0


def test_a_frame_waits_for_a_set_handed_over_while_it_waits() -> None:
    sets = StampedPromptSets()
    sets.put(100, ("a",))
    cond = _counted(sets)
    cond.on_first_wait = threading.Thread(target=sets.put, args=(200, ("late",)))
    assert sets.take(200, wait_s=30.0) == ("late",)  # put while frame 200 waited
    assert cond.waits == 1 and sets.bound == 1
    cond.on_first_wait.join(10)


def test_a_set_that_never_comes_is_waited_for_once_and_counted() -> None:
    clock = SteppedClock()
    sets = StampedPromptSets(clock=clock)
    sets.put(100, ("a",))
    t0 = clock.now
    assert sets.take(300, wait_s=0.2) is None  # never comes: the bounded wait, counted
    assert clock.now - t0 == pytest.approx(0.2) and clock.waits == [pytest.approx(0.2)]
    assert sets.unbound == 1


def test_no_wait_when_a_newer_set_is_there() -> None:
    sets = StampedPromptSets()
    sets.put(500, ("x",))
    cond = _counted(sets)
    assert sets.take(400, wait_s=30.0) is None  # frame 400 has none (the evaluator moved on)
    assert cond.waits == 0 and sets.unbound == 1
