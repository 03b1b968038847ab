"""Box rescaling and prompt mapping, checked exactly: each adapter's model is replaced by a
stub returning known raw outputs, so the post-processing path (the processor's own code plus
the adapter's mapping) must land them on known pixel boxes and prompt indices."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers.tiny_adapters import PROMPTS, fresh, image
from probench.models.grounding_dino import HEAD_INPUTS

H, W = 96, 160  # non-square on purpose
CENTER = [0.5, 0.5, 0.5, 0.5]  # cx, cy, w, h (normalised)
SMALL = [0.25, 0.25, 0.1, 0.1]


def _boxes_by_prompt(out) -> dict[int, np.ndarray]:
    return {int(p): out.xyxy[out.prompt_index == p] for p in np.unique(out.prompt_index)}


@pytest.mark.parametrize(
    ("name", "center_px", "small_px"),
    [
        # OWLv2 pads to a square at the bottom/right: both axes scale by max(h, w) = 160;
        # the part of a box inside the padding is clipped away.
        ("tiny-owlv2", [40, 40, 120, 96], [32, 32, 48, 48]),
        # OWL-ViT stretches to a square: x scales by w, y by h.
        ("tiny-owlvit", [40, 24, 120, 72], [32, 19.2, 48, 28.8]),
    ],
)
def test_owl_rescaling(name: str, center_px: list, small_px: list) -> None:
    det = fresh(name)
    det.set_prompts(PROMPTS)
    logits = torch.tensor([[[5.0, -5.0, -5.0], [-5.0, -5.0, 4.0]]])
    boxes = torch.tensor([[CENTER, SMALL]])
    det._forward = lambda pv, text: (logits.expand(pv.shape[0], -1, -1), boxes.expand(pv.shape[0], -1, -1))
    out = det.detect(image(H, W))
    got = _boxes_by_prompt(out)
    assert sorted(got) == [0, 2]
    np.testing.assert_allclose(got[0][0], center_px, atol=1e-3)
    np.testing.assert_allclose(got[2][0], small_px, atol=1e-3)
    np.testing.assert_allclose(sorted(out.scores), sorted(torch.sigmoid(torch.tensor([5.0, 4.0])).tolist()))


class _GDStub:
    """Stands in for the image head (``run_head``): answers each caption with query 0 on the
    caption's LAST phrase and query 1 on its first."""

    def __init__(self, det) -> None:
        self.det = det
        self.calls = 0

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        cap = next(c for c in self.det._text_state if c.hidden is inputs[HEAD_INPUTS.index("text_hidden")])
        n = self.det.max_text_len
        logits = torch.full((1, 2, n), -9.0)
        last = np.nonzero(cap.token_phrase == cap.n_phrases - 1)[0]
        first = np.nonzero(cap.token_phrase == 0)[0]
        logits[0, 0, last] = 3.0
        logits[0, 1, first] = 1.0
        boxes = torch.tensor([[CENTER, SMALL]])
        return logits, boxes


@pytest.mark.parametrize("name", ["tiny-grounding-dino-t", "tiny-mm-grounding-dino-t"])
def test_grounding_dino_rescaling_and_phrase_mapping(name: str) -> None:
    det = fresh(name)
    det.set_prompts(PROMPTS)
    assert len(det._text_state) == 1  # three short prompts fit one caption
    vars(det)["run_head"] = _GDStub(det)
    out = det.detect(image(H, W))
    got = _boxes_by_prompt(out)
    assert sorted(got) == [0, 2]
    np.testing.assert_allclose(got[2][0], [40, 24, 120, 72], atol=1e-3)  # x by w, y by h
    np.testing.assert_allclose(got[0][0], [32, 19.2, 48, 28.8], atol=1e-3)
    s = dict(zip(out.prompt_index.tolist(), out.scores.tolist(), strict=True))
    assert s[2] == pytest.approx(float(torch.sigmoid(torch.tensor(3.0))))
    assert s[0] == pytest.approx(float(torch.sigmoid(torch.tensor(1.0))))


