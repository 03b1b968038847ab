"""Interaction-driven grounding: which detection of a frame is *the* target.

The operator points at one of several boxes ("that backpack, not this one"): a track id
(``target_select``; the console's click, ``probench node target 7``). From then on the
target is that track's detection in every frame where it is seen. While it is not seen
(occluded, out of view) there is no target: the node does not jump to another object. A
track lost for longer than ``target_timeout`` gives way to the default, the best-scoring
detection of the first prompt, and the selection is dropped (ByteTrack ends a track after
1 s unmatched, so its id does not come back). ``clear`` (``-1``) returns to the default at
once.

Pure logic, no rclpy and no clock of its own: every call gets ``now_s``, seconds on one
clock (the frame's stamp in the node, the bag's clock in a replay), so a test drives it
frame by frame. :meth:`TargetSelector.choose` returns the row of the target detection and
a one-line state for /diagnostics (``target``).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from probench.detections import Detections
from probench.msgs.shapes import Header
from probench.spatial.depth import Detections3D
from probench.spatial.errors import SpatialError

CLEAR = -1  # the track id that clears the selection (target_select)
DEFAULT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class TargetChoice:
    """One frame's target: ``index`` (a row of the frame's detections, or None), how it was
    chosen (``mode``: ``operator``, ``best`` or ``none``), its ``track_id`` (-1: none) and
    prompt text, and ``state``, the line /diagnostics shows."""

    index: int | None
    mode: str
    state: str
    track_id: int = -1
    prompt: str = ""


class TargetSelector:
    """See the module docstring. ``select``/``clear`` may come from another thread (the
    node's subscription) than ``choose`` (its worker): a lock keeps them apart."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._lock = threading.Lock()
        self._timeout = _checked_timeout(timeout_s)
        self._selected: int | None = None
        self._seen_at: float | None = None  # when the selected track was last seen (None: not yet)
        self._selected_at: float | None = None  # the first now_s after the selection
        self._gave_way = ""  # why the last selection gave way (kept for the state until the next)

    @property
    def timeout_s(self) -> float:
        return self._timeout

    @timeout_s.setter
    def timeout_s(self, value: float) -> None:  # the live parameter target_timeout
        self._timeout = _checked_timeout(value)

    @property
    def selected(self) -> int | None:
        """The operator's track id in force, or None (the default target)."""
        with self._lock:
            return self._selected

    def select(self, track_id: int) -> None:
        """Make track ``track_id`` the target (``-1``: :meth:`clear`)."""
        if isinstance(track_id, bool) or not isinstance(track_id, (int, np.integer)):
            raise SpatialError(f"a target is a track id (an integer), got {track_id!r}")
        track = int(track_id)
        if track == CLEAR:
            self.clear()
            return
        if track < 0:
            raise SpatialError(f"a track id is >= 0 (-1 clears the target), got {track}")
        with self._lock:
            self._selected, self._seen_at, self._selected_at, self._gave_way = track, None, None, ""

    def clear(self) -> None:
        """Back to the default target (the best detection of the first prompt)."""
        with self._lock:
            self._selected, self._seen_at, self._selected_at, self._gave_way = None, None, None, ""

    def choose(self, dets: Detections, prompts: list[str] | tuple[str, ...], now_s: float) -> TargetChoice:
        """The target among one frame's detections (their ``tracker_id``: -1 for none; None
        without tracking), at time ``now_s``."""
        ids = dets.tracker_id if dets.tracker_id is not None else np.full(len(dets), -1, np.int64)
        with self._lock:
            if self._selected is not None:
                track = self._selected
                if self._selected_at is None:
                    self._selected_at = now_s
                rows = np.flatnonzero(ids == track)
                if len(rows):
                    self._seen_at = now_s
                    row = int(rows[np.argmax(dets.scores[rows])])
                    return TargetChoice(row, "operator", f"operator track {track}", track,
                                        _prompt(dets, row, prompts))
                since = self._seen_at if self._seen_at is not None else self._selected_at
                lost = max(0.0, now_s - since)
                if lost <= self._timeout:
                    never = " (not seen yet)" if self._seen_at is None else ""
                    return TargetChoice(None, "none", f"operator track {track} lost {lost:.1f} s{never} "
                                        f"(<= target_timeout {self._timeout:g} s: waiting for it)", track)
                self._selected, self._seen_at, self._selected_at = None, None, None
                self._gave_way = f"track {track} lost {lost:.1f} s > target_timeout {self._timeout:g} s"
            gave_way = self._gave_way
        return _best(dets, ids, prompts, gave_way)


def target_cdr(choice: TargetChoice, dets: Detections, header: Header) -> bytes | None:
    """The latched ``target`` (``vision_msgs/Detection2D``, :func:`probench.msgs.target.target_to_cdr`)
    of a frame's choice, or None when the frame has no target."""
    from probench.msgs.target import target_to_cdr

    if choice.index is None:
        return None
    row = choice.index
    return target_to_cdr(header, dets.xyxy[row].tolist(), choice.prompt, float(dets.scores[row]),
                         choice.track_id)


def target_pose_cdr_for(choice: TargetChoice, est: Detections3D, header: Header) -> bytes | None:
    """``target_pose`` (``geometry_msgs/PoseStamped``) at the 3D estimate of the frame's
    target detection, or None (no target, or the target's box got no 3D estimate)."""
    from probench.msgs.wire import pose_stamped_to_cdr

    if choice.index is None:
        return None
    rows = np.flatnonzero(est.index == choice.index)
    return None if not len(rows) else pose_stamped_to_cdr(header, est.centre[int(rows[0])].tolist())


def _best(dets: Detections, ids: np.ndarray, prompts: list[str] | tuple[str, ...], why: str) -> TargetChoice:
    """The default: the best-scoring detection of the first prompt."""
    first = np.flatnonzero(dets.prompt_index == 0)
    suffix = f" ({why})" if why else ""
    if not len(first):
        return TargetChoice(None, "none", f"best: no detection of the first prompt{suffix}")
    row = int(first[np.argmax(dets.scores[first])])
    track = int(ids[row])
    name = f"track {track}" if track >= 0 else "untracked"
    return TargetChoice(row, "best", f"best ({name}){suffix}", track, _prompt(dets, row, prompts))


def _prompt(dets: Detections, row: int, prompts: list[str] | tuple[str, ...]) -> str:
    i = int(dets.prompt_index[row])
    return prompts[i] if 0 <= i < len(prompts) else ""


def _checked_timeout(value: float) -> float:
    out = float(value)
    if not math.isfinite(out) or out < 0:
        raise SpatialError(f"target_timeout must be a finite number >= 0, got {value!r}")
    return out
