"""probench's early-stopping NMS (probench.models.ultra.postprocess.non_max_suppression) keeps
exactly what ultralytics' own non_max_suppression keeps: the same boxes, scores and classes
(and mask coefficients), in the same order, on random network outputs: several seeds,
class-agnostic and per-class, with max_det below and above the number of boxes NMS keeps."""

from __future__ import annotations

import pytest
import torch
import torchvision  # imported, ultralytics' NMS uses torchvision's kernel as ours does

from probench.models.ultra import postprocess as pp

CONF, IOU = 0.001, 0.7  # the adapter's confidence floor and ultralytics' predictor IoU


def _prediction(seed: int, n: int, nc: int, extra: int, batch: int = 2) -> torch.Tensor:
    """A raw (batch, 4 + nc + extra, n) head output: xywh boxes clustered around a few
    centres (so that NMS suppresses across chunks of candidates), class scores with ties."""
    g = torch.Generator().manual_seed(seed)
    pred = torch.rand(batch, 4 + nc + extra, n, generator=g)
    centres = torch.rand(batch, 2, 12, generator=g) * 600 + 20
    pick = torch.randint(0, 12, (batch, n), generator=g)
    pred[:, :2] = torch.gather(centres, 2, pick[:, None].expand(-1, 2, -1)) + torch.randn(
        batch, 2, n, generator=g) * (5 + 10 * seed)
    pred[:, 2:4] = 20 + pred[:, 2:4] * (40 + 30 * seed)
    scores = pred[:, 4 : 4 + nc]
    pred[:, 4 : 4 + nc] = (scores * 50).round() / 50 if seed % 2 == 0 else scores  # ties on even seeds
    return pred


def _reference(pred: torch.Tensor, *, agnostic: bool, max_det: int, nc: int) -> list[torch.Tensor]:
    from ultralytics.utils import nms

    # max_time_img: no time limit, so that a loaded machine cannot cut ultralytics' loop short
    return nms.non_max_suppression(pred.clone(), CONF, IOU, None, agnostic, max_det=max_det, nc=nc,
                                   max_time_img=1e6)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("agnostic", [False, True], ids=["per-class", "agnostic"])
@pytest.mark.parametrize("max_det", [1, 25, 300, 100_000])
def test_nms_keeps_ultralytics_boxes_scores_classes(seed: int, agnostic: bool, max_det: int) -> None:
    nc, extra = (3, 32) if seed % 2 else (5, 0)  # with and without mask coefficients
    n = 2600 + 700 * seed  # more candidates than one NMS chunk
    assert n > pp.NMS_CHUNK
    pred = _prediction(seed, n, nc, extra)
    mask_nc = nc if extra else 0  # the adapter passes nc only for the -seg models
    want = _reference(pred, agnostic=agnostic, max_det=max_det, nc=mask_nc)
    got = pp.non_max_suppression(pred.clone(), CONF, IOU, agnostic=agnostic, max_det=max_det, nc=mask_nc,
                                 end2end=False)
    assert len(got) == len(want) == 2
    for a, b in zip(got, want, strict=True):
        assert len(b) > 0 and a.shape == b.shape
        assert torch.equal(a[:, :4], b[:, :4])  # boxes (xyxy)
        assert torch.equal(a[:, 4], b[:, 4])  # scores
        assert torch.equal(a[:, 5], b[:, 5])  # classes
        assert torch.equal(a[:, 6:], b[:, 6:])  # mask coefficients (none when extra == 0)
        if max_det < 300:
            assert len(b) == max_det  # the limit binds: early stopping has something to cut
        else:
            assert len(b) < n  # NMS suppressed boxes


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("agnostic", [False, True], ids=["per-class", "agnostic"])
def test_nms_gpu_plan_keeps_ultralytics_boxes(seed: int, agnostic: bool) -> None:
    """A GPU's plan (one chunk: torchvision's kernel once over every candidate, no early
    stop), run here on the CPU: the same rows as ultralytics'."""
    nc, extra = (3, 32) if seed % 2 else (5, 0)
    pred = _prediction(seed, 2600 + 700 * seed, nc, extra)
    mask_nc = nc if extra else 0
    want = _reference(pred, agnostic=agnostic, max_det=300, nc=mask_nc)
    got = pp.non_max_suppression(pred.clone(), CONF, IOU, agnostic=agnostic, max_det=300, nc=mask_nc,
                                 end2end=False, chunk=1 << 62)
    for a, b in zip(got, want, strict=True):
        assert len(b) > 0 and torch.equal(a, b)


def test_nms_agnostic_and_per_class_differ() -> None:
    """The inputs make the class handling matter: per-class NMS keeps more boxes than
    class-agnostic NMS on the same output (and each still equals ultralytics')."""
    pred = _prediction(2, 3000, 5, 0)
    per_class = pp.non_max_suppression(pred.clone(), CONF, IOU, agnostic=False, max_det=100_000, nc=0,
                                       end2end=False)
    agnostic = pp.non_max_suppression(pred.clone(), CONF, IOU, agnostic=True, max_det=100_000, nc=0,
                                      end2end=False)
    for a, b in zip(per_class, agnostic, strict=True):
        assert len(a) > len(b)


def test_nms_stops_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """With max_det reached in the first chunk, torchvision's kernel runs once, not once
    per chunk of candidates, and the answer is still ultralytics'."""
    pred = _prediction(1, 5000, 3, 32, batch=1)
    want = _reference(pred, agnostic=False, max_det=10, nc=3)
    calls = []
    kernel = torchvision.ops.nms

    def counting(boxes: torch.Tensor, scores: torch.Tensor, iou: float) -> torch.Tensor:
        calls.append(len(boxes))
        return kernel(boxes, scores, iou)

    monkeypatch.setattr(torchvision.ops, "nms", counting)
    got = pp.non_max_suppression(pred.clone(), CONF, IOU, agnostic=False, max_det=10, nc=3, end2end=False)
    assert calls == [pp.NMS_CHUNK]
    assert torch.equal(got[0], want[0])
