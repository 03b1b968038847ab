"""A streaming scorer for the evaluator node (torchmetrics style): feed each image's results
as they arrive, ``compute()`` the full suite at any time on the same engine as ``score``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from probench.cache.records import MetricsRecord, RealtimeRecord, Stats
from probench.data.dataset import Dataset
from probench.scoring.errors import ScoringUsageError
from probench.scoring.suite import score
from probench.scoring.tables import DetArrays, GroundTruth
from probench.vocabulary import RUN_FORMULATIONS


class StreamingScorer:
    """``update(formulation, image_id, results)`` per processed frame, ``compute()`` at the end.

    An image updated twice for the same formulation keeps its latest results (a re-sent
    frame replaces, it does not duplicate). Images never updated have no predictions: their
    ground truth counts as missed, as a dropped frame should. ``compute()`` scores the
    formulations that received at least one update.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self._gt = GroundTruth.from_dataset(dataset)
        self.reset()

    def reset(self) -> None:
        self._parts: dict[str, dict[int, DetArrays]] = {}

    def update(self, formulation: str, image_id: int, results: Iterable[Mapping[str, Any]]) -> None:
        if formulation not in RUN_FORMULATIONS:
            raise ScoringUsageError(
                f"unknown formulation {formulation!r}; expected one of {list(RUN_FORMULATIONS)}"
            )
        image_id = int(image_id)
        if image_id not in self.dataset.images:
            raise ScoringUsageError(f"image {image_id} is not in the dataset")
        results = list(results)
        arr = DetArrays.from_results(results, where=f"{formulation} image {image_id}")
        if len(arr) and np.any(arr.image_id != image_id):
            raise ScoringUsageError(f"results for another image given as image {image_id}")
        self._parts.setdefault(formulation, {})[image_id] = arr

    def images_seen(self, formulation: str) -> set[int]:
        return set(self._parts.get(formulation, {}))

    def compute(
        self,
        *,
        latency: Stats | None = None,
        realtime: RealtimeRecord | None = None,
        pcr_score_threshold: float | None = None,
    ) -> MetricsRecord:
        preds = {
            f: DetArrays.concat([parts[i] for i in sorted(parts)])
            for f, parts in self._parts.items()
        }
        return score(
            self._gt, preds, latency=latency, realtime=realtime, pcr_score_threshold=pcr_score_threshold
        )
