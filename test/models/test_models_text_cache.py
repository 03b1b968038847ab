"""The detectors' text-side LRU (BaseDetector): per-prompt and per-set, counted; and every
adapter's text side as its spec declares it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probench.detections import Detections
from probench.models.base import BaseDetector
from probench.models.zoo import load_detector, resolve, tiny_names


class _Counting(BaseDetector):
    name = "counting"

    def __init__(self, kind: str, size: int = 512) -> None:
        super().__init__()
        self.text_cache = kind  # type: ignore[assignment]
        self.text_cache_size = size
        self.encoded: list[tuple[str, ...]] = []

    def _encode_prompts(self, prompts: tuple[str, ...]) -> object:
        self.encoded.append(prompts)
        return prompts

    def _encode_texts(self, prompts: tuple[str, ...]) -> list[object]:
        self.encoded.append(prompts)
        return [f"emb:{p}" for p in prompts]

    def _join_texts(self, items: list[object], prompts: tuple[str, ...]) -> object:
        return tuple(items)

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        self.seen_state = text_state
        return Detections.empty({"forward": 0.0})


IMG = np.zeros((4, 4, 3), np.uint8)


def test_per_prompt_cache_encodes_each_prompt_once() -> None:
    det = _Counting("per-prompt")
    det.detect(IMG, ["a", "b"])
    det.detect(IMG, ["c"])
    assert det.text_encoder_calls == 2
    # a new combination of known prompts: no encoder call, the state joined in order
    dets = det.detect(IMG, ["c", "a", "b"])
    assert det.text_encoder_calls == 2 and det.seen_state == ("emb:c", "emb:a", "emb:b")
    assert dets.timings_ms["text"] >= 0.0
    det.detect(IMG, ["a", "d"])  # only the unknown prompt goes to the encoder
    assert det.encoded[-1] == ("d",) and det.text_encoder_calls == 3
    stats = det.text_cache_stats()
    assert stats["misses"] == 4 and stats["hits"] == 4 and stats["evictions"] == 0


def test_fixed_encoder_batches_are_padded_and_count_one_event() -> None:
    det = _Counting("per-prompt")
    det.text_batch = 3
    det.detect(IMG, ["a", "b", "c", "d"])
    assert det.encoded == [("a", "b", "c"), ("d", "d", "d")]  # the last batch padded
    assert det.text_encoder_calls == 1 and det.text_cache_stats()["misses"] == 4
    assert det.seen_state == ("emb:a", "emb:b", "emb:c", "emb:d")
    assert len(det._text_lru) == 4  # padding rows are not cached twice


def test_per_set_cache_keys_whole_sets() -> None:
    det = _Counting("per-set")
    for prompts in (["a", "b"], ["c"], ["a", "b"], ["c"]):
        det.detect(IMG, prompts)
    assert det.text_encoder_calls == 2
    det.detect(IMG, ["b", "a"])  # another set (order matters for a joint caption)
    assert det.text_encoder_calls == 3


def test_lru_evicts_the_oldest_and_counts_it() -> None:
    det = _Counting("per-prompt", size=2)
    det.detect(IMG, ["a"])
    det.detect(IMG, ["b"])
    det.detect(IMG, ["a"])  # a is now the newest
    det.detect(IMG, ["c"])  # evicts b
    assert det.text_cache_stats()["evictions"] == 1
    det.detect(IMG, ["a"])
    assert det.text_encoder_calls == 3  # a stayed
    det.detect(IMG, ["b"])
    assert det.text_encoder_calls == 4  # b was evicted


def test_unchanged_prompts_cost_no_text_time() -> None:
    det = _Counting("per-prompt")
    det.detect(IMG, ["a"])
    dets = det.detect(IMG, ["a"])
    assert dets.timings_ms["text"] == 0.0 and det.text_cache_stats()["hits"] == 0


# -- the adapters -------------------------------------------------------------------------------
PER_PROMPT_TINY = [
    "tiny-owlv2", "tiny-owlvit", "tiny-sam3", "tiny-sam3-lite", "tiny-yolo-world-s", "tiny-yoloe-s",
]
WORDS = ["a red door", "person", "fire extinguisher", "chair", "the cup on the left"]


def _frame() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (96, 160, 3), dtype=np.uint8)


@pytest.mark.parametrize("name", sorted(set(tiny_names()) - {"tiny-owlv2"}))
def test_adapter_implements_what_its_spec_declares(name: str) -> None:
    spec, _ = resolve(name)
    det = load_detector(name)
    assert det.text_cache == spec.capabilities.text_cache, name
    if det.text_cache == "per-prompt":  # the two hooks exist (not the base's NotImplementedError)
        assert type(det)._encode_texts is not BaseDetector._encode_texts
        assert type(det)._join_texts is not BaseDetector._join_texts
    else:
        assert type(det)._encode_prompts is not BaseDetector._encode_prompts


def _count_encoder(det) -> list[int]:
    """A list that grows by one per text-encoder forward (a hook on the adapter's tower)."""
    calls: list[int] = []
    if hasattr(det, "text_encoder") and callable(det.text_encoder):  # ultralytics
        inner = det.text_encoder

        def counted(prompts):
            calls.append(1)
            return inner(prompts)

        det.text_encoder = counted
        return calls
    from helpers.tiny_adapters import text_tower

    text_tower(det).register_forward_hook(lambda *a: calls.append(1))
    return calls


@pytest.mark.parametrize("name", PER_PROMPT_TINY)
def test_new_combination_of_known_prompts_costs_no_encoder_call(name: str) -> None:
    det = load_detector(name)
    calls = _count_encoder(det)
    frame = _frame()
    for prompts in (WORDS[:2], WORDS[2:4], WORDS[4:]):  # every prompt seen once
        det.detect(frame, prompts)
    seen_calls, seen_forwards = det.text_encoder_calls, len(calls)
    combination = [WORDS[4], WORDS[0], WORDS[3]]  # never asked as a set
    out = det.detect(frame, combination)
    assert det.text_encoder_calls == seen_calls and len(calls) == seen_forwards
    stats = det.text_cache_stats()
    assert stats["kind"] == "per-prompt" and stats["hits"] >= 3 and stats["misses"] == len(WORDS)
    # the joined state answers as a detector that encoded exactly this set
    fresh = load_detector(name).detect(frame, combination)
    np.testing.assert_allclose(out.xyxy, fresh.xyxy, atol=1e-3)
    np.testing.assert_allclose(out.scores, fresh.scores, atol=1e-5)
    np.testing.assert_array_equal(out.prompt_index, fresh.prompt_index)


@pytest.mark.parametrize("name", ["tiny-owlv2", "tiny-sam3", "tiny-yoloe-s"])
def test_a_prompts_embedding_does_not_depend_on_its_batch(name: str) -> None:
    """Fixed-size encoder batches: encoding prompts together or one by one gives the same
    bits, so a resumed run reproduces a fresh one exactly."""
    together, one_by_one = load_detector(name), load_detector(name)
    together.set_prompts(WORDS)
    for word in WORDS:
        one_by_one.set_prompts([word])
    one_by_one.set_prompts(WORDS)
    a, b = together._text_state, one_by_one._text_state
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,), strict=True):
        assert torch.equal(x, y)


