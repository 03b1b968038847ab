"""Stable track ids per prompt: ByteTrack from ``edgefirst-tracker`` (Au-Zone's EdgeFirst HAL,
a Rust implementation), one tracker per prompt.

- a detection's id is the same across frames while its tracker follows it; -1 means "no id"
  (a detection that starts an unconfirmed track, or one the tracker did not match): it is no
  identity (the temporal metrics leave it out of the identity metrics, docs/METRICS.md);
- prompts never share a track: each prompt has its own tracker (the library matches boxes
  whatever their labels, so one tracker for all prompts would let two prompts swap tracks);
- ids are unique across prompts (a node-wide counter maps the library's track UUIDs);
- a prompt change keeps the tracks of the prompts that stay and ends the others (their
  ids are never given again; a prompt that returns gets a new tracker, so it starts afresh);
- time comes from the frames' stamps: a lost track is dropped after ``lost_s`` seconds,
  whatever the frame rate, and skipped frames widen the motion model's step. The library's
  Kalman filter steps once per update, so before a frame each tracker is advanced by the
  ``step_s`` steps the stamps say were missed, with updates that carry no detection (the
  library's own way of ageing tracks; ``test_skipped_frames_widen_the_step`` fails without).

The node's detections are already above its score threshold, so every detection may start a
track (``activation``) and is matched in ByteTrack's first, high-score stage. As in ByteTrack,
a track is confirmed at once on its tracker's first frame (a prompt's first tracked frame:
there is nothing yet to confirm it against), and otherwise on its second frame: on the frame
that starts it the library reports the new track, which is given no id yet, so a detection
seen once, later in the stream, has no id. A frame whose stamp is not after the last tracked
frame's (a replayed frame) is not tracked: its ids are -1 and every track stays as it was.

The cost at 50 detections of 5 prompts is 0.3-0.7 ms per frame (median, on a 2-core x86-64
CPU: ``bench/bench_tracking.py``); the pure-Python trackers measured there (the ``trackers``
library, ultralytics, boxmot) take 2-5 ms, most of it one Kalman filter per track in Python.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probench.detections import Detections


@dataclass(frozen=True)
class TrackerSettings:
    lost_s: float = 1.0  # a track not matched for this long is ended
    # minimum score that starts a track; also ByteTrack's split between its two matching
    # stages (one threshold in this library)
    activation: float = 0.0
    min_iou: float = 0.1  # minimum IoU of a match
    # the Kalman update's weight on the innovation (the library's ``update``): its default,
    # 0.25, lags moving boxes, and loses them when frames are skipped (the tests' scene at
    # 10 fps: test_skipped_frames_widen_the_step fails with it); 1.0 is the classic filter
    gain: float = 1.0
    step_s: float = 1.0 / 30.0  # the motion model's step: skipped frames are counted in it


_NO_BOXES = np.zeros((0, 4), np.float32)
_NO_SCORES = np.zeros(0, np.float32)
_NO_LABELS = np.zeros(0, np.uint64)  # the library takes labels as uint64 only


class _PromptTracker:
    """One prompt's ByteTrack and the stamp (ns) it has been advanced to."""

    __slots__ = ("last_ns", "tracker")

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self.last_ns: int | None = None


