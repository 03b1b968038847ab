"""ONNX Runtime for every image-head family (Grounding DINO, MM-GD, OmDet-T, SAM3): the head
exported once per input geometry, a new prompt count on the same file, detections equal to
eager (boxes within 1e-3 of the frame's side in px, scores within 1e-4, the same prompt
indices), and the refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from probench.errors import UsageError
from probench.models.accel.cache import ArtifactCache
from probench.models.accel.errors import ExportError, RuntimeUnavailableError, UnsupportedRuntimeError
from probench.models.accel.head_export import dynamic_axes, export_head_onnx, geometry
from probench.models.accel.head_runtime import head_of, to_onnxruntime
from probench.models.base import BaseDetector
from probench.models.head import ImageHead
from probench.models.zoo import load_detector

SETS = (["a red backpack", "the door handle"], ["a cat", "a red backpack", "a chair", "a lamp", "a door"])


def _frame(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (90, 160, 3), dtype=np.uint8)


@pytest.mark.parametrize(
    ("name", "family"),
    [("tiny-grounding-dino-t", "grounding-dino"), ("tiny-mm-grounding-dino-t", "grounding-dino"),
     ("tiny-omdet-turbo", "omdet"), ("tiny-sam3", "sam3")],
)
def test_onnxruntime_equals_eager(name: str, family: str, tmp_path: Path) -> None:
    base = load_detector(name)
    ort_det = load_detector(name, runtime="onnxruntime", engine_cache=str(tmp_path))
    assert ort_det.name == f"{name}@onnxruntime" and ort_det.model_info["runtime"] == "onnxruntime"
    img = _frame()
    for prompts in SETS:  # two prompt (token) counts: the dynamic axes, one file
        a, b = base.detect(img, prompts), ort_det.detect(img, prompts)
        assert len(a) == len(b) > 0
        np.testing.assert_array_equal(b.prompt_index, a.prompt_index)
        np.testing.assert_allclose(b.xyxy, a.xyxy, rtol=0, atol=1e-3 * max(img.shape[:2]))
        np.testing.assert_allclose(b.scores, a.scores, rtol=0, atol=1e-4)
    assert len(list(tmp_path.glob(f"{family}-*.onnx"))) == 1
    assert ort_det.head_runner.files == list(tmp_path.glob(f"{family}-*.onnx"))


def test_grounding_dino_files_follow_the_frame_size_and_are_reused(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    det = to_onnxruntime(load_detector("tiny-grounding-dino-t"), cache)
    det.detect(_frame(), SETS[0])
    square = np.random.default_rng(5).integers(0, 256, (120, 120, 3), dtype=np.uint8)
    b = det.detect(square, SETS[0])  # another input size: another trace
    assert cache.builds == 2
    # (this size's trace has float64 reference points, cast for ORT's GridSample: still eager's output)
    a = load_detector("tiny-grounding-dino-t").detect(square, SETS[0])
    np.testing.assert_array_equal(b.prompt_index, a.prompt_index)
    np.testing.assert_allclose(b.xyxy, a.xyxy, rtol=0, atol=0.12)
    np.testing.assert_allclose(b.scores, a.scores, rtol=0, atol=1e-4)
    again = to_onnxruntime(load_detector("tiny-grounding-dino-t"), cache)
    again.detect(_frame(1), SETS[1])
    assert cache.builds == 2  # same weights and size: the cached file


def test_refusals_are_clear(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="fp32"):
        load_detector("tiny-sam3", runtime="onnxruntime", precision="fp16")
    with pytest.raises(RuntimeUnavailableError, match="NVIDIA GPU"):
        load_detector("tiny-omdet-turbo", runtime="tensorrt")

    class NoHead(BaseDetector):
        name = "no-head"

    with pytest.raises(UnsupportedRuntimeError, match=r"no image head.*--runtime torch"):
        head_of(NoHead(), "onnxruntime")


class _Fails(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        raise RuntimeError("cannot trace this\nsecond line")


def test_export_failure_is_one_line_and_leaves_no_file(tmp_path: Path) -> None:
    head = ImageHead("toy", _Fails(), ("x",), ("y",), lambda n: (torch.zeros(n, 2),), {"x": 0, "y": 0})
    with pytest.raises(ExportError, match=r"toy image head failed: cannot trace this$"):
        ArtifactCache(tmp_path).get_or_build("toy", {}, ".onnx",
                                             lambda p: export_head_onnx(head, (torch.zeros(2, 2),), p))
    assert not list(tmp_path.iterdir())


def test_geometry_leaves_out_the_prompt_axes() -> None:
    head = ImageHead("toy", _Fails(), ("img", "text"), ("y",), lambda n: (), {"text": 1, "y": 0})
    a = geometry(head, (torch.zeros(1, 3, 8, 8), torch.zeros(1, 5, 4)))
    b = geometry(head, (torch.zeros(1, 3, 8, 8), torch.zeros(1, 9, 4)))
    c = geometry(head, (torch.zeros(1, 3, 8, 16), torch.zeros(1, 5, 4)))
    assert a == b != c and a[1] == ((1, -1, 4), "float32")
    assert dynamic_axes(head) == {"text": {1: "text_n"}, "y": {0: "y_n"}}
    with pytest.raises(ExportError, match="takes 2 inputs, got 1"):
        geometry(head, (torch.zeros(1),))
