"""FrameWorker (the grounding node's mailbox + prompt queue + worker thread), without ROS."""

from __future__ import annotations

import threading
import time

import pytest

from probench.realtime.grounding_stats import GroundingStats
from probench.realtime.grounding_worker import FrameWorker

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """Handlers that record calls; frames can be held (a slow model) with a gate."""

    def __init__(self) -> None:
        self.frames: list[tuple[object, tuple[str, ...]]] = []
        self.acks: list[tuple[str, ...]] = []
        self.errors: list[BaseException] = []
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.refuse: set[tuple[str, ...]] = set()

    def frame(self, kind: str, data: object, t: float, prompts: tuple[str, ...]) -> None:
        self.started.set()
        self.gate.wait(10)
        if data == "boom":
            raise RuntimeError("model exploded")
        self.frames.append((data, prompts))

    def prompts(self, prompts: tuple[str, ...], stamp: object) -> bool:
        if prompts in self.refuse:
            return False
        self.acks.append(prompts)
        return True


def _until(pred, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.005)
    return bool(pred())


@pytest.fixture
def worker():
    rec = Recorder()
    w = FrameWorker(GroundingStats(), rec.frame, rec.prompts, rec.errors.append)
    w.start()
    w.activate()
    yield w, rec
    rec.gate.set()
    w.stop(5)


def test_only_the_newest_frame_waits(worker) -> None:
    w, rec = worker
    w.put_prompts(("a",), None)
    rec.gate.clear()
    assert w.put_frame("raw", 1) is None
    assert rec.started.wait(5)  # frame 1 is in the (slow) model
    replaced = [w.put_frame("raw", i) for i in range(2, 7)]  # 2..5 are replaced while waiting
    assert replaced == [None, 2, 3, 4, 5]  # each put names the frame it replaced
    rec.gate.set()
    assert _until(lambda: len(rec.frames) == 2)
    time.sleep(0.05)
    assert [f for f, _ in rec.frames] == [1, 6]
    assert w.stats.skipped == 4 and w.stats.received == 6


def test_prompt_change_drops_pending_frame_and_is_applied_first(worker) -> None:
    w, rec = worker
    w.put_prompts(("a",), None)
    rec.gate.clear()
    w.put_frame("raw", 1)
    assert rec.started.wait(5)
    w.put_frame("raw", 2)  # pending
    assert w.put_prompts(("a",), None) is None  # a repeat: acknowledged, the pending frame stays
    assert w.put_prompts(("b", "c"), None) == 2  # a change: the pending frame is dropped
    w.put_frame("raw", 3)  # arrives after the change: answered with the new set
    rec.gate.set()
    assert _until(lambda: len(rec.frames) == 2)
    assert rec.frames == [(1, ("a",)), (3, ("b", "c"))]
    assert rec.acks == [("a",), ("a",), ("b", "c")]
    assert w.stats.skipped == 1


def test_refused_prompts_keep_the_previous_set(worker) -> None:
    w, rec = worker
    w.put_prompts(("a",), None)
    rec.refuse.add(("bad",))
    w.put_prompts(("bad",), None)
    assert _until(lambda: w.latest_prompts == ("a",) and rec.acks == [("a",)])
    w.put_frame("raw", 1)
    assert _until(lambda: rec.frames == [(1, ("a",))])


def test_handler_errors_are_counted_and_the_worker_survives(worker) -> None:
    w, rec = worker
    w.put_prompts(("a",), None)
    w.put_frame("raw", "boom")
    assert _until(lambda: rec.errors)
    w.put_frame("raw", 2)
    assert _until(lambda: rec.frames == [(2, ("a",))])
    assert w.stats.errors == 1 and "exploded" in str(rec.errors[0])


def test_inactive_takes_no_frames_and_deactivate_waits_for_the_one_in_flight(worker) -> None:
    w, rec = worker
    w.put_prompts(("a",), None)
    rec.gate.clear()
    w.put_frame("raw", 1)
    assert rec.started.wait(5)
    done = threading.Event()

    def deactivate() -> None:
        w.deactivate(5)
        done.set()

    threading.Thread(target=deactivate).start()
    assert not done.wait(0.2)  # still waiting: frame 1 is in flight
    rec.gate.set()
    assert done.wait(5) and rec.frames == [(1, ("a",))]
    w.put_frame("raw", 2)  # inactive: received, never processed
    time.sleep(0.1)
    assert rec.frames == [(1, ("a",))] and w.stats.received == 2
    w.activate()
    w.put_frame("raw", 3)
    assert _until(lambda: len(rec.frames) == 2)