@pytest.mark.parametrize("name", ["tiny-grounding-dino-t", "tiny-mm-grounding-dino-t"])
def test_grounding_dino_cached_set_runs_no_bert(name: str) -> None:
    det = load_detector(name)
    frame = _frame()
    first = det.detect(frame, WORDS[:3])
    det.detect(frame, WORDS[3:])
    runs = det.bert_cache.calls
    again = det.detect(frame, WORDS[:3])  # back to a set still in the LRU
    assert det.bert_cache.calls == runs and det.text_cache_stats()["hits"] == 1
    np.testing.assert_array_equal(again.xyxy, first.xyxy)
    np.testing.assert_array_equal(again.scores, first.scores)


def test_omdet_new_combination_encodes_only_its_task_sentence() -> None:
    det = load_detector("tiny-omdet-turbo")
    encoded: list[tuple[int, int]] = []  # (rows, tokens) of each CLIP text tower pass
    det.model.language_backbone.model.register_forward_hook(
        lambda m, args, out: encoded.append(tuple(args[0].shape))
    )
    frame = _frame()
    det.detect(frame, WORDS[:3])
    det.detect(frame, WORDS[3:])
    encoded.clear()
    det.detect(frame, [WORDS[4], WORDS[0]])  # known classes, new set
    # one pass: the task sentence, over its own tokens (not 77); every class embedding was cached
    assert len(encoded) == 1 and encoded[0][0] == 1 and encoded[0][1] < 77
    det.detect(frame)
    assert len(encoded) == 1  # frames run no text encoder
