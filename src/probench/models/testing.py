"""Scripted detectors for tests and benchmarks of the layers around the models.

``test-instant`` returns at once; ``test-slow-<N>ms`` sleeps N ms per frame (a model that
cannot keep up with the camera). Both answer every prompt with one deterministic box
derived from the prompt text and the image size, so outputs can be checked end to end.
``test-masks`` is ``test-instant`` with instance masks: each box's mask is the ellipse
inscribed in it (the pixels whose centres lie inside; :func:`ellipse_masks`).
"""

from __future__ import annotations

import hashlib
import math
import re
import time

import numpy as np

from probench.detections import Detections
from probench.models.base import BaseDetector

_SLOW = re.compile(r"^test-slow-(\d+)ms$")
MAX_SCRIPTED_DELAY_MS = 60_000  # test-slow-<N>ms: N at most a minute per frame


def _unit(text: str, salt: str) -> float:
    digest = hashlib.sha256(f"{salt}:{text}".encode()).digest()
    return int.from_bytes(digest[:4], "little") / 2**32


class ScriptedDetector(BaseDetector):
    def __init__(
        self, name: str = "test-instant", delay_s: float = 0.0, *, device: str = "cpu",
        score_threshold: float = 0.0, masks: bool = False,
    ) -> None:
        super().__init__(device=device, score_threshold=score_threshold)
        self.name = name
        self.delay_s = float(delay_s)
        # a mask-capable model builds masks on request (the core sets it); the others have None
        self.return_masks: bool | None = True if masks else None

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        t0 = time.perf_counter()
        if self.delay_s:
            time.sleep(self.delay_s)
        h, w = image.shape[:2]
        boxes, scores = [], []
        for p in self._prompts:
            cx, cy = _unit(p, "cx") * w, _unit(p, "cy") * h
            bw, bh = (0.1 + 0.4 * _unit(p, "w")) * w, (0.1 + 0.4 * _unit(p, "h")) * h
            boxes.append([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2])
            scores.append(0.05 + 0.9 * _unit(p, "s"))
        xyxy = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        masks = ellipse_masks(xyxy, (h, w)) if self.return_masks else None
        ms = (time.perf_counter() - t0) * 1000.0
        return Detections.from_arrays(
            xyxy, scores, np.arange(len(boxes)), image_size=(h, w), masks=masks,
            timings_ms={"preprocess": 0.0, "forward": ms, "postprocess": 0.0},
        )


def ellipse_masks(xyxy: np.ndarray, image_hw: tuple[int, int]) -> np.ndarray:
    """Bool ``(N, H, W)``: for each box, the pixels whose centres lie inside the ellipse
    inscribed in it (boxes in pixels, not yet clipped). Computed box by box over the pixels
    the box covers, so the work space is one box's, never ``N`` images of floats (1024
    prompts would need gigabytes)."""
    h, w = image_hw
    boxes = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    out = np.zeros((len(boxes), h, w), dtype=bool)
    for i, (x1, y1, x2, y2) in enumerate(boxes):
        # a pixel centre outside [x1, x2] x [y1, y2] lies outside the ellipse
        c0, c1 = max(0, math.floor(x1)), min(w, math.ceil(x2))
        r0, r1 = max(0, math.floor(y1)), min(h, math.ceil(y2))
        if c0 >= c1 or r0 >= r1:
            continue
        xs, ys = np.arange(c0, c1)[None, :] + 0.5, np.arange(r0, r1)[:, None] + 0.5
        rx, ry = max((x2 - x1) / 2, 1e-9), max((y2 - y1) / 2, 1e-9)
        out[i, r0:r1, c0:c1] = ((xs - (x1 + x2) / 2) / rx) ** 2 + ((ys - (y1 + y2) / 2) / ry) ** 2 <= 1.0
    return out


def scripted_detector(
    name: str, *, device: str = "cpu", score_threshold: float = 0.0
) -> ScriptedDetector | None:
    """The scripted detector a ``test-*`` name denotes, or None."""
    if name in ("test-instant", "test-masks"):
        delay_s = 0.0
    elif m := _SLOW.match(name):
        if len(m.group(1)) > 9 or int(m.group(1)) > MAX_SCRIPTED_DELAY_MS:
            from probench.models.errors import UnknownModelError

            raise UnknownModelError(f"{name}: a scripted delay is at most {MAX_SCRIPTED_DELAY_MS} ms "
                                    f"(test-slow-{MAX_SCRIPTED_DELAY_MS}ms)")
        delay_s = int(m.group(1)) / 1000.0
    else:
        return None
    return ScriptedDetector(name, delay_s, device=device, score_threshold=score_threshold,
                            masks=name == "test-masks")
