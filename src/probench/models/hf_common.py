"""Shared plumbing of the transformers adapters: device/precision, offline weight loading,
deterministic tiny builds.

Imported only by the adapters (it imports torch), never by the zoo listing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from probench.errors import UsageError
from probench.models.base import BaseDetector
from probench.models.errors import ModelError, WeightsNotFoundError

TINY_SEED = 0  # every tiny model is built right after torch.manual_seed(TINY_SEED)
MAX_PER_PROMPT = 100  # COCO maxDets: the cap on boxes per prompt (DESIGN.md, detector contract)


def resolve_device(device: str, precision: str) -> tuple[Any, Any]:
    """``(torch.device, torch.dtype)`` for a device string and ``fp32``/``fp16``, or a clear error."""
    import torch

    if precision not in ("fp32", "fp16"):
        raise UsageError(f"precision must be fp32 or fp16, got {precision!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UsageError(f"bad device {device!r}: {exc}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device {device!r} requested but CUDA is not available here")
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"device must be cpu or cuda[:N], got {device!r}")
    if precision == "fp16" and dev.type != "cuda":
        # fp16 kernels on CPU are slow or missing: a latency number from them would mislead.
        raise UsageError("precision fp16 needs a CUDA device; use --precision fp32 on CPU")
    return dev, (torch.float16 if precision == "fp16" else torch.float32)


def cuda_sync(dev: Any) -> Callable[[], None] | None:
    """The synchronise function StageTimer needs on CUDA (None on CPU)."""
    import torch

    return torch.cuda.synchronize if dev.type == "cuda" else None


@contextlib.contextmanager
def seeded(seed: int = TINY_SEED) -> Iterator[None]:
    """Fixed torch RNG for a build, without disturbing the caller's RNG state."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def fetch_hint(checkpoint: str) -> str:
    return (
        f"on a networked machine run `probench fetch <model>` or `hf download {checkpoint}` (or "
        f"`huggingface-cli download {checkpoint}`) and copy the Hugging Face cache "
        "(~/.cache/huggingface/hub) here, "
        "or pass --weights <local folder with the checkpoint>"
    )


def weights_in_cache(checkpoint: str) -> bool:
    """True when the checkpoint's config.json is in the local HF cache (no network)."""
    if not checkpoint or "/" not in checkpoint:
        return False
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    # Read the cache location now (not at huggingface_hub import) so HF_HUB_CACHE set later counts.
    cache_dir = os.environ.get("HF_HUB_CACHE") or None
    try:
        found = try_to_load_from_cache(checkpoint, "config.json", cache_dir=cache_dir)
    except (ValueError, OSError):
        return False
    return isinstance(found, str)


def pretrained_source(name: str, checkpoint: str, weights: str | None) -> str:
    """Where real weights come from: the ``weights`` folder or the HF cache id; raises
    :class:`WeightsNotFoundError` (never downloads) when neither is there."""
    if weights:
        path = Path(weights).expanduser()
        if not (path / "config.json").is_file():
            raise WeightsNotFoundError(
                f"{name}: --weights {weights} is not a checkpoint folder (no config.json); "
                + fetch_hint(checkpoint)
            )
        return str(path.resolve())
    if not weights_in_cache(checkpoint):
        raise WeightsNotFoundError(
            f"{name}: weights {checkpoint} are not on this machine (probench never downloads); "
            + fetch_hint(checkpoint)
        )
    return checkpoint


def from_pretrained(loader: Callable[..., Any], source: str, what: str, **kwargs: Any) -> Any:
    """``loader(source, local_files_only=True)`` with low-level errors wrapped."""
    try:
        return loader(source, local_files_only=True, **kwargs)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelError(f"could not load {what} from {source}: {type(exc).__name__}: {exc}") from exc


def load_pretrained(
    name: str, checkpoint: str, load_model: Callable[..., Any], weights: str | None
) -> tuple[Any, Any, Any, str]:
    """Real weights from ``weights`` or the local HF cache (never downloaded): the model,
    its image processor and tokenizer (from the checkpoint's processor), and the source."""
    import transformers as tf

    source = pretrained_source(name, checkpoint, weights)
    model = from_pretrained(load_model, source, name)
    processor = from_pretrained(tf.AutoProcessor.from_pretrained, source, f"{name} processor")
    return model, processor.image_processor, processor.tokenizer, source


def finish_model(model: Any, dev: Any, dtype: Any) -> Any:
    """Eval mode on the target device and dtype."""
    return model.to(device=dev, dtype=dtype).eval()


def cap_per_prompt(scores: Any, labels: Any, max_per_prompt: int = MAX_PER_PROMPT) -> Any:
    """Indices (numpy) of the kept boxes: sorted by score, at most ``max_per_prompt`` per label."""
    import numpy as np

    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    order = np.argsort(-scores, kind="stable")
    keep = []
    counts: dict[int, int] = {}
    for i in order:
        c = counts.get(int(labels[i]), 0)
        if c < max_per_prompt:
            counts[int(labels[i])] = c + 1
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def device_pixels(processor: Any, dev: Any, dtype: Any) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """The device-path twin of a transformers image processor (:mod:`probench.models.preprocess`)."""
    from transformers.image_processing_backends import TorchvisionBackend

    from probench.models import preprocess as prep

    if not isinstance(processor, TorchvisionBackend):
        raise ModelError(
            f"no device preprocessing for {type(processor).__name__} (a torchvision-backend "
            "processor is expected); use --preprocess reference"
        )
    if type(processor).__name__.startswith("Owlv2ImageProcessor"):
        owl = prep.Owlv2Pixels(processor, dev, dtype)
        return lambda images: {"pixel_values": owl(images)}
    return prep.ProcessorPixels(processor, dev, dtype)


class HFDetector(BaseDetector):
    """BaseDetector plus the torch device and dtype every transformers adapter needs, and the
    two preprocessing paths (``preprocess``: "device" or "reference")."""

    image_processor: Any  # the transformers image processor: set by each adapter's __init__

    def __init__(
        self, *, name: str, dev: Any, dtype: Any, score_threshold: float = 0.0, preprocess: str = "device"
    ) -> None:
        from probench.models.preprocess import Uploader, check_preprocess

        super().__init__(device=str(dev), score_threshold=score_threshold)
        self.name = name
        self.dev = dev
        self.dtype = dtype
        self.preprocess = check_preprocess(preprocess)
        self._upload = Uploader(dev)
        self._device_pixels: Callable[[Sequence[Any]], dict[str, Any]] | None = None

    def pixel_inputs(self, images: Sequence[Any]) -> dict[str, Any]:
        """The model's image inputs (``pixel_values``, and ``pixel_mask`` where the processor
        makes one) on the device, by the detector's preprocessing path."""
        image_processor = self.image_processor
        if self.preprocess == "reference":
            from probench.models.preprocess import as_numpy_rgb

            enc = image_processor(images=[as_numpy_rgb(im) for im in images], return_tensors="pt")
            out = {"pixel_values": enc["pixel_values"].to(device=self.dev, dtype=self.dtype)}
            if "pixel_mask" in enc:
                out["pixel_mask"] = enc["pixel_mask"].to(self.dev)
            return out
        if self._device_pixels is None:
            self._device_pixels = device_pixels(image_processor, self.dev, self.dtype)
        return self._device_pixels(self._upload(images))
