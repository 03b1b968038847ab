"""TargetSelector, frame by frame: the default target (best of the first prompt), an
operator's track followed, held while briefly lost, given way after target_timeout (and
/diagnostics' state says so), clear, bad input, and selections from another thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from probench.detections import Detections, DetectionsError
from probench.spatial.errors import SpatialError
from probench.spatial.target import CLEAR, TargetSelector

PROMPTS = ("a backpack", "a door")


def _frame(rows: list[tuple[int, float, int]]) -> Detections:
    """Detections from (prompt index, score, track id) rows, boxes side by side."""
    xyxy = [[10.0 * i, 0.0, 10.0 * i + 8, 8.0] for i in range(len(rows))]
    dets = Detections.from_arrays(np.array(xyxy).reshape(-1, 4), [r[1] for r in rows], [r[0] for r in rows])
    return dets.with_tracker_id(np.array([r[2] for r in rows], np.int64))


TWO_BACKPACKS = _frame([(1, 0.95, 3), (0, 0.6, 7), (0, 0.9, 5)])  # the best backpack is track 5


def test_default_is_the_best_detection_of_the_first_prompt() -> None:
    sel = TargetSelector()
    choice = sel.choose(TWO_BACKPACKS, PROMPTS, 0.0)
    assert (choice.index, choice.mode, choice.track_id, choice.prompt) == (2, "best", 5, "a backpack")
    assert choice.state == "best (track 5)"
    untracked = sel.choose(TWO_BACKPACKS.with_tracker_id(None), PROMPTS, 0.0)  # tracking off
    assert untracked.index == 2 and untracked.track_id == -1 and untracked.state == "best (untracked)"
    doors = _frame([(1, 0.9, 1)])
    none = sel.choose(doors, PROMPTS, 0.0)
    assert none.index is None and none.mode == "none"
    assert none.state == "best: no detection of the first prompt"
    empty = sel.choose(_frame([]), PROMPTS, 0.0)
    assert empty.index is None


def test_operator_track_followed_held_while_lost_then_gives_way() -> None:
    sel = TargetSelector(timeout_s=2.0)
    sel.select(7)
    assert sel.selected == 7
    got = sel.choose(TWO_BACKPACKS, PROMPTS, 10.0)
    assert (got.index, got.mode, got.track_id, got.state) == (1, "operator", 7, "operator track 7")
    # the operator's track moves to another row and keeps being the target, whatever scores more
    moved = _frame([(0, 0.99, 5), (0, 0.2, 7)])
    assert sel.choose(moved, PROMPTS, 10.5).index == 1
    # lost: no target (the node does not jump to the other backpack) while within the timeout
    only_five = _frame([(0, 0.9, 5)])
    held = sel.choose(only_five, PROMPTS, 12.0)
    assert held.index is None and held.mode == "none" and held.track_id == 7
    assert held.state == "operator track 7 lost 1.5 s (<= target_timeout 2 s: waiting for it)"
    back = sel.choose(moved, PROMPTS, 12.4)  # seen again within the timeout: followed again
    assert back.index == 1 and back.mode == "operator"
    # lost for longer than the timeout: gives way to the best, and the state says why
    assert sel.choose(only_five, PROMPTS, 14.3).mode == "none"  # 1.9 s
    gone = sel.choose(only_five, PROMPTS, 14.5)  # 2.1 s
    assert (gone.index, gone.mode, gone.track_id) == (0, "best", 5)
    assert gone.state == "best (track 5) (track 7 lost 2.1 s > target_timeout 2 s)"
    assert sel.selected is None
    # the selection was dropped: track 7 coming back does not take over again
    assert sel.choose(moved, PROMPTS, 15.0).track_id == 5
    assert "track 7 lost 2.1 s" in sel.choose(moved, PROMPTS, 15.0).state  # until the next selection
    sel.select(5)
    assert sel.choose(moved, PROMPTS, 15.1).state == "operator track 5"


def test_a_selected_track_never_seen_waits_then_gives_way() -> None:
    sel = TargetSelector(timeout_s=1.0)
    sel.select(42)
    first = sel.choose(TWO_BACKPACKS, PROMPTS, 3.0)
    assert first.index is None and first.state.startswith("operator track 42 lost 0.0 s (not seen yet)")
    assert sel.choose(TWO_BACKPACKS, PROMPTS, 4.0).mode == "none"  # exactly the timeout: still waiting
    late = sel.choose(TWO_BACKPACKS, PROMPTS, 4.01)
    assert late.mode == "best" and "track 42 lost 1.0 s > target_timeout 1 s" in late.state


def test_zero_timeout_gives_way_at_the_first_frame_without_the_track() -> None:
    sel = TargetSelector(timeout_s=0.0)
    sel.select(7)
    assert sel.choose(TWO_BACKPACKS, PROMPTS, 0.0).mode == "operator"
    assert sel.choose(_frame([(0, 0.5, 5)]), PROMPTS, 0.0).mode == "none"  # same instant: 0 <= 0
    assert sel.choose(_frame([(0, 0.5, 5)]), PROMPTS, 0.1).mode == "best"


def test_clear_returns_to_the_default_at_once() -> None:
    sel = TargetSelector()
    sel.select(7)
    sel.select(CLEAR)
    assert sel.selected is None
    assert sel.choose(TWO_BACKPACKS, PROMPTS, 0.0).state == "best (track 5)"
    sel.select(7)
    sel.clear()
    assert sel.choose(TWO_BACKPACKS, PROMPTS, 0.0).mode == "best"


def test_live_timeout_and_bad_input() -> None:
    sel = TargetSelector()
    sel.timeout_s = 0.5
    assert sel.timeout_s == 0.5
    sel.select(7)
    sel.choose(TWO_BACKPACKS, PROMPTS, 0.0)
    assert sel.choose(_frame([(0, 0.5, 5)]), PROMPTS, 0.6).mode == "best"
    for bad in (-2, 1.5, "7", True, None):
        with pytest.raises(SpatialError):
            sel.select(bad)  # type: ignore[arg-type]
    for bad_t in (-1.0, float("nan"), float("inf")):
        with pytest.raises(SpatialError):
            sel.timeout_s = bad_t
        with pytest.raises(SpatialError):
            TargetSelector(bad_t)
    with pytest.raises(DetectionsError, match="3 boxes, 2 track ids"):  # ids ride on the detections
        TWO_BACKPACKS.with_tracker_id(np.array([1, 2]))
    sel.select(np.int64(7))  # a numpy integer (from a message) is a track id too
    assert sel.selected == 7


def test_selections_from_another_thread() -> None:
    """select/clear from a subscription thread while the worker chooses: every choice is
    one of the consistent answers (the selected track, waiting for it, or the default)."""
    sel = TargetSelector(timeout_s=100.0)
    stop = threading.Event()

    def operator() -> None:
        i = 0
        while not stop.is_set():
            if i % 3:
                sel.select(7 if i % 2 else 3)
            else:
                sel.clear()
            i += 1

    t = threading.Thread(target=operator)
    t.start()
    try:
        seen = set()
        for k in range(3000):
            c = sel.choose(TWO_BACKPACKS, PROMPTS, float(k))
            assert (c.mode, c.track_id, c.index) in {("operator", 7, 1), ("operator", 3, 0), ("best", 5, 2)}
            seen.add(c.track_id)
    finally:
        stop.set()
        t.join()
    assert seen  # (the mix of answers depends on the scheduler; each one was consistent)
