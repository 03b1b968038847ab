"""Stable track ids per prompt: one ByteTrack tracker (the ``trackers`` library, Roboflow's
successor of supervision's ByteTrack) per prompt text.

- a detection's id is the same across frames while its tracker follows it; -1 means "no id"
  (a low-score detection the tracker did not match);
- ids are unique across prompts (a node-wide counter maps each prompt's own track ids);
- a prompt change keeps the trackers of the prompts that stay and ends the others (their
  ids are never given again);
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


class PromptTrackers:
    """One ByteTrack per prompt text; :meth:`update` gives a frame's detections their ids."""

    def __init__(self, settings: TrackerSettings | None = None) -> None:
        import supervision  # noqa: F401 - imported here (about 2 s cold), not on the first tracked frame
        import trackers  # noqa: F401

        self.settings = settings or TrackerSettings()
        self._trackers: dict[str, object] = {}
        self._ids: dict[str, dict[int, int]] = {}  # prompt -> its tracker's id -> node-wide id
        self._next_id = 1
        self.ended_prompts = 0

    @property
    def prompts(self) -> tuple[str, ...]:
        return tuple(self._trackers)

    def _new_tracker(self) -> object:
        from trackers import ByteTrackTracker

        s = self.settings
        return ByteTrackTracker(lost_track_buffer=max(1, round(s.lost_s * 30.0)), frame_rate=30.0,
                                track_activation_threshold=s.activation, minimum_consecutive_frames=1,
                                minimum_iou_threshold=s.min_iou, high_conf_det_threshold=s.high_score)

    def set_prompts(self, prompts: Sequence[str]) -> None:
        """Keep the trackers of the prompts that stay, end the others, start the new ones."""
        wanted = list(dict.fromkeys(prompts))
        for p in [p for p in self._trackers if p not in wanted]:
            del self._trackers[p]
            del self._ids[p]
            self.ended_prompts += 1
        for p in wanted:
            if p not in self._trackers:
                self._trackers[p] = self._new_tracker()
                self._ids[p] = {}

    def update(self, dets: Detections, prompts: Sequence[str], t_s: float | None = None) -> np.ndarray:
        """Track ids (N,) int64 for ``dets`` (detected with ``prompts``), -1 where none; ``t_s``:
        the frame's stamp in seconds (None: one step per call)."""
        self.set_prompts(prompts)
        out = np.full(len(dets), -1, np.int64)
        seen: set[str] = set()
        for pi, prompt in enumerate(prompts):
            if prompt in seen:  # a repeated prompt: its detections were tracked with the first
                continue
            seen.add(prompt)
            rows = np.flatnonzero(dets.prompt_index == pi)
            self._track(prompt, dets, rows, t_s, out)
        return out

    def _track(self, prompt: str, dets: Detections, rows: np.ndarray, t_s: float | None,
               out: np.ndarray) -> None:
        import supervision as sv

        tracker = self._trackers[prompt]
        sv_dets = sv.Detections(xyxy=dets.xyxy[rows].astype(np.float32).reshape(-1, 4),
                                confidence=dets.scores[rows].astype(np.float32),
                                data={"row": rows.astype(np.int64)})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. a repeated stamp (a replayed frame): skipped, not fatal
            result = tracker.update(sv_dets, timestamp=t_s)  # type: ignore[attr-defined]
        ids = self._ids[prompt]
        if len(result):
            for row, local in zip(result.data["row"], result.tracker_id, strict=True):
                if local < 0:
                    continue
                gid = ids.get(int(local))
                if gid is None:
                    gid = ids[int(local)] = self._next_id
                    self._next_id += 1
                out[int(row)] = gid
        alive = {int(t.tracker_id) for t in tracker.tracks}  # type: ignore[attr-defined]
        for local in [loc for loc in ids if loc not in alive]:
            del ids[local]
