"""The one detector interface every model configuration implements.

A detector takes an RGB uint8 image ``(H, W, 3)`` and a list of prompt strings and returns
:class:`probench.detections.Detections` (boxes ``xyxy`` in original-image pixels, scores in
[0, 1], the index of the prompt each box answers, per-stage timings).

Prompt handling: ``detect(image, prompts)`` (or ``set_prompts`` then ``detect(image)``)
makes the text side of that prompt set ready, timed as stage ``text`` of the call. The
text side is cached in an LRU (``text_cache_size`` entries):

- ``text_cache = "per-prompt"`` (the text tower encodes each prompt on its own: OWL,
  YOLO-World, YOLOE, SAM3, ...): entries are single prompts; the adapter implements
  ``_encode_texts(prompts) -> one item per prompt`` and ``_join_texts(items, prompts)``
  (which also applies the set where the model holds it, e.g. an ultralytics vocabulary).
  A new combination of prompts already seen costs no encoder call. With ``text_batch``
  set, missing prompts are encoded in batches of exactly that many rows (a last short
  batch padded by repeating its last prompt; the adapters use 1): a prompt's embedding
  then does not depend on which other prompts happened to miss with it (matrix kernels may
  round differently for another batch size), so a resumed run reproduces a fresh one bit
  for bit.
- ``text_cache = "per-set"`` (the prompts are encoded jointly, e.g. one caption for
  Grounding DINO): entries are whole prompt sets; the adapter implements
  ``_encode_prompts(prompts)``.

``text_encoder_calls`` counts text-encoding events: prompt-set changes that ran the text
encoder (per-prompt: however many prompts, in however many batches, it encoded);
:meth:`BaseDetector.text_cache_stats` gives hits, misses (prompts or sets encoded) and
evictions (latency.json and the node's diagnostics report them).
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypedDict, runtime_checkable

import numpy as np

from probench.detections import MAX_PER_PROMPT, Detections, DetectionsError, top_per_prompt
from probench.models.errors import ImageInputError, ModelError, PromptError
from probench.models.spec import ModelRecord, TextCache
from probench.vocabulary import MAX_PROMPT_CHARS as _VOCAB_MAX_PROMPT_CHARS

if TYPE_CHECKING:
    from torch import Tensor

    from probench.models.head import ImageHead
    from probench.models.preprocess import Frame

MAX_PROMPT_CHARS = _VOCAB_MAX_PROMPT_CHARS  # re-exported: the one limit lives in vocabulary
MAX_PROMPTS = 1024
# The per-prompt adapters' fixed text-encoder batch (``text_batch``): one prompt per encoder
# call. A fixed batch makes a prompt's embedding independent of the prompts it missed with;
# 1 also keeps a cold prompt's cost its own (a larger fixed batch encodes padding rows).
TEXT_BATCH = 1


class TextCacheStats(TypedDict):
    """:meth:`BaseDetector.text_cache_stats` (latency.json's ``text_cache``, the node's diagnostics)."""

    kind: TextCache
    entries: int
    capacity: int
    hits: int
    misses: int
    evictions: int
    encoder_calls: int


@runtime_checkable
class Detector(Protocol):
    """What the callers of a detector use (infer, latency, the grounding node and worker,
    ground, scale): they are typed against this, not :class:`BaseDetector`, which every
    adapter and wrapper subclasses to implement it."""

    name: str
    device: str
    score_threshold: float
    preprocess: str  # "device" or "reference" (probench.models.preprocess)
    model_info: ModelRecord | None  # run.json's "model", set by the registry
    text_encoder_calls: int  # prompt-set changes that ran the text encoder

    @property
    def prompts(self) -> tuple[str, ...]: ...

    def text_cache_stats(self) -> TextCacheStats: ...

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
    """An RGB uint8 ``(H, W, 3)`` array, or a clear :class:`ImageInputError`. A torch uint8
    ``(H, W, 3)`` tensor (a frame decoded on the GPU) is accepted as well: the device
    preprocessing takes it as it is, the reference path copies it to a numpy array."""
    torch = sys.modules.get("torch")  # a tensor exists only if torch was imported
    is_tensor = torch is not None and isinstance(image, torch.Tensor)
    if not isinstance(image, np.ndarray) and not is_tensor:
        raise ImageInputError(f"image must be a numpy array, got {type(image).__name__}")
    shape = tuple(image.shape)
    if len(shape) != 3 or shape[2] != 3:
        raise ImageInputError(f"image must be (H, W, 3) RGB, got shape {shape}")
    if shape[0] < 1 or shape[1] < 1:
        raise ImageInputError(f"image has zero size: {shape}")
    if (image.dtype != torch.uint8) if (torch is not None and is_tensor) else (image.dtype != np.uint8):
        raise ImageInputError(f"image must be uint8, got {image.dtype}")
    return image


class BaseDetector:
    """Shared mechanics: prompt validation, the text-side LRU cache and per-stage timing.

    Subclasses implement the text side (module doc: ``_encode_texts`` + ``_join_texts`` for
    ``text_cache = "per-prompt"``, else ``_encode_prompts``) and ``_run(image, text_state)
    -> Detections`` (preprocess + forward + postprocess, filling ``timings_ms``).
    """

    name = "base"
    text_cache: TextCache = "per-set"
    text_cache_size = 512  # entries: prompts (per-prompt) or prompt sets (per-set)
    text_batch: int | None = None  # per-prompt: fixed encoder batch (module doc), None = all misses at once
    # "device": the image preprocessing runs as torch ops on the model's device;
    # "reference": the library's own processor (probench.models.preprocess)
    preprocess: str = "reference"

    foreign_output = False  # a plugin's detector: its every frame's prompt indices are checked

    def __init__(self, device: str = "cpu", score_threshold: float = 0.0) -> None:
        self.device = device
        self.score_threshold = float(score_threshold)
        # Set by the registry (probench.models.zoo.load_detector): run.json's ``model``.
        self.model_info: ModelRecord | None = None
        # Where the weights actually came from (a resolved path, a cache id): for logs only.
        self.weights_source: str = ""
        self._prompts: tuple[str, ...] = ()
        self._text_state: object = None
        self._text_lru: OrderedDict[str | tuple[str, ...], object] = OrderedDict()  # prompt or prompt set
        self.text_encoder_calls = 0
        self.text_cache_hits = 0
        self.text_cache_misses = 0
        self.text_cache_evictions = 0
        self.last_text_ms = 0.0  # time the last prompt change took (0 when nothing changed)
        self._eager_head: ImageHead | None = None  # built on the first run_head
        self._head_runner: Callable[..., tuple[Tensor, ...]] | None = None  # a runtime's (use_head_runner)

    @property
    def prompts(self) -> tuple[str, ...]:
        return self._prompts

    def image_head(self) -> ImageHead | None:
        """The per-frame network (:mod:`probench.models.head`), or None where the adapter
        exposes none (it then runs only on the ``torch`` runtime)."""
        return None

    def run_head(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        """Run the image head on ``inputs``: the one call an adapter makes per frame into its
        network. Eager here, or the runner a runtime installed (:meth:`use_head_runner`: the
        compiled runtime); the exported runtimes' subclasses (ONNX Runtime, TensorRT) override it."""
        if self._head_runner is not None:
            return self._head_runner(*inputs)
        head = self._eager_head
        if head is None:
            head = self._eager_head = self.image_head()
            if head is None:
                raise ModelError(f"{self.name}: this adapter exposes no image head")
        out: tuple[Tensor, ...] = head.module(*inputs)
        return out

    def use_head_runner(self, runner: Callable[..., tuple[Tensor, ...]] | None) -> None:
        """Run the image head through ``runner`` (same inputs and outputs as the head's
        module) from now on; None: eagerly again."""
        self._head_runner = runner

    def warmup(self, image_size: tuple[int, int], n_prompts: int, *, every_bucket: bool = True) -> None:
        """Run the whole frame path on a blank ``(height, width)`` frame with 1, 2, 4, ...
        prompts up to ``n_prompts`` (the sizes :data:`probench.models.head.PROMPT_BUCKETS`
        round to; ``every_bucket=False``: with ``n_prompts`` only): a compiled runtime
        compiles or captures its graphs here, and any runtime allocates its buffers, outside
        a real frame's time budget. The active prompts, the text cache and its counters are
        left as they were (warm-up prompts are not cached)."""
        from probench.models.head import PROMPT_BUCKETS

        height, width = (int(v) for v in image_size)
        if height < 1 or width < 1 or not 1 <= n_prompts <= MAX_PROMPTS:
            raise ModelError(f"{self.name}: warm-up needs a positive image size and 1..{MAX_PROMPTS} "
                             f"prompts, got {width}x{height} and {n_prompts}")
        counts = sorted({b for b in PROMPT_BUCKETS if b < n_prompts and every_bucket} | {n_prompts})
        prompts, lru = self._prompts, OrderedDict(self._text_lru)
        counters = (self.last_text_ms, self.text_encoder_calls, self.text_cache_hits,
                    self.text_cache_misses, self.text_cache_evictions)
        frame = np.zeros((height, width, 3), dtype=np.uint8)
        try:
            for n in counts:
                self.detect(frame, [f"warm-up prompt {i}" for i in range(n)])
        finally:
            self._text_lru, self._prompts, self._text_state = lru, (), None
            if prompts:  # made active again, the model-held side (an ultralytics vocabulary) too
                self.set_prompts(prompts)
            (self.last_text_ms, self.text_encoder_calls, self.text_cache_hits, self.text_cache_misses,
             self.text_cache_evictions) = counters

    def set_prompts(self, prompts: Sequence[str]) -> None:
        """Make ``prompts`` the active set, its text side ready (from the cache when it can)."""
        prompts = check_prompts(prompts)
        if prompts == self._prompts and self._text_state is not None:
            self.last_text_ms = 0.0
            return
        t0 = time.perf_counter()
        if self.text_cache == "per-prompt":
            self._text_state = self._per_prompt_state(prompts)
        else:
            self._text_state = self._per_set_state(prompts)
        self._prompts = prompts
        self.last_text_ms = (time.perf_counter() - t0) * 1000.0

    def text_cache_stats(self) -> TextCacheStats:
        return {
            "kind": self.text_cache, "entries": len(self._text_lru), "capacity": self.text_cache_size,
            "hits": self.text_cache_hits, "misses": self.text_cache_misses,
            "evictions": self.text_cache_evictions, "encoder_calls": self.text_encoder_calls,
        }

    def _remember(self, key: str | tuple[str, ...], value: object) -> None:
        self._text_lru[key] = value
        self._text_lru.move_to_end(key)
        while len(self._text_lru) > self.text_cache_size:
            self._text_lru.popitem(last=False)
            self.text_cache_evictions += 1

    def _per_set_state(self, prompts: tuple[str, ...]) -> object:
        if prompts in self._text_lru:
            self.text_cache_hits += 1
            self._text_lru.move_to_end(prompts)
            return self._text_lru[prompts]
        self.text_cache_misses += 1
        state = self._encode_prompts(prompts)
        self.text_encoder_calls += 1
        self._remember(prompts, state)
        return state

    def _per_prompt_state(self, prompts: tuple[str, ...]) -> object:
        lru = self._text_lru
        items: dict[str, object] = {}
        missing: list[str] = []
        for p in dict.fromkeys(prompts):  # distinct, in order
            item = lru.get(p)
            if item is None:
                missing.append(p)
            else:
                lru.move_to_end(p)
                items[p] = item
        self.text_cache_hits += len(items)
        self.text_cache_misses += len(missing)
        if missing:
            self.text_encoder_calls += 1  # one encoding event, however many batches it takes
        size = self.text_batch or len(missing) or 1
        for start in range(0, len(missing), size):
            chunk = missing[start : start + size]
            padded = chunk + [chunk[-1]] * (size - len(chunk))
            encoded = self._encode_texts(tuple(padded))
            if len(encoded) != len(padded):
                raise RuntimeError(
                    f"{self.name}: text encoder gave {len(encoded)} items for {len(padded)} prompts"
                )
            for p, item in zip(chunk, encoded, strict=False):
                items[p] = item
                self._remember(p, item)
        return self._join_texts([items[p] for p in prompts], prompts)

    def detect(self, image: np.ndarray, prompts: Sequence[str] | None = None) -> Detections:
        text_ms = self._ready(prompts)
        dets = self._threshold(self._checked(self._run(self._frame(image), self._text_state)))
        return dets.with_timing("text", text_ms)

    def detect_batch(
        self, images: Sequence[np.ndarray], prompts: Sequence[str] | None = None
    ) -> list[Detections]:
        """Same prompts for every image; backends that batch natively override ``_run_batch``."""
        text_ms = self._ready(prompts)
        images = [self._frame(im) for im in images]
        if not images:
            return []
        share = text_ms / len(images)
        dets = self._run_batch(images, self._text_state)
        return [self._threshold(self._checked(d)).with_timing("text", share) for d in dets]

    def _checked(self, dets: Detections) -> Detections:
        """Every frame's output is :class:`Detections`; a plugin's (``foreign_output``, set
        by the zoo for a factory from outside probench) also has prompt indices that name
        one of the prompts asked. Else a :class:`DetectionsError`: the frame fails, named by
        its caller, and is never credited to another prompt. (probench's own adapters keep
        their indices by construction; the attribution checks downstream hold them too.)"""
        if not isinstance(dets, Detections):
            raise DetectionsError(f"{self.name} returned {type(dets).__name__}, not Detections")
        n = len(self.prompts)
        if self.foreign_output and len(dets) and int(dets.prompt_index.max()) >= n:
            raise DetectionsError(f"{self.name} gave prompt index {int(dets.prompt_index.max())} "
                                  f"for {n} prompt(s)")
        if len(dets) > MAX_PER_PROMPT:  # the contract's 100 per prompt, whatever a plugin returns
            keep = top_per_prompt(dets.scores, dets.prompt_index)
            if len(keep) < len(dets):
                dets = dets.filter(np.sort(keep))  # (in the order given, timings kept)
        return dets

    def _frame(self, image: Frame) -> Frame:
        """A checked frame for ``_run``: the reference paths (library processors, detectron2,
        exported engines) read numpy, so a frame decoded on the GPU is copied back for them."""
        image = check_image(image)
        if self.preprocess == "reference" and not isinstance(image, np.ndarray):
            from probench.models.preprocess import as_numpy_rgb

            return as_numpy_rgb(image)
        return image

    def _ready(self, prompts: Sequence[str] | None) -> float:
        """Text side ready; returns the ms it took (0 when the set was already active)."""
        if prompts is None:
            if not self._prompts:
                raise PromptError("no prompts set: call set_prompts() or pass prompts")
            return 0.0
        self.set_prompts(prompts)
        return self.last_text_ms

    def _threshold(self, dets: Detections) -> Detections:
        return dets.above(self.score_threshold) if self.score_threshold > 0 else dets

    # -- to implement ---------------------------------------------------------------------
    def _encode_prompts(self, prompts: tuple[str, ...]) -> object:
        """per-set: the text state of a whole prompt set."""
        return prompts

    def _encode_texts(self, prompts: tuple[str, ...]) -> Sequence[object]:
        """per-prompt: one cached item per prompt (called with the prompts not in the cache,
        in batches of ``text_batch`` when set)."""
        raise NotImplementedError(f"{type(self).__name__} declares per-prompt caching without _encode_texts")

    def _join_texts(self, items: list[object], prompts: tuple[str, ...]) -> object:
        """per-prompt: the text state of ``prompts`` from their cached items, in order."""
        raise NotImplementedError(f"{type(self).__name__} declares per-prompt caching without _join_texts")

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
