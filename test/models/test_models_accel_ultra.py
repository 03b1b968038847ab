"""YOLO-World/YOLOE through ultralytics' exporters, vocabulary baked in: the real ONNX
export (runs here) matches PyTorch; the engine logic (one file per prompt set, rebuilt only
for an unseen set, reloaded on change) is checked with a fake exporter and loader."""

from __future__ import annotations

import numpy as np
import pytest

from probench.models.accel.cache import ArtifactCache
from probench.models.accel.errors import ExportError
from probench.models.accel.ultra_export import UltralyticsExportedDetector, to_exported
from probench.models.zoo import load_detector

PROMPTS = ["a red car", "person", "the door"]
_BASE: dict = {}


def _base():
    if "d" not in _BASE:
        _BASE["d"] = load_detector("tiny-yoloe-s")
    return _BASE["d"]


def _image(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _matched_fraction(ref, got, top: int = 40) -> float:
    """Share of ``got``'s best boxes that ``ref`` has too (same prompt, box within 0.05 px,
    score within 1e-3). Boxes near the cut-off may swap between runtimes, the best ones not."""
    order = np.argsort(-got.scores)[:top]
    hits = 0
    for i in order:
        same = (ref.prompt_index == got.prompt_index[i]) & (np.abs(ref.scores - got.scores[i]) < 1e-3)
        close = np.abs(ref.xyxy - got.xyxy[i]).max(axis=1) < 0.05
        hits += bool(np.any(same & close))
    return hits / max(len(order), 1)


@pytest.mark.slow
def test_real_onnx_export_matches_pytorch(tmp_path) -> None:
    base = _base()
    det = to_exported(base, "onnx", ArtifactCache(tmp_path))
    img = _image(128, 128)  # square at the export size: both runtimes see the same tensor
    got = det.detect(img, PROMPTS)
    ref = base.detect(img, PROMPTS)
    assert det.artifact is not None and det.artifact.suffix == ".onnx"
    assert len(got) > 10
    assert _matched_fraction(ref, got) >= 0.95
    assert len(list(tmp_path.glob("*.onnx"))) == 1  # re-export per prompt set: see the next test


def test_engine_rebuilt_only_for_new_prompt_sets(tmp_path) -> None:
    base = _base()
    exported, loaded = [], []

    def fake_exporter(b, out, fmt, max_det):
        assert fmt == "engine" and max_det == 100 * len(b.prompts)
        exported.append(b.prompts)
        out.write_bytes(("engine:" + ";".join(b.prompts)).encode())

    class FakeEngineModel:
        """Stands in for YOLO("x.engine"): answers with the PyTorch model, whose vocabulary
        the detector has just set to the engine's."""

        def __init__(self, path):
            self.path = path

        def predict(self, *args, **kwargs):
            return base.model.predict(*args, **kwargs)

    def fake_loader(path, b):
        loaded.append(path)
        return FakeEngineModel(path)

    cache = ArtifactCache(tmp_path)
    det = UltralyticsExportedDetector(base, "engine", cache, exporter=fake_exporter, loader=fake_loader)
    img = _image(96, 160)
    a1 = det.detect(img, PROMPTS)
    det.detect(img, PROMPTS)  # same prompts: nothing rebuilt or reloaded
    assert len(exported) == 1 and len(loaded) == 1
    det.detect(img, ["a cone"])
    assert len(exported) == 2 and len(loaded) == 2
    a2 = det.detect(img, PROMPTS)  # back to the first set: cached engine, reloaded
    assert len(exported) == 2 and len(loaded) == 3 and loaded[2] == loaded[0]
    np.testing.assert_allclose(a1.xyxy, a2.xyxy)
    assert loaded[0].read_bytes() == b"engine:a red car;person;the door"
    parts = det.key_parts(tuple(PROMPTS))
    assert parts["prompts"] == PROMPTS and parts["format"] == "engine" and "gpu" in parts
    assert det.name == "tiny-yoloe-s@tensorrt"


def test_export_errors_are_clear(tmp_path) -> None:
    with pytest.raises(ExportError, match="unknown export format"):
        UltralyticsExportedDetector(_base(), "tflite", ArtifactCache(tmp_path))
    with pytest.raises(ExportError, match="not an ultralytics detector"):
        to_exported(load_detector("test-instant"), "onnx", ArtifactCache(tmp_path))
