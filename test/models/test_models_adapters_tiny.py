"""Every transformers adapter, through its tiny model: the full path (processor, forward,
post-processing, rescaling) on non-square synthetic images."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.raw_outputs import assert_raw_in_range, capture_raw
from helpers.tiny_adapters import PROMPTS, TINY, digest, fresh, image, shared, text_tower
from probench.models.errors import ImageInputError, PromptError


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("shape", [(96, 160), (160, 96)])
def test_outputs_are_valid(name: str, shape: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    det = shared(name)
    h, w = shape
    raw = capture_raw(monkeypatch)
    out = det.detect(image(h, w), PROMPTS)
    assert_raw_in_range(raw, h, w)  # before from_arrays clips: the checks below cannot fail there
    assert len(out) > 0
    assert out.xyxy.shape == (len(out), 4)
    assert (out.xyxy[:, [0, 2]] >= 0).all() and (out.xyxy[:, [0, 2]] <= w).all()
    assert (out.xyxy[:, [1, 3]] >= 0).all() and (out.xyxy[:, [1, 3]] <= h).all()
    assert (out.xyxy[:, 2] >= out.xyxy[:, 0]).all() and (out.xyxy[:, 3] >= out.xyxy[:, 1]).all()
    assert (out.scores >= 0).all() and (out.scores <= 1).all()
    assert set(out.prompt_index.tolist()) <= set(range(len(PROMPTS)))
    for p in range(len(PROMPTS)):  # at most 100 per prompt, sorted by score within a prompt
        s = out.scores[out.prompt_index == p]
        assert len(s) <= 100
        assert (np.diff(s) <= 1e-12).all()
    assert {"preprocess", "forward", "postprocess", "total"} <= set(out.timings_ms)
    assert all(v >= 0 for v in out.timings_ms.values())


@pytest.mark.parametrize("name", TINY)
def test_deterministic_and_text_encoded_once_per_prompt_set(name: str) -> None:
    det = fresh(name)
    img = image()
    # A second build gives the same weights, hence the same answers.
    assert digest(det.detect(img, PROMPTS)) == digest(shared(name).detect(img, PROMPTS))
    assert det.text_encoder_calls == 1
    calls = []
    hook = text_tower(det).register_forward_hook(lambda *a: calls.append(1))
    try:
        det.detect(img)
        det.detect(img, list(PROMPTS))  # the same list again: cache hit
        det.set_prompts(PROMPTS)
        det.detect_batch([img, img])
        assert calls == [], "text tower ran again for an unchanged prompt set"
        assert det.text_encoder_calls == 1
        det.detect(img, ["chair", "table"])  # a new set re-encodes
        assert det.text_encoder_calls == 2
        assert len(calls) >= 1
    finally:
        hook.remove()


@pytest.mark.parametrize("name", TINY)
def test_prompt_change_changes_answers(name: str) -> None:
    det = shared(name)
    out = det.detect(image(), ["chair"])
    assert set(out.prompt_index.tolist()) == {0}
    out2 = det.detect(image(), ["chair", "a person near the door"])
    assert set(out2.prompt_index.tolist()) <= {0, 1}


@pytest.mark.parametrize("name", ["tiny-owlv2", "tiny-grounding-dino-t", "tiny-sam3"])
def test_bad_input_is_a_clear_error(name: str) -> None:
    det = shared(name)
    with pytest.raises(PromptError):
        det.detect(image(), [])
    with pytest.raises(PromptError):
        det.detect(image(), "a door")
    with pytest.raises(PromptError):
        det.detect(image(), ["door", "  "])
    with pytest.raises(ImageInputError):
        det.detect(image().astype(np.float32), PROMPTS)
    with pytest.raises(ImageInputError):
        det.detect(image()[:, :, 0], PROMPTS)
    with pytest.raises(ImageInputError):
        det.detect(np.zeros((0, 10, 3), np.uint8), PROMPTS)


@pytest.mark.parametrize("name", ["tiny-owlv2", "tiny-owlvit"])
def test_owl_batch_equals_single(name: str) -> None:
    det = shared(name)
    a, b = image(seed=1), image(96, 160, seed=2)
    batch = det.detect_batch([a, b], PROMPTS)
    for img, got in zip([a, b], batch, strict=True):
        one = det.detect(img)
        np.testing.assert_allclose(got.xyxy, one.xyxy, atol=1e-3)
        np.testing.assert_allclose(got.scores, one.scores, atol=1e-5)


def test_score_threshold_filters() -> None:
    from probench.models import load_detector

    det = load_detector("tiny-owlv2", score_threshold=0.5)
    out = det.detect(image(), PROMPTS)
    ref = shared("tiny-owlv2").detect(image(), PROMPTS)
    assert (out.scores >= 0.5).all()
    assert len(out) == int((ref.scores >= 0.5).sum())


def test_sam3_masks_on_request() -> None:
    det = fresh("tiny-sam3")
    out = det.detect(image(), PROMPTS)
    assert out.masks is None
    det.return_masks = True
    out = det.detect(image(), PROMPTS)
    assert out.masks is not None and out.masks.shape == (len(out), 96, 160)
    assert out.masks.dtype == bool
