"""Stable track ids per prompt: ByteTrack (the ``trackers`` library, Roboflow's successor of
supervision's ByteTrack), one tracker for every prompt.

- a detection's id is the same across frames while its tracker follows it; -1 means "no id"
  (a low-score detection the tracker did not match);
- prompts never share a track: each prompt's boxes are moved to a region of their own
  (``REGION`` pixels apart, beyond any image), so boxes of two prompts never overlap and
  never match. The Kalman filter is translation-invariant (its noise does not depend on
  where a box is), so each track moves exactly as it would in a tracker of its own; one
  tracker per frame instead of one per prompt is what this buys (``bench/bench_tracking.py``);
- ids are unique across prompts (a node-wide counter maps the tracker's ids);
- a prompt change keeps the tracks of the prompts that stay and ends the others (their
  ids are never given again; a prompt that returns gets a new region, so it starts afresh);
- time comes from the frames' stamps, so skipped frames widen the motion model's step and a
  lost track is dropped after ``lost_s`` seconds, whatever the frame rate.

The node's detections are already above its score threshold, so every detection may start a
track (``activation``) and is matched in ByteTrack's first, high-score stage. A new track gets
its id on its second frame (ByteTrack answers -1 on the frame that starts it): a detection
seen once has no id.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from probench.detections import Detections


@dataclass(frozen=True)
class TrackerSettings:
    lost_s: float = 1.0  # a track not matched for this long is ended
    activation: float = 0.0  # minimum score that starts a track
    high_score: float = 0.0  # ByteTrack's split between its two matching stages
    min_iou: float = 0.1  # minimum IoU of a match


REGION = 1e5  # pixels between two prompts' regions (float64 boxes: exact far beyond 10^6 prompts)


class PromptTrackers:
    """ByteTrack for every prompt text at once; :meth:`update` gives a frame's detections their ids."""

    def __init__(self, settings: TrackerSettings | None = None) -> None:
        import supervision  # noqa: F401 - imported here (about 2 s cold), not on the first tracked frame
        import trackers  # noqa: F401

        self.settings = settings or TrackerSettings()
        self._tracker = self._new_tracker()
        self._region: dict[str, int] = {}  # prompt -> its region (never reused)
        self._next_region = 0
        self._ids: dict[int, int] = {}  # the tracker's id -> node-wide id
        self._next_id = 1
        self.ended_prompts = 0

    @property
    def prompts(self) -> tuple[str, ...]:
        return tuple(self._region)

    def _new_tracker(self) -> object:
        from trackers import ByteTrackTracker

        s = self.settings
        return ByteTrackTracker(lost_track_buffer=max(1, round(s.lost_s * 30.0)), frame_rate=30.0,
                                track_activation_threshold=s.activation, minimum_consecutive_frames=1,
                                minimum_iou_threshold=s.min_iou, high_conf_det_threshold=s.high_score)

    def set_prompts(self, prompts: Sequence[str]) -> None:
        """Keep the prompts that stay, end the others, give the new ones a region."""
        wanted = list(dict.fromkeys(prompts))
        for p in [p for p in self._region if p not in wanted]:
            del self._region[p]  # its tracks get no detection again: they end after lost_s
            self.ended_prompts += 1
        for p in wanted:
            if p not in self._region:
                self._region[p] = self._next_region
                self._next_region += 1

    def update(self, dets: Detections, prompts: Sequence[str], t_s: float | None = None) -> np.ndarray:
        """Track ids (N,) int64 for ``dets`` (detected with ``prompts``), -1 where none; ``t_s``:
        the frame's stamp in seconds (None: one step per call). A prompt given twice is
        tracked at its first place; detections of its repeats get -1."""
        import supervision as sv

        self.set_prompts(prompts)
        out = np.full(len(dets), -1, np.int64)
        first = {p: i for i, p in reversed(list(enumerate(prompts)))}
        region = np.full(len(prompts) + 1, -1.0)
        for p, i in first.items():
            region[i] = self._region[p]
        pidx = np.asarray(dets.prompt_index, np.int64)
        known = (pidx >= 0) & (pidx < len(prompts))
        rows = np.flatnonzero(known)
        rows = rows[region[pidx[rows]] >= 0]
        xyxy = dets.xyxy[rows].astype(np.float64).reshape(-1, 4) + (region[pidx[rows]] * REGION)[:, None]
        sv_dets = sv.Detections(xyxy=xyxy, confidence=dets.scores[rows].astype(np.float32),
                                data={"row": rows.astype(np.int64)})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. a repeated stamp (a replayed frame): skipped, not fatal
            result = self._tracker.update(sv_dets, timestamp=t_s)  # type: ignore[attr-defined]
        ids = self._ids
        if len(result):
            for row, local in zip(result.data["row"].tolist(), result.tracker_id.tolist(), strict=True):
                if local < 0:
                    continue
                gid = ids.get(local)
                if gid is None:
                    gid = ids[local] = self._next_id
                    self._next_id += 1
                out[row] = gid
        # the tracker never gives an id twice: forget the ended tracks now and then, not every frame
        if len(ids) > 2 * len(self._tracker.tracks) + 64:  # type: ignore[attr-defined]
            alive = {int(t.tracker_id) for t in self._tracker.tracks}  # type: ignore[attr-defined]
            for local in [loc for loc in ids if loc not in alive]:
                del ids[local]
        return out