class PromptTrackers:
    """ByteTrack for every prompt text; :meth:`update` gives a frame's detections their ids."""

    def __init__(self, settings: TrackerSettings | None = None) -> None:
        from edgefirst.tracker import ByteTrack

        self.settings = s = settings or TrackerSettings()
        self._kwargs: dict[str, Any] = {"high_conf": s.activation, "iou": s.min_iou, "update": s.gain,
                        "lifespan_ns": round(s.lost_s * 1e9)}
        self._cls = ByteTrack
        self._step_ns = max(1, round(s.step_s * 1e9))
        # beyond this many missed steps every track has expired: no need to step further
        self._max_missed = math.ceil(s.lost_s / s.step_s) + 1
        self._trackers: dict[str, _PromptTracker] = {}
        self._ids: dict[str, int] = {}  # the library's track UUID -> node-wide id
        self._next_id = 1
        self._clean_at = 128  # clean the map when it holds more ids than this
        self._origin_ns: int | None = None  # the first stamp: the library's clock starts at 0 there
        self._last_ns: int | None = None  # the last tracked frame's stamp, on that clock
        self.ended_prompts = 0

    @property
    def prompts(self) -> tuple[str, ...]:
        return tuple(self._trackers)

    def set_prompts(self, prompts: Sequence[str]) -> None:
        """Keep the prompts that stay, end the others, give the new ones a tracker."""
        wanted = list(dict.fromkeys(prompts))
        for p in [p for p in self._trackers if p not in wanted]:
            del self._trackers[p]  # its tracks end with it (their ids are never given again)
            self.ended_prompts += 1
        for p in wanted:
            if p not in self._trackers:
                self._trackers[p] = _PromptTracker(self._cls(**self._kwargs))

    def _stamp_ns(self, t_s: float | None) -> int | None:
        """The frame's time on the trackers' clock (ns from the first stamp, never negative);
        None for a frame not to track (its stamp is not after the last one, or not finite)."""
        if t_s is None:  # one step per call
            return 0 if self._last_ns is None else self._last_ns + self._step_ns
        if not math.isfinite(t_s):
            return None
        ns = round(t_s * 1e9)
        if self._origin_ns is None:
            self._origin_ns = ns
        ns -= self._origin_ns
        if ns < 0 or (self._last_ns is not None and ns <= self._last_ns):
            return None
        return ns

    def _advance(self, pt: _PromptTracker, ns: int) -> None:
        """Step ``pt``'s motion model over the frames missed since its last update."""
        if pt.last_ns is not None:
            missed = min(round((ns - pt.last_ns) / self._step_ns) - 1, self._max_missed)
            for k in range(1, missed + 1):
                pt.tracker.update(_NO_BOXES, _NO_SCORES, _NO_LABELS, pt.last_ns + k * self._step_ns)
        pt.last_ns = ns

    def update(self, dets: Detections, prompts: Sequence[str], t_s: float | None = None) -> np.ndarray:
        """Track ids (N,) int64 for ``dets`` (detected with ``prompts``), -1 where none; ``t_s``:
        the frame's stamp in seconds (None: one step per call). A prompt given twice is
        tracked at its first place; detections of its repeats get -1."""
        self.set_prompts(prompts)
        out = np.full(len(dets), -1, np.int64)
        ns = self._stamp_ns(t_s)
        if ns is None:
            return out
        self._last_ns = ns
        first = {p: i for i, p in reversed(list(enumerate(prompts)))}
        pidx = np.asarray(dets.prompt_index, np.int64)
        xyxy = np.asarray(dets.xyxy, np.float32).reshape(-1, 4)
        scores = np.asarray(dets.scores, np.float32)
        ids = self._ids
        for p, i in first.items():
            pt = self._trackers[p]
            confirm_new = pt.last_ns is None  # the tracker's first frame: its tracks are confirmed at once
            self._advance(pt, ns)
            rows = np.flatnonzero(pidx == i)
            infos = pt.tracker.update(xyxy[rows], scores[rows], np.zeros(len(rows), np.uint64), ns)
            for row, info in zip(rows.tolist(), infos, strict=True):
                # unmatched, or the first frame of a track after the tracker's first: unconfirmed
                if info is None or (info.created == ns and not confirm_new):
                    continue
                gid = ids.get(info.uuid)
                if gid is None:
                    gid = ids[info.uuid] = self._next_id
                    self._next_id += 1
                out[row] = gid
        # forget the ended tracks' UUIDs now and then (listing the live tracks every frame would
        # cost as much as tracking): when the map has doubled since it was last cleaned
        if len(ids) > self._clean_at:
            alive = {a.info.uuid for pt in self._trackers.values() for a in pt.tracker.get_active_tracks()}
            for uuid in [u for u in ids if u not in alive]:
                del ids[uuid]
            self._clean_at = max(128, 2 * len(ids))
        return out
