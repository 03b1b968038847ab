"""probench.spatial.masks: the instance / semantic / confidence images of a frame's published
detections (pixel-exact, the overlap rule, the link to the Detection2DArray), the target's
points, and the masks of the tiny SAM3 and YOLOE models through the encoders."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from probench.detections import Detections
from probench.msgs.errors import SemanticClassesError
from probench.msgs.wire import detections_to_cdr, image_from_cdr, top_order
from probench.spatial.depth import Intrinsics, depth_image
from probench.spatial.errors import MaskShapeError, NoMasksError, SpatialError
from probench.spatial.masks import compose_masks, target_detection, target_points

HEADER = SimpleNamespace(stamp=SimpleNamespace(sec=12, nanosec=34), frame_id="cam")


def _reference(dets: Detections, order: np.ndarray, hw: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """The rule painted the slow way: worst first, each better one over it."""
    inst, sem, conf = np.zeros(hw, np.uint16), np.zeros(hw, np.uint8), np.zeros(hw, np.uint8)
    assert dets.masks is not None
    for k in range(len(order), 0, -1):
        i = int(order[k - 1])
        m = dets.masks[i]
        inst[m], sem[m], conf[m] = k, dets.prompt_index[i] + 1, round(255 * float(dets.scores[i]))
    return inst, sem, conf


def test_known_masks_give_pixel_exact_images() -> None:
    m = np.zeros((3, 4, 6), bool)
    m[0, 0:2, 0:3] = True  # detection 0: score 0.5, prompt 0
    m[1, 1:3, 2:5] = True  # detection 1: score 0.9, prompt 2 (overlaps 0 at (1, 2))
    m[2, 3, 5] = True  # detection 2: score 0.2, prompt 1
    dets = Detections.from_arrays([[0, 0, 3, 2], [2, 1, 5, 3], [5, 3, 6, 4]], [0.5, 0.9, 0.2], [0, 2, 1],
                                  masks=m)
    order = top_order(dets)
    assert order.tolist() == [1, 0, 2]  # published: detection 1 first
    inst, sem, conf = compose_masks(dets, order, (4, 6))
    assert inst.dtype == np.uint16 and sem.dtype == np.uint8 and conf.dtype == np.uint8
    assert inst.tolist() == [[2, 2, 2, 0, 0, 0],
                             [2, 2, 1, 1, 1, 0],
                             [0, 0, 1, 1, 1, 0],
                             [0, 0, 0, 0, 0, 3]]
    assert sem.tolist() == [[1, 1, 1, 0, 0, 0],
                            [1, 1, 3, 3, 3, 0],
                            [0, 0, 3, 3, 3, 0],
                            [0, 0, 0, 0, 0, 2]]
    assert conf.tolist() == [[128, 128, 128, 0, 0, 0],  # round(127.5) = 128, round(229.5) = 230
                             [128, 128, 230, 230, 230, 0],
                             [0, 0, 230, 230, 230, 0],
                             [0, 0, 0, 0, 0, 51]]


def test_overlap_highest_score_wins_ties_to_the_lower_index() -> None:
    m = np.ones((3, 2, 2), bool)
    tie = Detections.from_arrays([[0, 0, 2, 2]] * 3, [0.5, 0.7, 0.7], [0, 1, 2], masks=m)
    inst, sem, conf = compose_masks(tie, top_order(tie), (2, 2))
    assert (inst == 1).all() and (sem == 2).all() and (conf == round(0.7 * 255)).all()  # detection 1
    m[1, 0, 0] = False  # where 1 has no mask, 2 (equal score, higher index) wins over 0
    tie = Detections.from_arrays(tie.xyxy, tie.scores, tie.prompt_index, masks=m)
    inst, sem, _ = compose_masks(tie, top_order(tie), (2, 2))
    assert inst.tolist() == [[2, 1], [1, 1]] and sem.tolist() == [[3, 2], [2, 2]]


def test_only_the_published_detections_are_drawn() -> None:
    m = np.zeros((3, 2, 3), bool)
    m[:, :, 0], m[1, :, 1], m[2, :, 2] = True, True, True
    dets = Detections.from_arrays([[0, 0, 3, 2]] * 3, [0.9, 0.5, 0.1], [0, 0, 0], masks=m)
    inst, sem, conf = compose_masks(dets, top_order(dets, max_detections=2), (2, 3))
    assert inst.tolist() == [[1, 2, 0], [1, 2, 0]]  # detection 2 (not published) is background
    assert (sem[:, 2] == 0).all() and (conf[:, 2] == 0).all()


def test_the_scripted_mask_model_links_every_pixel_to_its_detection2d() -> None:
    """test-masks (an ellipse in each box): each pixel's instance k is the k-th Detection2D of
    the frame's Detection2DArray: its class is that detection's class_id, its confidence its
    score, the pixel inside its box; and the images are the rule painted the slow way."""
    from probench.bags.typestore import vision_typestore
    from probench.models.zoo import load_detector

    prompts = ["a red door", "person", "fire extinguisher", "the mug on the left", "a chair"]
    det = load_detector("test-masks")
    rgb = np.zeros((48, 64, 3), np.uint8)
    dets = det.detect(rgb, prompts)
    assert dets.masks is not None and dets.masks.shape == (5, 48, 64) and dets.masks.any(axis=(1, 2)).all()
    order = top_order(dets, max_detections=4)
    images = compose_masks(dets, order, (48, 64))
    for got, want in zip(images, _reference(dets, order, (48, 64)), strict=True):
        np.testing.assert_array_equal(got, want)
    inst, sem, conf = images
    assert len(np.unique(inst)) >= 4  # overlaps leave every published instance some pixels here
    msg = vision_typestore().deserialize_cdr(detections_to_cdr(dets, HEADER, prompts, max_detections=4),
                                             "vision_msgs/msg/Detection2DArray")
    assert len(msg.detections) == 4
    for k, d in enumerate(msg.detections, start=1):
        ys, xs = np.nonzero(inst == k)
        hyp = d.results[0].hypothesis
        assert set(sem[ys, xs].tolist()) <= {prompts.index(hyp.class_id) + 1}
        assert set(conf[ys, xs].tolist()) <= {round(255 * hyp.score)}
        cx, cy, bw, bh = d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.size_x, d.bbox.size_y
        assert (abs(xs + 0.5 - cx) <= bw / 2).all() and (abs(ys + 0.5 - cy) <= bh / 2).all()
    assert ((inst == 0) == (sem == 0)).all() and ((inst == 0) == ~dets.masks[order].any(axis=0)).all()


def test_many_detections_use_a_wider_rank() -> None:
    rng = np.random.default_rng(3)
    n = 300
    m = rng.random((n, 20, 30)) < 0.02
    dets = Detections.from_arrays(np.tile([0, 0, 30, 20], (n, 1)), rng.random(n).round(2),
                                  rng.integers(0, 40, n), masks=m)
    order = top_order(dets)
    got_images, want_images = compose_masks(dets, order, (20, 30)), _reference(dets, order, (20, 30))
    for got, want in zip(got_images, want_images, strict=True):
        np.testing.assert_array_equal(got, want)


def test_wrong_masks_are_one_line_errors() -> None:
    m = np.ones((1, 4, 5), bool)
    dets = Detections.from_arrays([[0, 0, 2, 2]], [0.5], [0], masks=m)
    with pytest.raises(MaskShapeError, match=r"^instance masks are 5x4 but the image is 6x4: "):
        compose_masks(dets, top_order(dets), (4, 6))
    boxes = Detections.from_arrays([[0, 0, 2, 2]], [0.5], [0])
    with pytest.raises(NoMasksError, match="carry no instance masks"):
        compose_masks(boxes, top_order(boxes), (4, 5))
    inst, sem, conf = compose_masks(Detections.empty(), np.zeros(0, np.int64), (4, 5))  # no boxes, no masks
    assert inst.shape == sem.shape == conf.shape == (4, 5) and not (inst.any() or sem.any() or conf.any())
    beyond = Detections.from_arrays([[0, 0, 2, 2]], [0.5], [255], masks=m)
    with pytest.raises(SemanticClassesError, match=r"holds prompts 0\.\.254"):
        compose_masks(beyond, top_order(beyond), (4, 5))


K = Intrinsics(fx=100.0, fy=120.0, cx=3.0, cy=2.0, width=6, height=4)


def test_target_points_back_project_the_mask_pixels_with_depth() -> None:
    mm = np.array([[1000, 0, 2000, 0, 0, 0],
                   [0, 1500, 0, 0, 0, 0],
                   [0, 0, 0, 0, 0, 0],
                   [0, 0, 0, 0, 0, 4000]], np.uint16)
    mask = np.zeros((4, 6), bool)
    mask[0, :3] = mask[1, 1] = mask[3, 5] = True
    pts = target_points(depth_image(mm, "16UC1"), mask, K)
    assert pts.dtype == np.float32
    want = [[(0 - 3) * 1.0 / 100, (0 - 2) * 1.0 / 120, 1.0],  # (0, 1) has no depth: dropped
            [(2 - 3) * 2.0 / 100, (0 - 2) * 2.0 / 120, 2.0],
            [(1 - 3) * 1.5 / 100, (1 - 2) * 1.5 / 120, 1.5],
            [(5 - 3) * 4.0 / 100, (3 - 2) * 4.0 / 120, 4.0]]
    np.testing.assert_allclose(pts, want, rtol=1e-6)
    metres = mm.astype(np.float32) / 1000
    metres[0, 0], metres[3, 5] = np.nan, np.inf  # invalid in 32FC1 too
    got = target_points(depth_image(metres, "32FC1"), mask, K)
    np.testing.assert_allclose(got, np.array(want)[1:3], rtol=1e-6)
    assert target_points(depth_image(mm, "16UC1"), np.zeros((4, 6), bool), K).shape == (0, 3)


def test_target_points_check_sizes() -> None:
    depth = depth_image(np.ones((4, 6), np.uint16), "16UC1")
    with pytest.raises(MaskShapeError, match="the mask is 5x4 but the depth image is 6x4"):
        target_points(depth, np.ones((4, 5), bool), K)
    with pytest.raises(SpatialError, match="CameraInfo says 7x4"):
        target_points(depth, np.ones((4, 6), bool), Intrinsics(1, 1, 0, 0, 7, 4))


def test_the_target_is_the_first_prompts_best_detection() -> None:
    dets = Detections.from_arrays([[0, 0, 1, 1]] * 4, [0.3, 0.9, 0.6, 0.6], [1, 1, 0, 0])
    assert target_detection(dets) == 2 and target_detection(dets, 1) == 1
    assert target_detection(dets, 2) is None and target_detection(Detections.empty()) is None


@pytest.mark.parametrize("name", ["tiny-sam3", "tiny-yoloe-s"])
def test_tiny_segmentation_models_masks_encode_at_the_image_size(name: str) -> None:
    from helpers.tiny_adapters import shared  # the process's one build of each (the model tests' too)
    from probench.msgs.masks import mono_image_to_cdr

    det = shared(name)
    rgb = np.random.default_rng(0).integers(0, 256, (96, 160, 3), dtype=np.uint8)
    rgb[20:60, 40:100] = (200, 30, 30)
    det.return_masks = True
    try:
        dets = det.detect(rgb, ["a red car", "person"])
    finally:
        det.return_masks = False  # shared: left as built
    assert len(dets) and dets.masks is not None and dets.masks.shape == (len(dets), 96, 160)
    order = top_order(dets, max_detections=20)
    images = compose_masks(dets, order, (96, 160))
    for got, want in zip(images, _reference(dets, order, (96, 160)), strict=True):
        np.testing.assert_array_equal(got, want)
    for arr, encoding, step in zip(images, ("mono16", "mono8", "mono8"), (320, 160, 160), strict=True):
        msg = image_from_cdr(mono_image_to_cdr(arr, HEADER))
        assert (msg.height, msg.width, msg.encoding, msg.step, msg.is_bigendian) == (
            96, 160, encoding, step, 0)
        pixels = np.frombuffer(msg.data, arr.dtype.newbyteorder("<")).reshape(96, 160)
        np.testing.assert_array_equal(pixels, arr)
    assert int(images.instances.max()) <= len(order) and int(images.semantic.max()) <= 2


def test_masks_follow_the_detections_through_the_ensemble_policy() -> None:
    """The prompt policy answers under the operator's prompts (model texts fused back): each
    kept detection keeps its own mask, so the mask images of the answer hold."""
    from probench.models.zoo import load_detector
    from probench.prompting.policy import resolve_policy

    det = load_detector("test-masks")
    rgb = np.zeros((48, 64, 3), np.uint8)
    plan = resolve_policy("ensemble").plan(["the red mug on the desk => mug", "a door"])
    dets = plan.detect(det, rgb)
    assert len(dets) and dets.masks is not None and dets.masks.shape == (len(dets), 48, 64)
    raw = det.detect(rgb, list(plan.model_texts))
    assert raw.masks is not None
    for box, mask in zip(dets.xyxy, dets.masks, strict=True):  # each fused box with its own mask
        (same,) = np.flatnonzero((raw.xyxy == box).all(axis=1))[:1]
        np.testing.assert_array_equal(mask, raw.masks[same])
    inst, sem, _ = compose_masks(dets, top_order(dets), (48, 64))
    assert int(sem.max()) <= len(plan.operator) and int(inst.max()) <= len(dets)
