"""The Detic row (detectron2 backend, not installable here): listed with the reason, clear
errors, and the adapter's own logic checked with a fake detectron2 predictor."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from probench.models.errors import BackendUnavailableError, UnknownModelError
from probench.models.zoo import ZOO, load_detector


def test_detic_listed_but_not_installable() -> None:
    spec = ZOO["detic"]
    assert spec.paper_name == "Detic" and spec.backend == "detectron2"
    assert not spec.installable_here()
    assert "detectron2" in spec.install_hint
    with pytest.raises(BackendUnavailableError, match="detectron2"):
        load_detector("detic")
    with pytest.raises(UnknownModelError, match="no tiny variant"):
        load_detector("tiny-detic")


def test_import_names_install_hint(tmp_path) -> None:
    from probench.models.detic import _import_detic

    with pytest.raises(BackendUnavailableError, match="git clone --recursive"):
        _import_detic(tmp_path)


class _FakeBoxPredictor(torch.nn.Module):
    test_topk_per_image = 100


class _FakePredictor:
    """Stands in for detectron2's DefaultPredictor: records the image, returns fixed instances."""

    def __init__(self) -> None:
        self.model = SimpleNamespace(
            roi_heads=SimpleNamespace(box_predictor=torch.nn.ModuleList([_FakeBoxPredictor()] * 3))
        )
        self.seen = None

    def __call__(self, bgr: np.ndarray) -> dict:
        self.seen = bgr
        n = 130  # more than 100 for class 0: the adapter must cap per prompt
        boxes = torch.tensor([[1.0, 2.0, 30.0, 40.0]] * n + [[5.0, 5.0, 500.0, 9.0]])
        scores = torch.linspace(0.9, 0.1, n + 1)
        classes = torch.tensor([0] * n + [1])
        inst = SimpleNamespace(pred_boxes=SimpleNamespace(tensor=boxes), scores=scores, pred_classes=classes)
        return {"instances": SimpleNamespace(to=lambda _dev: inst)}


def test_adapter_logic_with_fake_predictor() -> None:
    from probench.models.detic import DeticDetector

    calls = []

    def text_encoder(texts):
        calls.append(list(texts))
        return torch.ones(len(texts), 512)

    resets = []
    pred = _FakePredictor()
    det = DeticDetector(pred, text_encoder, lambda model, emb, n: resets.append((tuple(emb.shape), n)),
                        device="cpu")
    img = np.zeros((50, 80, 3), np.uint8)
    img[..., 0] = 255  # red in RGB
    out = det.detect(img, ["cone", "door"])
    det.detect(img, ["cone", "door"])
    # Detic's demo prompt, each prompt encoded once, in fixed-size batches (one prompt each)
    assert calls == [["a cone"], ["a door"]] and det.text_batch == 1
    assert resets == [((512, 2), 2)]
    assert all(bp.test_topk_per_image == 200 for bp in pred.model.roi_heads.box_predictor)
    assert pred.seen[0, 0].tolist() == [0, 0, 255]  # handed over as BGR
    assert np.bincount(out.prompt_index).tolist() == [100, 1]
    assert out.xyxy[:, 2].max() == 80  # clipped to the image
    assert set(out.timings_ms) >= {"preprocess", "forward", "postprocess", "total"}
    det.detect(img, ["door"])  # a known prompt: no encoder call, the vocabulary set again
    assert len(calls) == 2 and resets[-1] == ((512, 1), 1)