def test_grounding_dino_chunks_long_prompt_lists() -> None:
    det = fresh("tiny-grounding-dino-t")  # tiny max_text_len is 24 tokens
    prompts = [f"red door number {'x' * (i % 3 + 1)} {i}" for i in range(9)]
    det.set_prompts(prompts)
    caps = det._text_state
    assert len(caps) > 1
    # Chunks cover every prompt once, in order, and each fits the token limit.
    assert [c.first for c in caps] == sorted(c.first for c in caps)
    assert sum(c.n_phrases for c in caps) == len(prompts)
    assert all(c.tokens["input_ids"].shape[1] <= det.max_text_len for c in caps)
    for c in caps:  # nothing was cut off: every phrase of every caption owns tokens
        assert set(range(c.n_phrases)) <= set(c.token_phrase.tolist())
    stub = _GDStub(det)
    vars(det)["run_head"] = stub
    out = det.detect(image(H, W))
    assert stub.calls == len(caps)  # one forward per caption
    expected = {c.first + c.n_phrases - 1 for c in caps} | {c.first for c in caps}
    assert set(out.prompt_index.tolist()) == expected


def test_grounding_dino_overlong_prompt_gets_its_own_truncated_caption() -> None:
    det = fresh("tiny-grounding-dino-t")
    long = " ".join(["door"] * 40)  # 40 tokens > the tiny limit of 24
    caps = det.captions(["chair", long, "table"])
    assert [(c.first, c.n_phrases) for c in caps] == [(0, 1), (1, 1), (2, 1)]
    assert caps[1].tokens["input_ids"].shape[1] == det.max_text_len
    out = det.detect(image(H, W), ["chair", long, "table"])
    assert set(out.prompt_index.tolist()) <= {0, 1, 2}


def test_grounding_dino_phrase_with_period_keeps_its_index() -> None:
    det = fresh("tiny-grounding-dino-t")
    det.set_prompts(["st. door", "person."])
    cap = det._text_state[0]
    assert cap.n_phrases == 2
    ids = cap.tokens["input_ids"][0].tolist()
    toks = det.tokenizer.convert_ids_to_tokens(ids)
    phr = cap.token_phrase[: len(ids)].tolist()
    text = det.tokenizer.convert_tokens_to_string
    assert text([t for t, p in zip(toks, phr, strict=True) if p == 0]) == "st. door"
    assert text([t for t, p in zip(toks, phr, strict=True) if p == 1]) == "person"  # final "." stripped


def test_omdet_rescaling_and_labels() -> None:
    det = fresh("tiny-omdet-turbo")
    det.set_prompts(PROMPTS)
    logits = torch.full((1, 2, 3), -6.0)
    logits[0, 0, 0] = 4.0
    logits[0, 1, 2] = 2.0
    vars(det)["run_head"] = lambda *inputs: (torch.tensor([[CENTER, SMALL]]), logits)  # boxes, class logits
    out = det.detect(image(H, W))
    got = _boxes_by_prompt(out)
    np.testing.assert_allclose(got[0][0], [40, 24, 120, 72], atol=1e-3)  # plain resize: x by w, y by h
    np.testing.assert_allclose(got[2][0], [32, 19.2, 48, 28.8], atol=1e-3)


@pytest.mark.parametrize("name", ["tiny-sam3", "tiny-sam3-lite"])
def test_sam3_rescaling_and_one_concept_per_prompt(name: str) -> None:
    det = fresh(name)
    det.set_prompts(PROMPTS)
    seen = []

    class Stub:
        def get_vision_features(self, pv):
            z = torch.zeros(1, 2, 4, 4)
            return SimpleNamespace(fpn_hidden_states=(z,), fpn_position_encoding=(z,))

        def __call__(self, vision_embeds, text_embeds, attention_mask):
            k = text_embeds.pooler_output.shape[0]
            seen.append(k)
            assert vision_embeds.fpn_hidden_states[0].shape[0] == k
            # Prompt i's best box: xyxy normalised, a different box per prompt.
            boxes = torch.tensor(
                [[[0.25, 0.25, 0.75, 0.75], [0.0, 0.0, 0.1 * (i + 1), 0.1]] for i in range(k)]
            )
            logits = torch.tensor([[3.0, -3.0]] * k)
            return SimpleNamespace(pred_logits=logits, pred_boxes=boxes, pred_masks=None,
                                   presence_logits=torch.zeros(k, 1))

    det.model = Stub()
    out = det.detect(image(H, W))
    assert sum(seen) == len(PROMPTS)
    for p in range(len(PROMPTS)):
        boxes = out.xyxy[out.prompt_index == p]
        np.testing.assert_allclose(boxes[0], [40, 24, 120, 72], atol=1e-3)
        np.testing.assert_allclose(boxes[1], [0, 0, 16 * (p + 1), 9.6], atol=1e-3)
    # score = sigmoid(logit) * sigmoid(presence) = sigmoid(3) * 0.5
    assert out.scores.max() == pytest.approx(float(torch.sigmoid(torch.tensor(3.0))) * 0.5)
