"""ONNX Runtime path of the OWL detectors: export, parity with PyTorch, the artefact cache,
runtime errors of the registry."""

from __future__ import annotations

import numpy as np
import pytest

from probench.errors import UsageError
from probench.models.accel.cache import ArtifactCache, cache_key
from probench.models.accel.errors import ExportError, RuntimeUnavailableError, UnsupportedRuntimeError
from probench.models.zoo import load_detector

PROMPTS = ["a red car", "the door", "person"]


def _image(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("name", ["tiny-owlv2", "tiny-owlvit"])
def test_onnxruntime_parity_with_pytorch(name: str, tmp_path) -> None:
    base = load_detector(name)
    ort_det = load_detector(name, runtime="onnxruntime", engine_cache=str(tmp_path))
    assert ort_det.name.endswith("@onnxruntime") and ort_det.model_info["runtime"] == "onnxruntime"
    for img in (_image(90, 170), _image(120, 64, seed=1)):
        a, b = base.detect(img, PROMPTS), ort_det.detect(img, PROMPTS)
        assert len(a) == len(b) > 0
        side = max(img.shape[:2])
        np.testing.assert_allclose(b.xyxy, a.xyxy, atol=1e-3 * side)  # px-relative 1e-3
        np.testing.assert_allclose(b.scores, a.scores, atol=1e-4)
        np.testing.assert_array_equal(b.prompt_index, a.prompt_index)
    # a different number of prompts runs on the same file (dynamic query axis)
    c = ort_det.detect(_image(50, 50), ["just one"])
    assert set(c.prompt_index.tolist()) == {0}
    assert ort_det.text_encoder_calls == 2
    assert len(list(tmp_path.glob("owl-*.onnx"))) == 1


def test_onnx_file_cached_by_weights(tmp_path) -> None:
    from probench.models.accel.ort import to_onnxruntime

    cache = ArtifactCache(tmp_path)
    base = load_detector("tiny-owlv2")
    first = to_onnxruntime(base, cache)
    second = to_onnxruntime(base, cache)
    assert cache.builds == 1 and first.onnx_path == second.onnx_path
    import torch

    with torch.no_grad():
        base.model.box_head.dense0.bias.add_(0.5)  # other weights: another file
    third = to_onnxruntime(base, cache)
    assert cache.builds == 2 and third.onnx_path != first.onnx_path


def test_cache_key_and_atomic_build(tmp_path) -> None:
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    assert cache_key({"prompts": ["x", "y"]}) != cache_key({"prompts": ["y", "x"]})
    cache = ArtifactCache(tmp_path)

    def broken(tmp):
        tmp.write_bytes(b"half")
        raise RuntimeError("crash mid-build")

    with pytest.raises(RuntimeError):
        cache.get_or_build("k", {"x": 1}, ".bin", broken)
    assert list(tmp_path.iterdir()) == []  # no partial file left, under any name
    with pytest.raises(ExportError, match="no file"):
        cache.get_or_build("k", {"x": 1}, ".bin", lambda tmp: None)
    path = cache.get_or_build("k", {"x": 1}, ".bin", lambda tmp: tmp.write_bytes(b"ok"))
    assert path.read_bytes() == b"ok" and path.with_suffix(".bin.json").is_file()
    assert cache.get_or_build("k", {"x": 1}, ".bin", lambda tmp: pytest.fail("rebuilt")) == path


def test_zoo_load_detector_forwards_runtime() -> None:
    with pytest.raises(RuntimeUnavailableError, match="NVIDIA GPU"):
        load_detector("tiny-owlv2", runtime="tensorrt")
    with pytest.raises(UsageError, match="runtime must be one of"):
        load_detector("tiny-owlv2", runtime="tflite")


def test_runtime_errors_are_clear() -> None:
    with pytest.raises(UsageError, match="runtime must be one of"):
        load_detector("tiny-owlv2", runtime="openvino")
    with pytest.raises(RuntimeUnavailableError, match="NVIDIA GPU"):
        load_detector("tiny-owlv2", runtime="tensorrt")
    with pytest.raises(UnsupportedRuntimeError, match="Python only"):
        load_detector("test-instant", runtime="onnxruntime")
    with pytest.raises(UnsupportedRuntimeError, match="no onnxruntime path"):
        load_detector("detic", runtime="onnxruntime")  # detectron2: PyTorch only
    with pytest.raises(UsageError, match="fp32"):
        load_detector("tiny-owlv2", runtime="onnxruntime", precision="fp16")
