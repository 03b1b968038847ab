"""probench.viz.draw_detections: boxes and labels land on a copy, in the right colour order."""

from __future__ import annotations

import numpy as np

from probench.detections import Detections
from probench.viz import color_for, draw_detections


def test_draws_box_on_a_copy() -> None:
    img = np.zeros((100, 120, 3), np.uint8)
    dets = Detections.from_arrays([[20, 30, 80, 90]], [0.75], [0])
    out = draw_detections(img, dets, ["a cup"])
    assert img.sum() == 0  # input untouched
    assert out.shape == img.shape and out.dtype == np.uint8
    # the left edge of the box has the prompt's colour (RGB order), the middle stays black
    assert tuple(out[60, 20]) == color_for(0)
    assert out[60, 50].sum() == 0


def test_bgr_order_and_label_background() -> None:
    img = np.zeros((100, 120, 3), np.uint8)
    dets = Detections.from_arrays([[20, 40, 80, 90]], [0.5], [1])
    out = draw_detections(img, dets, ["a", "b"], bgr=True)
    assert tuple(out[60, 20]) == color_for(1, bgr=True)
    label_area = out[25:40, 21:40]
    assert (label_area == color_for(1, bgr=True)).all(axis=2).any()  # filled label box above


def test_empty_and_unknown_prompt_index() -> None:
    img = np.full((50, 50, 3), 9, np.uint8)
    np.testing.assert_array_equal(draw_detections(img, Detections.empty(), []), img)
    dets = Detections.from_arrays([[5, 5, 20, 20]], [0.5], [4])
    out = draw_detections(img, dets, ["only one"])  # label "#4", no IndexError
    assert not np.array_equal(out, img)
