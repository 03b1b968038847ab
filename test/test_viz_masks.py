"""probench.viz's mask fill: translucent, in the box's colour, the best score on top."""

from __future__ import annotations

import numpy as np

from probench.detections import Detections
from probench.viz import MASK_ALPHA, color_for, draw_detections


def _blend(pixel: tuple[int, int, int], colour: tuple[int, int, int]) -> list[int]:
    return [round((1 - MASK_ALPHA) * p + MASK_ALPHA * c) for p, c in zip(pixel, colour, strict=True)]


def test_masks_are_filled_translucent_in_the_box_colour_best_on_top() -> None:
    img = np.full((60, 80, 3), 100, np.uint8)
    masks = np.zeros((2, 60, 80), bool)
    masks[0, 20:40, 10:40] = True  # prompt 0, score 0.4
    masks[1, 30:50, 30:60] = True  # prompt 1, score 0.8: on top where they overlap
    dets = Detections.from_arrays([[5, 15, 45, 45], [25, 25, 65, 55]], [0.4, 0.8], [0, 1], masks=masks)
    out = draw_detections(img, dets, ["a", "b"], masks=dets.masks)
    assert (img == 100).all()  # the input is untouched
    assert out[25, 20].tolist() == _blend((100, 100, 100), color_for(0))
    assert out[45, 50].tolist() == _blend((100, 100, 100), color_for(1))
    assert out[35, 35].tolist() == _blend((100, 100, 100), color_for(1))  # overlap: the higher score
    assert out[10, 70].tolist() == [100, 100, 100] and out[57, 5].tolist() == [100, 100, 100]  # no mask
    bgr = draw_detections(img, dets, ["a", "b"], masks=dets.masks, bgr=True)
    assert bgr[45, 50].tolist() == _blend((100, 100, 100), color_for(1, bgr=True))
    plain = draw_detections(img, dets, ["a", "b"])  # without masks: only boxes and labels
    assert plain[25, 20].tolist() == [100, 100, 100]


def test_masks_of_another_size_are_not_drawn_the_boxes_are() -> None:
    img = np.zeros((40, 50, 3), np.uint8)
    dets = Detections.from_arrays([[5, 5, 30, 30]], [0.9], [0], masks=np.ones((1, 20, 25), bool))
    out = draw_detections(img, dets, ["a"], masks=dets.masks)
    np.testing.assert_array_equal(out, draw_detections(img, dets, ["a"]))
    assert tuple(out[15, 5]) == color_for(0)  # the box's edge


def test_fill_masks_works_in_place_on_a_view() -> None:
    from probench.viz import fill_masks

    big = np.full((30, 40, 3), 50, np.uint8)
    view = big[::2, ::2]  # not contiguous
    masks = np.zeros((1, 15, 20), bool)
    masks[0, 5:10, 5:10] = True
    fill_masks(view, Detections.from_arrays([[5, 5, 10, 10]], [0.5], [2], masks=masks), masks)
    assert view[7, 7].tolist() == _blend((50, 50, 50), color_for(2))
    assert big[14, 14].tolist() == view[7, 7].tolist()
    assert view[0, 0].tolist() == [50, 50, 50] and big[1, 1].tolist() == [50, 50, 50]
