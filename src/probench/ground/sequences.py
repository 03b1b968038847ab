"""``probench ground`` on a bag made from a sequence dataset (``probench bag`` of a dataset
with videos: docs/FORMATS.md, "Sequences"; docs/GROUND.md, "Sequence bags").

- **Prompts.** Without a prompt source of its own (``--prompt``, a schedule, a recorded
  prompt topic), each video is grounded with its own operator prompts, as ``probench eval``
  sends them: the orig texts of the frame's queries before its first frame, and again before
  each frame where the data's prompt set changes.
- **Metrics.** The frames ``ground`` answered are scored with the temporal metrics of
  ``probench eval`` (:func:`probench.scoring.temporal.temporal_metrics`: continuity,
  flicker, CLEAR/IDF1/HOTA with the answers' track ids, prompt-change latency in frames),
  for the formulation ``orig``; a detection whose class id is not one of its frame's own
  queries (the old set, after a prompt change) is credited to none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probench.ground.frames import Grounded
from probench.ground.prompts import PromptEvent

if TYPE_CHECKING:
    from probench.cache.records import Temporal
    from probench.data.dataset import Dataset

FORMULATION = "orig"  # what the videos' own prompts are (their queries as typed)


@dataclass
class SequenceBag:
    """The sequence dataset embedded in a probench bag, its frames' log times, and the
    answers collected for the temporal metrics."""

    dataset: Dataset
    image_at: dict[int, int]  # a frame's log time (ns) -> its image id
    records: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def open(cls, path: str | Path) -> SequenceBag | None:
        """The bag's sequence dataset, or None for any other bag (a robot's, or a probench bag
        of still images)."""
        from probench.bags.errors import BagError
        from probench.bags.reader import ProbenchBag

        try:
            with ProbenchBag(path) as bag:
                if not bag.dataset.videos:
                    return None
                return cls(bag.dataset, {int(t): int(info["image_id"]) for t, info in bag.frame_infos()})
        except BagError:
            return None

    def prompt_events(self) -> list[PromptEvent]:
        """Each video's own operator prompts (module doc), a nanosecond before the frame they
        start at."""
        out: list[PromptEvent] = []
        previous: tuple[int, ...] | None = None
        for t, image_id in sorted(self.image_at.items()):
            image = self.dataset.images[image_id]
            queries = self.dataset.label_space(image_id)
            key = (image.video_id or 0, *queries)
            if key != previous:
                texts = tuple(self.dataset.queries[q].prompts[FORMULATION] for q in queries)
                out.append(PromptEvent(t - 1, texts, f"video {image.video_id} frame {image.frame_index}"))
                previous = key
        return out

    def observe(self, item: Grounded) -> None:
        """One answered frame's detections as COCO results of its own queries (with track ids)."""
        image_id = self.image_at.get(item.frame.t_ns)
        if image_id is None or item.dropped:
            return
        queries = self.dataset.label_space(image_id)
        by_text = {self.dataset.queries[q].prompts[FORMULATION]: q for q in queries}
        dets = item.detections
        ids = dets.tracker_id.tolist() if dets.tracker_id is not None else [-1] * len(dets)
        rows = zip(dets.xywh.tolist(), dets.scores.tolist(), dets.prompt_index.tolist(), ids, strict=True)
        for box, score, pi, tid in rows:
            query = by_text.get(item.prompts[pi])
            if query is None:  # answered with another frame's set: credited to none
                continue
            track = tid if tid >= 0 else None
            self.records.append({"image_id": image_id, "category_id": query, "bbox": box, "score": score,
                                 "track_id": track})

    def metrics(self) -> Temporal | None:
        from probench.scoring.temporal import temporal_metrics

        return temporal_metrics(self.dataset, {FORMULATION: self.records})