def test_stop_waits_at_most_its_timeout_in_all_for_a_slow_frame(worker) -> None:
    # one deadline for waiting on the frame and joining the thread: the node's shutdown wait
    # (_SHUTDOWN_FRAME_WAIT_S) is a bound, not half of one
    w, rec = worker
    w.put_prompts(("a",), None)
    rec.gate.clear()  # the frame blocks far longer than the timeout
    w.put_frame("raw", 1)
    assert rec.started.wait(5)
    t0 = time.monotonic()
    w.stop(timeout=1.0)
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 1.6  # waited for the frame, then gave up; two waits would take >= 2 s
    assert rec.frames == []


def test_stop_forgets_prompts_until_reacknowledged() -> None:
    rec = Recorder()
    w = FrameWorker(GroundingStats(), rec.frame, rec.prompts, rec.errors.append)
    w.put_prompts(("a",), None)  # accepted before start: acknowledged once active
    w.start()
    time.sleep(0.05)
    assert rec.acks == []
    w.activate()
    assert _until(lambda: rec.acks == [("a",)])
    w.stop(5)
    assert w.active_prompts == () and w.latest_prompts == ("a",)


# -- per-frame prompt sets, bound by stamp ----------------------------------------------------
def test_stamped_set_is_taken_once_and_older_sets_are_forgotten() -> None:
    from probench.realtime.grounding_worker import StampedPromptSets

    sets = StampedPromptSets()
    for stamp, texts in ((10, ("a",)), (20, ("b", "c")), (30, ("d",))):
        sets.put(stamp, texts)
    assert sets.take(20) == ("b", "c")  # frame 10 was passed over by the node: its set goes too
    assert len(sets) == 1 and sets.take(10) is None and sets.take(20) is None
    assert sets.take(30) == ("d",) and len(sets) == 0
    assert sets.counters()["frames_bound"] == 2 and sets.counters()["frames_unbound"] == 2


def test_stamped_sets_are_bounded() -> None:
    from probench.realtime.grounding_worker import StampedPromptSets

    sets = StampedPromptSets(capacity=3)
    for stamp in range(1, 6):
        sets.put(stamp, (f"p{stamp}",))
    assert len(sets) == 3 and sets.evicted == 2
    assert sets.take(1) is None and sets.take(3) == ("p3",)


def test_a_frame_waits_briefly_for_its_set_only_while_sets_are_in_use() -> None:
    from probench.realtime.grounding_worker import StampedPromptSets

    live = StampedPromptSets()
    t0 = time.monotonic()
    assert live.take(5, wait_s=2.0) is None  # no stamped sets ever: live frames never wait
    assert time.monotonic() - t0 < 0.5 and live.unbound == 0

    sets = StampedPromptSets()
    sets.put(100, ("a",))
    threading.Timer(0.2, sets.put, args=(200, ("late",))).start()
    t0 = time.monotonic()
    assert sets.take(200, wait_s=5.0) == ("late",)  # handed over while the frame waited
    assert 0.1 < time.monotonic() - t0 < 4.0
    t0 = time.monotonic()
    assert sets.take(300, wait_s=0.2) is None  # never comes: bounded wait, counted
    assert 0.15 < time.monotonic() - t0 < 3.0 and sets.unbound == 1
    sets.put(500, ("x",))
    t0 = time.monotonic()
    assert sets.take(400, wait_s=5.0) is None  # a newer set is there: frame 400 has none, no wait
    assert time.monotonic() - t0 < 1.0


def test_jobs_are_frozen_records_taken_prompts_first() -> None:
    """Without the thread (as ``probench ground`` drives it): typed jobs, in the rule's order."""
    import dataclasses

    from probench.realtime.grounding_worker import FrameJob, PromptJob

    rec = Recorder()
    w = FrameWorker(GroundingStats(), rec.frame, rec.prompts, rec.errors.append)
    w.activate()
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
