"""What an adapter hands to ``Detections.from_arrays`` before it clips scores into [0, 1] and
boxes to the image: range checks on the returned Detections cannot catch an adapter that
forgot its sigmoid or its rescaling, these can (not a test module)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from probench.detections import Detections


def capture_raw(monkeypatch: pytest.MonkeyPatch) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every ``(xyxy, scores)`` passed to ``Detections.from_arrays`` from now on, as given."""
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    original = Detections.from_arrays.__func__  # type: ignore[attr-defined]

    def spy(cls: type[Detections], xyxy: Any, scores: Any, prompt_index: Any, **kw: Any) -> Detections:
        seen.append((np.array(xyxy, dtype=np.float64).reshape(-1, 4), np.array(scores, dtype=np.float64)))
        return original(cls, xyxy, scores, prompt_index, **kw)

    monkeypatch.setattr(Detections, "from_arrays", classmethod(spy))
    return seen


def assert_raw_in_range(seen: list[tuple[np.ndarray, np.ndarray]], h: int, w: int) -> None:
    """Raw scores are probabilities (a forgotten sigmoid gives logits outside [0, 1]); raw
    boxes are in the original image's pixels (a forgotten rescale gives 0-1 coordinates).
    Untrained tiny models put boxes anywhere a head bounded by a sigmoid can: centre inside
    the (square-padded) input, width and height at most its side L = max(h, w), so each
    corner lies within L / 2 beyond it."""
    assert seen, "the adapter did not build its detections with Detections.from_arrays"
    xyxy = np.concatenate([b for b, _ in seen])
    scores = np.concatenate([s for _, s in seen])
    assert np.isfinite(xyxy).all() and np.isfinite(scores).all()
    assert scores.min() >= 0.0 and scores.max() <= 1.0, (scores.min(), scores.max())
    assert xyxy.max() > 1.5, "boxes look normalized (0-1), not in pixels"
    side = max(h, w)
    assert (xyxy >= -0.5 * side).all() and (xyxy <= 1.5 * side).all(), (xyxy.min(), xyxy.max())
