"""The tiny Grounding DINO answers at every image size the sample has (issue 36): its extra
stride-64 feature level was 1x1 on a square image (64 px at the tiny size) and its GroupNorm
raised "Expected more than 1 value per channel" on the sample's two 512x512 images, which
`probench eval --model tiny-grounding-dino-t` counted as missed frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from probench.models.zoo import load_detector


@pytest.fixture(scope="module")
def detector():  # a BaseDetector (the tiny model loads once)
    return load_detector("tiny-grounding-dino-t")


def _sample_sizes(repo_root: Path) -> list[tuple[int, int]]:
    coco = json.loads((repo_root / "datasets" / "probench-sample" / "annotations.json").read_text())
    return sorted({(im["height"], im["width"]) for im in coco["images"]})


def test_every_sample_size_and_extreme_shapes_are_answered(detector, repo_root: Path) -> None:
    sizes = _sample_sizes(repo_root)
    assert (512, 512) in sizes  # the case that raised
    rng = np.random.default_rng(0)
    for h, w in [*sizes, (64, 64), (1, 1), (17, 900), (900, 17)]:
        dets = detector.detect(rng.integers(0, 255, (h, w, 3), dtype=np.uint8), ["a cat", "the red door"])
        assert len(dets) > 0, (h, w)  # random weights: boxes, every one inside the image
        assert dets.xyxy[:, [0, 2]].max() <= w + 1e-3 and dets.xyxy[:, [1, 3]].max() <= h + 1e-3, (h, w)
