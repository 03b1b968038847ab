"""The scripted test models as MODELS.md ("Scripted test models") documents them: one box per
prompt from a hash of its text (centre anywhere, sides 10-50% of the image's, score
0.05-0.95), the same on every frame of a size; test-masks' mask is the inscribed ellipse."""

from __future__ import annotations

import numpy as np

from probench.models.zoo import load_detector

PROMPTS = [f"prompt {i}" for i in range(200)]


def test_one_box_per_prompt_within_the_documented_ranges() -> None:
    h, w = 480, 640
    image = np.zeros((h, w, 3), np.uint8)
    det = load_detector("test-instant")
    dets = det.detect(image, PROMPTS)
    assert dets.prompt_index.tolist() == list(range(len(PROMPTS)))
    assert dets.scores.min() >= 0.05 and dets.scores.max() <= 0.95
    inside = (dets.xyxy[:, 0] > 0) & (dets.xyxy[:, 1] > 0) & (dets.xyxy[:, 2] < w) & (dets.xyxy[:, 3] < h)
    sides = (dets.xyxy[inside, 2:] - dets.xyxy[inside, :2]) / [w, h]  # unclipped boxes
    assert inside.sum() > 20 and sides.min() >= 0.1 - 1e-9 and sides.max() <= 0.5 + 1e-9
    again = det.detect(np.full((h, w, 3), 255, np.uint8), PROMPTS)  # another frame of the size
    assert np.array_equal(again.xyxy, dets.xyxy) and np.array_equal(again.scores, dets.scores)


def test_test_masks_masks_are_the_inscribed_ellipses() -> None:
    h, w = 96, 128
    dets = load_detector("test-masks").detect(np.zeros((h, w, 3), np.uint8), PROMPTS[:20])
    inside = [i for i, (x1, y1, x2, y2) in enumerate(dets.xyxy) if x1 > 0 and y1 > 0 and x2 < w and y2 < h]
    assert dets.masks is not None and len(inside) >= 3
    centres_x, centres_y = np.arange(w)[None] + 0.5, np.arange(h)[:, None] + 0.5  # pixel centres
    for i in inside:
        x1, y1, x2, y2 = dets.xyxy[i]
        cx, cy, rx, ry = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) / 2, (y2 - y1) / 2
        ellipse = ((centres_x - cx) / rx) ** 2 + ((centres_y - cy) / ry) ** 2 <= 1.0
        assert np.array_equal(dets.masks[i], ellipse) and ellipse.sum() > 0
