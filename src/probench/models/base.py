"""The one detector interface every model configuration implements.

A detector takes an RGB uint8 image ``(H, W, 3)`` and a list of prompt strings and returns
:class:`probench.detections.Detections` (boxes ``xyxy`` in original-image pixels, scores in
[0, 1], the index of the prompt each box answers, per-stage timings). Prompt handling:
``set_prompts`` encodes the text side once; ``detect(image)`` reuses it until the prompt set
changes (``detect(image, prompts)`` is a shortcut that calls ``set_prompts`` only when the
list differs from the active one).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from probench.detections import Detections
from probench.models.errors import ImageInputError, PromptError
from probench.models.spec import ModelRecord

MAX_PROMPT_CHARS = 512  # a target description longer than this is almost surely a mistake
MAX_PROMPTS = 1024


@runtime_checkable
class Detector(Protocol):
    name: str
    device: str

    @property
    def prompts(self) -> tuple[str, ...]: ...

    def set_prompts(self, prompts: Sequence[str]) -> None: ...

    def detect(self, image: np.ndarray, prompts: Sequence[str] | None = None) -> Detections: ...

    def detect_batch(
        self, images: Sequence[np.ndarray], prompts: Sequence[str] | None = None
    ) -> list[Detections]: ...


def check_prompts(prompts: Sequence[str]) -> tuple[str, ...]:
    """Validate a prompt list: prompt text is data, so only its shape is checked."""
    if isinstance(prompts, str):
        raise PromptError("prompts must be a list of strings, not one string")
    out = []
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise PromptError(f"prompt {i} is not a string: {type(p).__name__}")
        p = p.strip()
        if not p:
            raise PromptError(f"prompt {i} is empty")
        if len(p) > MAX_PROMPT_CHARS:
            raise PromptError(f"prompt {i} is {len(p)} characters long (limit {MAX_PROMPT_CHARS})")
        out.append(p)
    if not out:
        raise PromptError("no prompts given")
    if len(out) > MAX_PROMPTS:
        raise PromptError(f"{len(out)} prompts given (limit {MAX_PROMPTS})")
    return tuple(out)


def check_image(image: np.ndarray) -> np.ndarray:
    """An RGB uint8 ``(H, W, 3)`` array, or a clear :class:`ImageInputError`."""
    if not isinstance(image, np.ndarray):
        raise ImageInputError(f"image must be a numpy array, got {type(image).__name__}")
    if image.ndim != 3 or image.shape[2] != 3:
        raise ImageInputError(f"image must be (H, W, 3) RGB, got shape {image.shape}")
    if image.shape[0] < 1 or image.shape[1] < 1:
        raise ImageInputError(f"image has zero size: {image.shape}")
    if image.dtype != np.uint8:
        raise ImageInputError(f"image must be uint8, got {image.dtype}")
    return image


class BaseDetector:
    """Shared mechanics: prompt validation, text-side caching and per-stage timing.

    Subclasses implement ``_encode_prompts(prompts) -> object`` (the cached text side) and
    ``_run(image, text_state) -> Detections`` (preprocess + forward + postprocess, filling
    ``timings_ms``). ``text_encoder_calls`` counts ``_encode_prompts`` calls so tests can
    prove the cache works.
    """

    name = "base"

    def __init__(self, device: str = "cpu", score_threshold: float = 0.0) -> None:
        self.device = device
        self.score_threshold = float(score_threshold)
        # Set by the registry (probench.models.zoo.load_detector): run.json's ``model``.
        self.model_info: ModelRecord | None = None
        # Where the weights actually came from (a resolved path, a cache id): for logs only.
        self.weights_source: str = ""
        self._prompts: tuple[str, ...] = ()
        self._text_state: object = None
        self.text_encoder_calls = 0

    @property
    def prompts(self) -> tuple[str, ...]:
        return self._prompts

    def set_prompts(self, prompts: Sequence[str]) -> None:
        prompts = check_prompts(prompts)
        if prompts == self._prompts and self._text_state is not None:
            return
        self._text_state = self._encode_prompts(prompts)
        self.text_encoder_calls += 1
        self._prompts = prompts

    def detect(self, image: np.ndarray, prompts: Sequence[str] | None = None) -> Detections:
        self._ready(prompts)
        return self._threshold(self._run(check_image(image), self._text_state))

    def detect_batch(
        self, images: Sequence[np.ndarray], prompts: Sequence[str] | None = None
    ) -> list[Detections]:
        """Same prompts for every image; backends that batch natively override ``_run_batch``."""
        self._ready(prompts)
        images = [check_image(im) for im in images]
        if not images:
            return []
        return [self._threshold(d) for d in self._run_batch(images, self._text_state)]

    def _ready(self, prompts: Sequence[str] | None) -> None:
        if prompts is not None:
            self.set_prompts(prompts)
        if not self._prompts:
            raise PromptError("no prompts set: call set_prompts() or pass prompts")

    def _threshold(self, dets: Detections) -> Detections:
        return dets.above(self.score_threshold) if self.score_threshold > 0 else dets

    # -- to implement ---------------------------------------------------------------------
    def _encode_prompts(self, prompts: tuple[str, ...]) -> object:
        return prompts

    def _run(self, image: np.ndarray, text_state: object) -> Detections:  # pragma: no cover
        raise NotImplementedError

    def _run_batch(self, images: list[np.ndarray], text_state: object) -> list[Detections]:
        """Checked images -> one Detections each. Default: one ``_run`` per image."""
        return [self._run(im, text_state) for im in images]


@dataclass
class StageTimer:
    """Collects per-stage wall times in ms; ``sync`` is called before each reading
    (``torch.cuda.synchronize`` on GPU) so asynchronous kernels are counted."""

    sync: object = None
    timings_ms: dict[str, float] = field(default_factory=dict)

    def stage(self, name: str) -> _Stage:
        return _Stage(self, name)


class _Stage:
    def __init__(self, timer: StageTimer, name: str) -> None:
        self.timer, self.name = timer, name

    def __enter__(self) -> None:
        if callable(self.timer.sync):
            self.timer.sync()
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        if callable(self.timer.sync):
            self.timer.sync()
        self.timer.timings_ms[self.name] = (time.perf_counter() - self.t0) * 1000.0
