"""A tiny detector on probench's documented detector interface
(:class:`probench.models.base.BaseDetector`): it boxes the pixels whose colour a prompt
names ("the red door" -> the red pixels), one box per prompt, scored by how much of the
image has that colour. No learning; it shows every piece a real adapter has: the factory,
a per-prompt text side (cached by the base class) and ``_run``."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from probench.detections import Detections
from probench.errors import UsageError
from probench.models.base import BaseDetector
from probench.models.spec import ModelSpec

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 30, 30), "green": (30, 160, 50), "blue": (30, 60, 200), "yellow": (220, 210, 40),
    "orange": (240, 140, 20), "white": (240, 240, 240), "black": (15, 15, 15), "grey": (128, 128, 128),
    "gray": (128, 128, 128), "brown": (120, 75, 35), "purple": (120, 40, 150), "pink": (240, 150, 180),
}
MAX_DISTANCE = 80.0  # RGB distance within which a pixel "has" the colour


class ColourDetector(BaseDetector):
    """One box per prompt that names a colour: the extent of the pixels of that colour."""

    name = "example-colour"
    text_cache = "per-prompt"

    def _encode_texts(self, prompts: tuple[str, ...]) -> Sequence[object]:
        # The "text encoder": the first colour word of each prompt (None: no colour named).
        out: list[object] = []
        for p in prompts:
            words = [w.strip(".,;:!?") for w in p.lower().split()]
            out.append(next((COLOURS[w] for w in words if w in COLOURS), None))
        return out

    def _join_texts(self, items: list[object], prompts: tuple[str, ...]) -> object:
        return items

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        t0 = time.perf_counter()
        pixels = np.asarray(image, dtype=np.float32)
        h, w = pixels.shape[:2]
        boxes, scores, index = [], [], []
        for i, rgb in enumerate(text_state if isinstance(text_state, list) else []):
            if rgb is None:
                continue
            near = np.linalg.norm(pixels - np.asarray(rgb, np.float32), axis=2) < MAX_DISTANCE
            if not near.any():
                continue
            rows, cols = np.flatnonzero(near.any(axis=1)), np.flatnonzero(near.any(axis=0))
            boxes.append([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1])
            scores.append(float(near.mean()) ** 0.5)
            index.append(i)
        ms = (time.perf_counter() - t0) * 1000.0
        return Detections.from_arrays(
            np.asarray(boxes, np.float64).reshape(-1, 4), scores, index, image_size=(h, w),
            timings_ms={"preprocess": 0.0, "forward": ms, "postprocess": 0.0},
        )


def build(
    spec: ModelSpec, *, device: str, precision: str, score_threshold: float, weights: str | None,
    random_weights: bool, preprocess: str,
) -> ColourDetector:
    """The zoo's ``factory`` signature (docs/MODELS.md)."""
    if weights or random_weights:
        raise UsageError(f"{spec.name} has no weights: it takes neither --weights nor --random-weights")
    if device != "cpu" or precision != "fp32":
        raise UsageError(f"{spec.name} runs on the CPU in fp32 only")
    det = ColourDetector(device=device, score_threshold=score_threshold)
    det.preprocess = preprocess
    det.weights_source = "none (numpy colour rule)"
    return det
