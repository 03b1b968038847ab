"""Shared helpers for the transformers adapter tests (not a test module).

Tiny models are cached per process: building one costs ~0.1-1 s after the first
transformers import, and the tests only read from them (each test that mutates a detector
builds its own).
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

# One tiny name per adapter code path (owlv2-l/-b share OWLv2's path, G-DINO-S-T/T share
# Grounding DINO's, LLMDet/MM-GD-L/T share MM Grounding DINO's).
TINY = [
    "tiny-owlv2",
    "tiny-owlvit",
    "tiny-grounding-dino-t",
    "tiny-mm-grounding-dino-t",
    "tiny-omdet-turbo",
    "tiny-sam3",
    "tiny-sam3-lite",
]

PROMPTS = ["a red door", "person", "fire extinguisher"]


def image(h: int = 96, w: int = 160, seed: int = 0) -> np.ndarray:
    """A non-square synthetic RGB image with some structure (gradient + blocks)."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 60, (h, w, 3), dtype=np.uint8)
    img[: h // 2, : w // 3] += np.uint8(150)
    img[h // 3 :, w // 2 :, 1] += np.uint8(120)
    return img


@functools.cache
def shared(name: str):
    """A read-only tiny detector shared by the tests of this process."""
    from probench.models import load_detector

    return load_detector(name)


def fresh(name: str):
    from probench.models import load_detector

    return load_detector(name)


def digest(dets) -> str:
    """A hash of boxes/scores/prompt indices rounded to 1e-4 (stable across processes)."""
    h = hashlib.sha256()
    h.update(np.round(dets.xyxy, 4).tobytes())
    h.update(np.round(dets.scores, 4).tobytes())
    h.update(dets.prompt_index.tobytes())
    return h.hexdigest()


def text_tower(det):
    """The module that encodes text in each adapter (to count its calls with a hook)."""
    model = det.model
    if hasattr(model, "owlv2"):
        return model.owlv2.text_model
    if hasattr(model, "owlvit"):
        return model.owlvit.text_model
    if hasattr(model, "language_backbone"):
        return model.language_backbone
    if hasattr(model, "text_encoder"):
        return model.text_encoder
    # Grounding DINO family: BERT's embeddings run only when the cache misses.
    return model.model.text_backbone.embeddings
