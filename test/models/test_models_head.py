"""The image heads of the Grounding DINO family, OmDet-T and SAM3 (models/head.py's seam):
each head, fed the adapter's cached text side, equals the model's own full forward on the
tiny models (exactly where the computation is the same; SAM3's batched call against the
native one-concept forward within fp32 rounding), and the adapters call nothing else per
frame."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probench.models.head import ImageHead
from probench.models.zoo import load_detector

PROMPTS = ("a red backpack", "the door handle", "person")


def _frame(h: int = 90, w: int = 160) -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("name", ["tiny-grounding-dino-t", "tiny-mm-grounding-dino-t"])
def test_grounding_dino_head_equals_the_model_forward(name: str) -> None:
    det = load_detector(name)
    head = det.image_head()
    assert isinstance(head, ImageHead) and head.family == "grounding-dino"
    caps = det._encode_prompts(PROMPTS)
    enc = det.pixel_inputs([_frame()])
    calls = det.bert_cache.calls
    with torch.inference_mode():
        for cap in caps:
            inputs = det._head_inputs(enc["pixel_values"], enc.get("pixel_mask"), cap)
            logits, boxes = head.module(*inputs)
            assert det.bert_cache.calls == calls  # the head runs no BERT
            # the model's own forward from the token ids: BERT and the phrase masks computed inside
            ref = det.model(pixel_values=enc["pixel_values"], pixel_mask=enc.get("pixel_mask"), **cap.tokens)
            assert torch.equal(logits, ref.logits) and torch.equal(boxes, ref.pred_boxes)
            calls = det.bert_cache.calls


def test_grounding_dino_token_groups_rebuild_the_phrase_mask() -> None:
    from probench.models.grounding_dino import _bert_masks, _token_groups

    det = load_detector("tiny-grounding-dino-t")
    for cap in det.captions(("a cat", "x", "the long red door handle")):
        mask = _bert_masks(det.model.model, cap.tokens["input_ids"])["attention_mask"][:, 0]
        groups = _token_groups(mask)
        assert torch.equal(groups.unsqueeze(2) == groups.unsqueeze(1), mask)
        assert len(set(groups[0].tolist())) < groups.shape[1]  # phrases really are blocks
    with pytest.raises(RuntimeError, match="not block-diagonal"):
        _token_groups(torch.tensor([[[True, True], [False, True]]]))


def test_omdet_head_equals_the_model_forward_and_the_short_task_pass() -> None:
    det = load_detector("tiny-omdet-turbo")
    head = det.image_head()
    tokens = det._tokens(PROMPTS)
    pv = det.pixel_inputs([_frame()])["pixel_values"]
    with torch.inference_mode():
        language = type(det.model).get_language_embedding(det.model, **tokens)  # 77 padded positions
        boxes, logits = head.module(pv, *language)
        ref = det.model(pixel_values=pv, **tokens)
        assert torch.equal(boxes, ref.decoder_coord_logits) and torch.equal(logits, ref.decoder_class_logits)
        classes, task, task_mask = det._encode_prompts(PROMPTS)
    ref_classes, ref_task, ref_mask = language
    assert torch.equal(classes, ref_classes) and torch.equal(task_mask, ref_mask)
    # the task sentence over its own tokens: the causal tower gives the same features
    assert task.shape == ref_task.shape
    torch.testing.assert_close(task, ref_task, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["tiny-sam3", "tiny-sam3-lite"])
def test_sam3_head_runs_every_prompt_in_one_call_like_the_native_forward(name: str) -> None:
    det = load_detector(name)
    head = det.image_head()
    feats, mask = det._join_texts(list(det._encode_texts(PROMPTS)), PROMPTS)
    pv = det.pixel_inputs([_frame()])["pixel_values"]
    with torch.inference_mode():
        logits, boxes, presence, masks = head.module(pv, feats, mask)
        assert logits.shape[0] == boxes.shape[0] == presence.shape[0] == masks.shape[0] == len(PROMPTS)
        tok = det.tokenizer(list(PROMPTS), padding="max_length", truncation=True, max_length=32,
                            return_tensors="pt")
        for i in range(len(PROMPTS)):  # the model's own forward, one concept per call
            ref = det.model(pixel_values=pv, input_ids=tok["input_ids"][i : i + 1],
                            attention_mask=tok["attention_mask"][i : i + 1])
            torch.testing.assert_close(logits[i : i + 1], ref.pred_logits, rtol=0, atol=1e-5)
            torch.testing.assert_close(boxes[i : i + 1], ref.pred_boxes, rtol=0, atol=1e-5)
            torch.testing.assert_close(presence[i : i + 1], ref.presence_logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["tiny-grounding-dino-t", "tiny-omdet-turbo", "tiny-sam3"])
def test_frames_go_through_run_head_only(name: str) -> None:
    det = load_detector(name)
    calls = []
    eager = det.run_head

    def counting(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        calls.append(len(inputs))
        return eager(*inputs)

    vars(det)["run_head"] = counting
    head = det.image_head()
    dets = det.detect(_frame(), list(PROMPTS))
    assert len(dets) > 0 and calls and set(calls) == {len(head.input_names)}
    if name == "tiny-sam3":
        assert calls == [len(head.input_names)]  # all prompts in one call: no chunk loop
    ex = head.example_inputs(2)
    assert len(ex) == len(head.input_names)
    with torch.inference_mode():
        assert len(head.module(*ex)) == len(head.output_names)


def test_sam3_sets_above_a_call_run_in_bounded_calls_with_the_same_detections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call's memory grows with its prompts: sets above PROMPTS_PER_CALL run in calls of
    that many, and the frame's detections are those of one call."""
    from probench.models import sam3

    det = load_detector("tiny-sam3")
    whole = det.detect(_frame(), list(PROMPTS))
    calls = []
    eager = det.run_head

    def counting(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        calls.append(int(inputs[1].shape[0]))
        return eager(*inputs)

    vars(det)["run_head"] = counting
    monkeypatch.setattr(sam3, "PROMPTS_PER_CALL", 2)
    split = det.detect(_frame(), list(PROMPTS))
    assert calls == [2, 1]
    np.testing.assert_array_equal(split.prompt_index, whole.prompt_index)
    np.testing.assert_allclose(split.xyxy, whole.xyxy, rtol=0, atol=1e-3)
    np.testing.assert_allclose(split.scores, whole.scores, rtol=0, atol=1e-5)


# -- the compiled runtime's padding (ImageHead.pad / the default repeat-last padding) ------
PAD_ATOL = 1e-5  # the padded call's kernels see other shapes: fp32 rounding only


def _assert_real_part_equal(want: tuple[torch.Tensor, ...], got: tuple[torch.Tensor, ...]) -> None:
    """Outputs of the unpadded call and the padded call sliced back: the same shapes, -inf in
    the same places (G-DINO's masked tokens), equal elsewhere within PAD_ATOL."""
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape
        finite = torch.isfinite(w)
        assert torch.equal(finite, torch.isfinite(g))
        torch.testing.assert_close(g[finite], w[finite], rtol=0, atol=PAD_ATOL)


@pytest.mark.parametrize("name", ["tiny-grounding-dino-t", "tiny-mm-grounding-dino-t"])
def test_grounding_dino_caption_padding_leaves_the_real_tokens_outputs(name: str) -> None:
    """Masked tokens to the next token bucket change no real output; repeating the last
    token instead (the default padding) would, which is why the head pads itself."""
    from probench.models.accel.compiled import pad_prompts
    from probench.models.grounding_dino import pad_caption

    det = load_detector(name)
    head = det.image_head()
    assert head.pad is not None
    enc = det.pixel_inputs([_frame()])
    caps = det._encode_prompts(("a red backpack", "a door handle", "a chair"))  # 22 and 5 tokens
    with torch.inference_mode():
        for cap, bucket in zip(caps, (det.max_text_len, 16), strict=True):  # 24 (the limit), 16
            inputs = det._head_inputs(enc["pixel_values"], enc.get("pixel_mask"), cap)
            n = inputs[2].shape[1]
            padded = head.pad(inputs)
            assert padded is not None and padded[2].shape[1] == bucket > n
            assert all(t.shape[1] == bucket for t in padded[2:])
            groups = padded[5][0].tolist()  # padded tokens: a block each, apart from every phrase
            assert not set(groups[n:]) & set(groups[:n]) and len(set(groups[n:])) == bucket - n
            want = head.module(*inputs)
            _assert_real_part_equal(want, head.module(*padded))
            # the last token repeated instead: it joins the last phrase, the real tokens' logits move
            repeated = head.module(*pad_prompts(head, inputs, bucket))
            assert not torch.allclose(repeated[0][..., :n], want[0][..., :n], rtol=0, atol=100 * PAD_ATOL)
    # a caption above the last bucket runs eagerly
    assert pad_caption(inputs, buckets=(4,)) is None


def test_omdet_padding_of_classes_and_task_tokens_leaves_the_real_classes_outputs() -> None:
    """Classes (3 -> 4, the last repeated) and task tokens (-> a token bucket, mask 0) padded
    apart: the real classes' boxes and logits are unchanged."""
    from probench.models.accel.compiled import slice_prompts
    from probench.models.omdet import pad_classes_and_task

    det = load_detector("tiny-omdet-turbo")
    head = det.image_head()
    assert head.pad is pad_classes_and_task
    pv = det.pixel_inputs([_frame()])["pixel_values"]
    with torch.inference_mode():
        for prompts in (PROMPTS, (*PROMPTS, "a cup", "a long wooden kitchen table")):
            inputs = (pv, *det._encode_prompts(prompts))
            padded = pad_classes_and_task(inputs)
            assert padded is not None
            classes, tokens = inputs[1].shape[0], inputs[2].shape[0]
            assert padded[1].shape[0] == {3: 4, 5: 8}[classes]
            assert padded[2].shape[0] in (16, 32, 64) and padded[2].shape[0] > tokens
            assert padded[3].shape == (1, padded[2].shape[0]) and int(padded[3][0, tokens:].sum()) == 0
            got = slice_prompts(head, head.module(*padded), classes)
            _assert_real_part_equal(head.module(*inputs), got)
    too_many = (pv, inputs[1].repeat(65, 1, 1), inputs[2], inputs[3])
    assert pad_classes_and_task(too_many) is None  # above the last prompt bucket: eager


@pytest.mark.parametrize("name", ["tiny-sam3", "tiny-sam3-lite"])
def test_sam3_repeat_last_padding_leaves_the_real_prompts_outputs(name: str) -> None:
    """SAM3's prompts are a batch axis: the default padding (the last prompt repeated, 3 -> 4)
    is safe."""
    from probench.models.accel.compiled import pad_prompts, slice_prompts

    det = load_detector(name)
    head = det.image_head()
    assert head.pad is None and head.pad_prompts
    feats, mask = det._join_texts(list(det._encode_texts(PROMPTS)), PROMPTS)
    inputs = (det.pixel_inputs([_frame()])["pixel_values"], feats, mask)
    padded = pad_prompts(head, inputs, 4)
    assert padded[1].shape[0] == padded[2].shape[0] == 4
    with torch.inference_mode():
        _assert_real_part_equal(head.module(*inputs), slice_prompts(head, head.module(*padded), 3))
