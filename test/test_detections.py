"""Detections.from_arrays: clipping to the image drops boxes left with no area."""

from __future__ import annotations

import numpy as np
import pytest

from probench.detections import Detections, DetectionsError


def test_a_box_clipped_to_a_line_is_dropped_with_its_score_prompt_and_mask() -> None:
    xyxy = [
        [10.0, 10.0, 50.0, 40.0],  # inside: kept
        [1300.0, 100.0, 1441.0, 200.0],  # wholly right of a 1280-wide image: a vertical line
        [900.0, 700.0, 1000.0, 760.0],  # partly below: clipped, kept
        [5.0, 730.0, 60.0, 800.0],  # wholly below: a horizontal line
        [20.0, 20.0, 20.0, 30.0],  # zero width already
    ]
    masks = np.zeros((5, 720, 1280), dtype=bool)
    masks[2, 0, 0] = True
    dets = Detections.from_arrays(xyxy, [0.9, 0.8, 0.7, 0.6, 0.5], [0, 1, 2, 3, 4], image_size=(720, 1280),
                                  masks=masks)
    assert dets.xyxy.tolist() == [[10.0, 10.0, 50.0, 40.0], [900.0, 700.0, 1000.0, 720.0]]
    assert dets.scores.tolist() == [0.9, 0.7] and dets.prompt_index.tolist() == [0, 2]
    assert dets.masks is not None and dets.masks.shape == (2, 720, 1280) and dets.masks[1, 0, 0]
    assert np.all(dets.xywh[:, 2:] > 0)


def test_without_the_image_size_nothing_is_dropped() -> None:
    # e.g. boxes rebuilt from a Detection2DArray: they were clipped where they were made
    dets = Detections.from_arrays([[3.0, 3.0, 3.0, 9.0]], [0.5], [0])
    assert len(dets) == 1


def test_all_boxes_degenerate_gives_empty_detections() -> None:
    dets = Detections.from_arrays([[-20.0, 5.0, -1.0, 9.0]], [0.5], [0], image_size=(10, 10))
    assert len(dets) == 0 and dets.xyxy.shape == (0, 4)


def test_masks_of_the_wrong_length_are_named_even_when_a_box_is_dropped() -> None:
    xyxy = [[1.0, 1.0, 5.0, 5.0], [20.0, 1.0, 30.0, 5.0]]  # the second lies right of the image
    with pytest.raises(DetectionsError, match="masks must be"):
        Detections.from_arrays(xyxy, [0.9, 0.8], [0, 0], image_size=(10, 10),
                               masks=np.zeros((3, 10, 10), dtype=bool))
