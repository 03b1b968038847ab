"""Issue 9, requirement 5: no adapter yields a zero-area box after clipping to the image.

Random tiny weights put many boxes partly or wholly outside the image, which is what made
``probench infer`` write boxes like ``[923.157, 720.0, 141.464, 0.0]``.
"""

from __future__ import annotations

import numpy as np
import pytest

from probench.models.zoo import tiny_names

PROMPTS = ["a red door", "person", "fire extinguisher"]


def _image(h: int, w: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    img = rng.integers(0, 80, (h, w, 3), dtype=np.uint8)
    img[: h // 2, : w // 3] += np.uint8(150)
    return img


@pytest.mark.parametrize("name", [*sorted(tiny_names()), "test-instant", "test-slow-1ms"])
def test_no_zero_area_box(name: str) -> None:
    from probench.models import load_detector

    detector = load_detector(name, score_threshold=0.0)
    for h, w in ((72, 128), (120, 90)):
        dets = detector.detect(_image(h, w), PROMPTS)
        assert len(dets) > 0, f"{name}: no box at all, the check would be empty"
        wh = dets.xywh[:, 2:]
        assert np.all(wh > 0), f"{name}: {int(np.sum(np.any(wh <= 0, axis=1)))} zero-area box(es)"
        assert np.all(dets.xyxy[:, [0, 2]] <= w) and np.all(dets.xyxy[:, [1, 3]] <= h)
