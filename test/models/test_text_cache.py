"""The detectors' text-side LRU (BaseDetector): per-prompt and per-set, counted."""

from __future__ import annotations

import numpy as np

from probench.detections import Detections
from probench.models.base import BaseDetector


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
