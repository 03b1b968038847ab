"""Ultralytics adapters (YOLO-World, YOLOE) on their tiny variants: real architectures,
seeded random weights, hash text encoder. One build per model per module (builds cost ~1 s)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.raw_outputs import assert_raw_in_range, capture_raw
from probench.errors import UsageError
from probench.models.errors import ImageInputError, PromptError, WeightsNotFoundError
from probench.models.zoo import load_detector, tiny_names

PROMPTS = ["a red car", "person", "the door on the left"]
TINY = ["tiny-yolo-world-s", "tiny-yoloe-s"]


def _image(h: int, w: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    img[h // 4 : h // 2, w // 3 : w // 2] = (220, 30, 30)  # a structured patch, not only noise
    return img


_BUILT: dict = {}  # one build per model for the whole module


def _built(name: str):
    if name not in _BUILT:
        _BUILT[name] = load_detector(name)
    return _BUILT[name]


@pytest.fixture(params=TINY)
def det(request: pytest.FixtureRequest):
    d = _built(request.param)
    d.set_prompts(PROMPTS)
    return d


def test_tiny_names_listed() -> None:
    names = set(tiny_names())
    for n in ("tiny-yolo-world-s", "tiny-yolo-world-x", "tiny-yoloe-s", "tiny-yoloe-x"):
        assert n in names


def test_detections_valid_on_non_square_image(det, monkeypatch: pytest.MonkeyPatch) -> None:
    h, w = 90, 170
    raw = capture_raw(monkeypatch)
    out = det.detect(_image(h, w))
    assert_raw_in_range(raw, h, w)  # before from_arrays clips: the checks below cannot fail there
    assert len(out) > 0, "tiny model must produce boxes (BatchNorm calibration)"
    assert out.xyxy.shape == (len(out), 4)
    assert np.all(out.xyxy[:, 0] >= 0) and np.all(out.xyxy[:, 2] <= w)
    assert np.all(out.xyxy[:, 1] >= 0) and np.all(out.xyxy[:, 3] <= h)
    assert np.all(out.xyxy[:, 2] >= out.xyxy[:, 0]) and np.all(out.xyxy[:, 3] >= out.xyxy[:, 1])
    assert out.scores.min() >= 0.0 and out.scores.max() <= 1.0
    assert set(out.prompt_index.tolist()) <= set(range(len(PROMPTS)))
    assert np.bincount(out.prompt_index).max() <= 100
    # some box reaches beyond the inference size (128 px): boxes are in original pixels
    assert out.xyxy[:, 2].max() > 128
    for stage in ("preprocess", "forward", "postprocess", "total"):
        assert out.timings_ms[stage] >= 0.0
    assert out.timings_ms["total"] >= out.timings_ms["forward"] > 0.0


def test_boxes_scale_with_the_image(det) -> None:
    """An image and its exact 2x (nearest) enlargement letterbox to the same input tensor,
    so every box of the enlargement must be exactly twice the box of the original."""
    small = _image(64, 128, seed=3)
    big = np.repeat(np.repeat(small, 2, axis=0), 2, axis=1)
    a, b = det.detect(small), det.detect(big)
    assert len(a) == len(b) > 0
    np.testing.assert_allclose(b.xyxy, 2.0 * a.xyxy, atol=1e-2)
    np.testing.assert_allclose(b.scores, a.scores, atol=1e-5)
    np.testing.assert_array_equal(b.prompt_index, a.prompt_index)


def test_text_side_encoded_once_per_prompt(det) -> None:
    calls = det.text_encoder_calls
    img = _image(60, 80)
    first = det.detect(img, PROMPTS)
    det.detect(img)
    det.set_prompts(list(PROMPTS))
    assert det.text_encoder_calls == calls
    det.set_prompts(["something else"])
    assert det.text_encoder_calls == calls + 1
    out = det.detect(img)
    assert set(out.prompt_index.tolist()) <= {0}
    # back to known prompts: the per-prompt cache answers, the vocabulary is applied again
    again = det.detect(img, PROMPTS)
    assert det.text_encoder_calls == calls + 1
    np.testing.assert_array_equal(again.xyxy, first.xyxy)
    np.testing.assert_array_equal(again.scores, first.scores)


def test_batch_matches_single(det) -> None:
    # same size: ultralytics letterboxes a batch of mixed sizes to a common square instead
    imgs = [_image(70, 110, seed=1), _image(70, 110, seed=2)]
    batch = det.detect_batch(imgs, PROMPTS)
    for im, got in zip(imgs, batch, strict=True):
        one = det.detect(im)
        # batched convolutions round differently: equal to a few thousandths of a pixel
        np.testing.assert_allclose(got.xyxy, one.xyxy, atol=5e-3)
        np.testing.assert_allclose(got.scores, one.scores, atol=1e-3)


def test_bad_inputs(det) -> None:
    with pytest.raises(ImageInputError):
        det.detect(np.zeros((10, 10), np.uint8))
    with pytest.raises(ImageInputError):
        det.detect(np.zeros((10, 10, 3), np.float32))
    with pytest.raises(PromptError):
        det.set_prompts(["ok", "  "])
    with pytest.raises(PromptError):
        det.set_prompts("a single string")


def test_deterministic_across_builds() -> None:
    img = _image(100, 150, seed=5)
    outs = [d.detect(img, PROMPTS) for d in (_built("tiny-yoloe-s"), load_detector("tiny-yoloe-s"))]
    assert len(outs[0]) > 0
    np.testing.assert_array_equal(outs[0].xyxy, outs[1].xyxy)
    np.testing.assert_array_equal(outs[0].scores, outs[1].scores)


def test_hash_text_encoder_is_per_prompt() -> None:
    from probench.models.ultra_text import HashTextEncoder

    enc = HashTextEncoder(16)
    both = enc(["a", "b"])
    assert tuple(both.shape) == (1, 2, 16)
    np.testing.assert_array_equal(enc(["b"])[0, 0].numpy(), both[0, 1].numpy())
    np.testing.assert_allclose(both.norm(dim=-1).numpy(), 1.0, rtol=1e-5)
    assert not np.allclose(both[0, 0].numpy(), both[0, 1].numpy())


def test_cap_per_prompt() -> None:
    from probench.models.hf_common import cap_per_prompt

    scores = np.array([0.1, 0.9, 0.5, 0.7, 0.3])
    cls = np.array([0, 0, 1, 0, 1])
    keep = cap_per_prompt(scores, cls, 2)
    assert keep.tolist() == [1, 3, 2, 4]


def test_offline_and_no_autoinstall() -> None:
    from probench.models.ultra.weights import import_ultralytics

    import_ultralytics()
    import ultralytics.utils as uutils
    from ultralytics.utils import checks

    assert checks.AUTOINSTALL is False and checks.ONLINE is False and uutils.ONLINE is False


def test_real_weights_missing_is_clear(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WeightsNotFoundError, match=r"yolov8s-worldv2\.pt"):
        load_detector("yolo-world-s", weights=str(tmp_path))
    with pytest.raises(WeightsNotFoundError, match="no such file"):
        load_detector("yoloe-s", weights=str(tmp_path / "nope.pt"))


def test_text_encoder_missing_is_clear(tmp_path) -> None:
    from types import SimpleNamespace

    from probench.models.ultra.weights import real_text_encoder

    model = SimpleNamespace(model=SimpleNamespace(text_model="mobileclip2:b"))
    with pytest.raises(WeightsNotFoundError, match=r"mobileclip2_b\.ts"):
        real_text_encoder(model, "yoloe", tmp_path, str(tmp_path), "cpu")


def test_fp16_on_cpu_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="fp16"):
        load_detector("tiny-yoloe-s", precision="fp16")


def test_real_build_path_with_a_local_checkpoint(tmp_path, monkeypatch) -> None:
    """build() on a real ultralytics checkpoint file (a tiny model saved by ultralytics,
    loaded with restricted unpickling), up to the CLIP text encoder, which is not here."""
    from probench.models.ultra import adapter
    from probench.models.ultra_text import HashTextEncoder

    monkeypatch.chdir(tmp_path)
    _built("tiny-yolo-world-s").model.save(str(tmp_path / "yolov8s-worldv2.pt"))
    with pytest.raises(WeightsNotFoundError, match=r"ViT-B-32\.pt"):
        load_detector("yolo-world-s", weights=str(tmp_path))
    (tmp_path / "ViT-B-32.pt").write_bytes(b"not really CLIP")
    from probench.models.errors import BackendUnavailableError

    try:
        import clip  # noqa: F401
    except ImportError:
        with pytest.raises(BackendUnavailableError, match="CLIP"):
            load_detector("yolo-world-s", weights=str(tmp_path))
    # with a stand-in text encoder the rest of the real path runs end to end
    monkeypatch.setattr(adapter, "real_text_encoder", lambda model, kind, *a: HashTextEncoder(512))
    det = load_detector("yolo-world-s", weights=str(tmp_path / "yolov8s-worldv2.pt"))
    assert det.model_info["random_weights"] is False
    assert det.model_info["weights_source"].endswith("yolov8s-worldv2.pt")
    out = det.detect(_image(100, 140), PROMPTS)
    assert det.imgsz == 640 and np.all(out.xyxy[:, 2] <= 140)


@pytest.mark.parametrize("name", TINY)
def test_vocabulary_switch_needs_no_rebuild(name: str) -> None:
    """A prompt change applies the cached embeddings to the model in place: no predictor
    is built, and the answers equal those of a fresh detector asked the same prompts."""
    det = _built(name)
    img = _image(90, 170, seed=7)
    det.set_prompts(PROMPTS)
    det.set_prompts(["x", "y"])
    det.set_prompts(list(reversed(PROMPTS)))  # a new combination of known prompts
    assert det.model.predictor is None
    switched = det.detect(img)
    fresh = load_detector(name).detect(img, list(reversed(PROMPTS)))
    assert len(switched) == len(fresh) > 0
    np.testing.assert_allclose(switched.xyxy, fresh.xyxy, atol=1e-3)
    np.testing.assert_allclose(switched.scores, fresh.scores, atol=1e-5)
    np.testing.assert_array_equal(switched.prompt_index, fresh.prompt_index)


def test_weights_present_is_light(tmp_path, monkeypatch) -> None:
    from probench.models.ultra.weights import weights_present
    from probench.models.zoo import ZOO

    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text('{"weights_dir": "%s"}' % (tmp_path / "w"))
    monkeypatch.setenv("YOLO_CONFIG_DIR", str(cfg))
    monkeypatch.chdir(tmp_path)
    spec = ZOO["yoloe-s"]
    assert not weights_present(spec)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "yoloe-26s-seg.pt").write_bytes(b"x")
    assert weights_present(spec)
