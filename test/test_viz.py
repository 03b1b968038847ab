"""probench.viz.draw_detections: boxes and labels land on a copy, in the right colour order."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_labels_fit_small_images() -> None:
    """On a 128x96 or 64x48 frame every label stays inside the image: the font scales with
    the image, a label too long for it is shrunk, then cut (ending in ~)."""
    from probench.viz import MIN_FONT_SCALE, fit_label, label_font_scale

    assert label_font_scale(480, 640) == pytest.approx(0.48)
    assert label_font_scale(1080, 1920) == pytest.approx(1.08)
    assert label_font_scale(96, 128) == pytest.approx(0.35) and label_font_scale(48, 64) == MIN_FONT_SCALE
    long = "a red backpack next to the door on the left 0.87 #3 2.41 m"
    for h, w in ((96, 128), (48, 64)):
        text, scale, (tw, th), _ = fit_label(long, label_font_scale(h, w), w)
        assert tw + 2 <= w and th < h / 4 and scale >= MIN_FONT_SCALE
        assert text.endswith("~") and long.startswith(text[:-1])
    assert fit_label("a cup 0.50", 0.48, 640)[0] == "a cup 0.50"  # room enough: as it was
    # drawn: a box at the right edge keeps its whole label inside the image (shifted left)
    img = np.zeros((96, 128, 3), np.uint8)
    dets = Detections.from_arrays([[100, 40, 127, 90]], [0.87], [0])
    out = draw_detections(img, dets, ["a red backpack"], extras=["#3 2.41 m"])
    filled = (out == color_for(0)).all(axis=2)
    cols = np.flatnonzero(filled[:40].any(axis=0))  # the label background above the box
    assert cols.size and cols.min() < 100 and cols.max() <= 127
