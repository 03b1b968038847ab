"""Detections.from_arrays: clipping to the image drops boxes left with no area; track ids
(``tracker_id``) are validated with the rest and carried by every view."""

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


def test_with_timing_equals_a_full_rebuild() -> None:
    masks = np.zeros((2, 10, 10), dtype=bool)
    masks[1, 2, 3] = True
    dets = Detections.from_arrays([[1.0, 1.0, 5.0, 5.0], [2.0, 2.0, 9.0, 8.0]], [0.9, 0.4], [1, 0],
                                  image_size=(10, 10), masks=masks,
                                  timings_ms={"preprocess": 1.5, "forward": 2.0, "postprocess": 0.25})
    timed = dets.with_timing("text", 3)
    rebuilt = Detections(dets.xyxy, dets.scores, dets.prompt_index, dets.masks,
                         {**dets.timings_ms, "text": 3.0, "total": 1.5 + 2.0 + 0.25 + 3.0})
    for name in ("xyxy", "scores", "prompt_index", "masks"):
        mine, theirs = getattr(timed, name), getattr(rebuilt, name)
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape and np.array_equal(mine, theirs)
    assert timed.timings_ms == rebuilt.timings_ms and timed.timings_ms["total"] == 6.75
    assert dets.timings_ms["total"] == 3.75  # the original is left as it was
    # a stage set again replaces its time; total follows
    assert dets.with_timing("text", 3).with_timing("text", 1).timings_ms["total"] == 4.75
    assert Detections.empty().with_timing("text", 0.5).timings_ms == {"text": 0.5, "total": 0.5}


def test_track_ids_ride_on_the_detections_through_every_view() -> None:
    dets = Detections.from_arrays([[1.0, 1.0, 5.0, 5.0], [2.0, 2.0, 9.0, 8.0], [0.0, 0.0, 3.0, 3.0]],
                                  [0.9, 0.4, 0.7], [1, 0, 0]).with_tracker_id([7, -1, 3])
    assert dets.tracker_id is not None and dets.tracker_id.dtype == np.int64
    assert dets.filter(np.array([True, False, True])).tracker_id.tolist() == [7, 3]  # type: ignore[union-attr]
    assert dets.above(0.5).tracker_id.tolist() == [7, 3]  # type: ignore[union-attr]
    assert dets.with_timing("track", 0.2).tracker_id.tolist() == [7, -1, 3]  # type: ignore[union-attr]
    assert dets.with_tracker_id(None).tracker_id is None and Detections.empty().tracker_id is None
    # the results carry the id of a tracked box; a box without one (-1) has no identity
    recs = dets.to_coco(5, [10, 11])
    assert [r.get("track_id") for r in recs] == [7, None, 3]
    assert "track_id" not in Detections.from_arrays([[1.0, 1.0, 2.0, 2.0]], [0.5], [0]).to_coco(5, [10])[0]


@pytest.mark.parametrize(("ids", "match"), [([1, 2], "2 track ids"), ([1.5, 2, 3], "integers"),
                                            ([1, -2, 3], ">= 0, or -1")])
def test_bad_track_ids_are_named(ids: list[float], match: str) -> None:
    xyxy = [[1.0, 1.0, 5.0, 5.0]] * 3
    with pytest.raises(DetectionsError, match=match):
        Detections(np.asarray(xyxy), np.full(3, 0.5), np.zeros(3, np.int64), tracker_id=np.asarray(ids))
    with pytest.raises(DetectionsError, match=match):
        Detections.from_arrays(xyxy, [0.5] * 3, [0] * 3).with_tracker_id(ids)
