"""Box-only post-processing of the mask-capable models gives the boxes and scores of the
full (mask-building) path: ultralytics' segment predictor for YOLOE, the instance-segmentation
post-processing for SAM3."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.tiny_adapters import PROMPTS, fresh, image
from probench.models.ultra import postprocess as pp
from probench.models.zoo import load_detector


def _reference_keep(protos, coeffs, boxes, shape):
    from ultralytics.utils import ops

    return ops.process_mask(protos, coeffs, boxes.clone(), shape, upsample=True).amax((-2, -1)) > 0


def _smooth_protos(seed: int, c: int = 32, mh: int = 96, mw: int = 160) -> torch.Tensor:
    """Prototype masks with blobs (like trained ones) plus speckle (like random ones)."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn(1, c, mh // 8, mw // 8, generator=g)
    smooth = torch.nn.functional.interpolate(coarse, size=(mh, mw), mode="bilinear")[0]
    return smooth + 0.3 * torch.randn(c, mh, mw, generator=g)


@pytest.mark.parametrize("group_size", [None, 1_000_000], ids=["cpu-groups", "gpu-one-group"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nonempty_masks_is_the_predictors_filter(seed: int, group_size: int | None) -> None:
    """Both plans (the CPU's groups of 32 boxes; a GPU's one group of all boxes, run here on
    the CPU) give the predictor's filter."""
    g = torch.Generator().manual_seed(100 + seed)
    shape = (384, 640)
    n = 300  # n x H x W above DIRECT_MASK_PIXELS: what the screening leaves is sampled or windowed (seed 2)
    assert n * shape[0] * shape[1] > pp.DIRECT_MASK_PIXELS
    centre = torch.rand(n, 2, generator=g) * torch.tensor([640.0, 384.0])
    size = torch.rand(n, 2, generator=g) * torch.tensor([640.0, 384.0]) * torch.rand(n, 1, generator=g)
    boxes = torch.cat([centre - size / 2, centre + size / 2], 1)  # some reach outside the input
    boxes[:10, 2:] = boxes[:10, :2] + 0.3  # no pixel inside
    boxes[10:20] = torch.tensor([0.0, 0.0, 640.0, 384.0])  # the whole input
    boxes[20:30, :2] = torch.tensor([636.5, 380.5])  # the last pixels
    boxes[20:30, 2:] = torch.tensor([640.0, 384.0])
    coeffs = torch.randn(n, 32, generator=g) * 0.2
    coeffs[30:40] = 0.0  # all-zero masks: empty (0 is not > 0)
    protos = _smooth_protos(seed)
    got = pp.nonempty_masks(protos, coeffs, boxes.clone(), shape, group_size=group_size)
    want = _reference_keep(protos, coeffs, boxes, shape)
    assert 0 < int(want.sum()) < n
    assert torch.equal(got, want)


def test_nonempty_masks_of_many_small_speckled_masks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny model's case (random weights: speckled masks, hundreds of boxes on a 24 x 32
    grid): the screened, the sampled and the predictor-decided boxes all occur, and the
    answer is the predictor's."""
    from ultralytics.utils import ops

    g = torch.Generator().manual_seed(7)
    n, shape = 250, (96, 128)
    protos = torch.randn(32, 24, 32, generator=g)  # speckle only
    centre = torch.rand(n, 2, generator=g) * torch.tensor([128.0, 96.0])
    size = torch.rand(n, 2, generator=g) * torch.tensor([60.0, 50.0])
    boxes = torch.cat([centre - size / 2, centre + size / 2], 1)
    coeffs = torch.randn(n, 32, generator=g) * 0.2
    seen: dict[str, int] = {}
    sampled, exact = pp._sampled_positive, ops.process_mask

    def spy_sampled(masks, *args, **kwargs):
        out = sampled(masks, *args, **kwargs)
        seen["sampled"], seen["sampled_hit"] = len(out), int(out.sum())
        return out

    def spy_exact(protos, coeffs, *args, **kwargs):
        seen["exact"] = len(coeffs)
        return exact(protos, coeffs, *args, **kwargs)

    monkeypatch.setattr(pp, "_sampled_positive", spy_sampled)
    monkeypatch.setattr(ops, "process_mask", spy_exact)
    got = pp.nonempty_masks(protos, coeffs, boxes.clone(), shape)
    monkeypatch.undo()
    want = _reference_keep(protos, coeffs, boxes, shape)
    assert 0 < int(want.sum()) < n
    assert torch.equal(got, want)
    assert 0 < seen["sampled"] < n  # some boxes decided by the screening alone
    assert 0 < seen["sampled_hit"] < seen["sampled"]  # some by the samples
    assert 0 < seen["exact"] == seen["sampled"] - seen["sampled_hit"]  # the rest by the predictor


def test_nonempty_masks_when_no_box_has_a_pixel() -> None:
    n, shape = 200, (384, 640)
    boxes = torch.tensor([[10.2, 20.2, 10.6, 20.9]]).repeat(n, 1)  # no pixel centre inside
    coeffs = torch.randn(n, 32, generator=torch.Generator().manual_seed(4))
    got = pp.nonempty_masks(_smooth_protos(4), coeffs, boxes.clone(), shape)
    assert got.shape == (n,) and not bool(got.any())
    assert torch.equal(got, _reference_keep(_smooth_protos(4), coeffs, boxes, shape))


def test_nonempty_masks_small_or_uneven_is_the_predictors() -> None:
    protos = _smooth_protos(3, mh=24, mw=40)
    g = torch.Generator().manual_seed(3)
    boxes = torch.tensor([[0.0, 0.0, 50.0, 40.0], [10.0, 10.0, 10.5, 10.5], [60.0, 20.0, 150.0, 90.0]])
    coeffs = torch.randn(3, 32, generator=g)
    for shape in ((96, 160), (100, 150)):  # x4, and not an integer factor
        assert torch.equal(pp.nonempty_masks(protos, coeffs, boxes.clone(), shape),
                           _reference_keep(protos, coeffs, boxes, shape))
    assert pp.nonempty_masks(protos, coeffs[:0], boxes[:0], (96, 160)).shape == (0,)


def _predictor_answer(det, frame: np.ndarray):
    """The raw network output on ultralytics' own input, and the predictor's post-processing
    of it (the reference path's Results, converted as the adapter converts them)."""
    det.preprocess = "reference"
    det.detect(frame)  # builds ultralytics' predictor for these prompts
    pred = det.model.predictor
    bgr = np.ascontiguousarray(frame[..., ::-1])
    x = pred.preprocess([bgr])
    with torch.inference_mode():
        raw = pred.inference(x)
        raw_again = pred.inference(x)
    pred.batch = (["frame"], [bgr], [""])
    results = pred.postprocess(raw, x, [bgr])
    results[0].speed = {}
    ref = pp.results_to_detections(results[0], frame.shape[:2], det.return_masks)
    return raw_again, tuple(x.shape[2:]), ref


@pytest.mark.parametrize("name", ["tiny-yoloe-s", "tiny-yoloe-x", "tiny-yolo-world-s"])
def test_box_only_postprocess_is_the_predictors(name: str) -> None:
    det = load_detector(name)
    det.set_prompts(PROMPTS)
    frame = image(480, 640, seed=9)
    raw, input_hw, ref = _predictor_answer(det, frame)
    boxes, scores, labels, masks = det.postprocess(raw, input_hw, [frame.shape[:2]])[0]
    assert masks is None and len(ref) > 0
    np.testing.assert_array_equal(boxes, ref.xyxy)
    np.testing.assert_array_equal(scores, ref.scores)
    np.testing.assert_array_equal(labels, ref.prompt_index)


def test_yoloe_masks_when_asked_are_the_predictors() -> None:
    """With masks asked the device path builds them as the predictor does with retina masks
    (at the frame's resolution; its empty-mask filter then works on those, so the kept boxes
    may differ from the box-only path's, exactly as they do in ultralytics)."""
    det = load_detector("tiny-yoloe-s")
    det.return_masks = True
    frame = image(480, 640, seed=10)
    dev = det.detect(frame, PROMPTS)
    det.preprocess = "reference"
    ref = det.detect(frame, PROMPTS)
    assert dev.masks is not None and dev.masks.shape == (len(dev), 480, 640) and len(dev) > 0
    np.testing.assert_array_equal(dev.xyxy, ref.xyxy)
    np.testing.assert_array_equal(dev.scores, ref.scores)
    np.testing.assert_array_equal(dev.masks, ref.masks)


@pytest.mark.parametrize("name", ["tiny-sam3", "tiny-sam3-lite"])
def test_sam3_box_only_equals_the_mask_path(name: str) -> None:
    det = fresh(name)
    frame = image(96, 160, seed=12)
    boxes_only = det.detect(frame, PROMPTS)
    det.return_masks = True
    with_masks = det.detect(frame, PROMPTS)
    assert boxes_only.masks is None and with_masks.masks is not None
    np.testing.assert_array_equal(with_masks.xyxy, boxes_only.xyxy)
    np.testing.assert_array_equal(with_masks.scores, boxes_only.scores)
    np.testing.assert_array_equal(with_masks.prompt_index, boxes_only.prompt_index)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("agnostic", [False, True])
def test_early_stopping_nms_is_ultralytics(seed: int, agnostic: bool) -> None:
    """Thousands of candidates (as at 0.001 confidence), with and without mask columns,
    score ties included: the same kept rows as ultralytics' non_max_suppression."""
    from ultralytics.utils import nms

    g = torch.Generator().manual_seed(seed)
    nc, extra, n = (3, 32, 5040) if seed % 2 else (5, 0, 3000)
    pred = torch.rand(2, 4 + nc + extra, n, generator=g)
    pred[:, :2] *= 640
    pred[:, 2:4] *= 50 + 100 * seed
    if seed == 0:
        pred[:, 4 : 4 + nc] = (pred[:, 4 : 4 + nc] * 20).round() / 20  # many equal scores
    want = nms.non_max_suppression(pred.clone(), 0.001, 0.7, None, agnostic, max_det=100 * nc,
                                   nc=nc if extra else 0)
    got = pp.non_max_suppression(pred.clone(), 0.001, 0.7, agnostic=agnostic, max_det=100 * nc,
                                    nc=nc if extra else 0, end2end=False)
    assert len(got) == len(want) == 2
    for a, b in zip(got, want, strict=True):
        assert len(b) > 0 and torch.equal(a, b)
