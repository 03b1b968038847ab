"""Shared plumbing of the transformers adapters: device/precision, offline weight loading,
deterministic tiny builds, and the zoo factories every adapter shares (:class:`HFFactory`).

Imported only by the adapters (it imports torch), never by the zoo listing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

import numpy as np

from probench.detections import MAX_PER_PROMPT as MAX_PER_PROMPT  # re-exported
from probench.detections import top_per_prompt
from probench.errors import UsageError
from probench.models.base import BaseDetector
from probench.models.errors import ModelError, WeightsNotFoundError
from probench.models.spec import ModelSpec

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and transformers (pyproject)
    from numpy.typing import ArrayLike
    from torch import Tensor
    from torch import device as TorchDevice
    from torch import dtype as TorchDtype
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.image_processing_utils import BaseImageProcessor

    from probench.models.preprocess import Frame

    # frames on the device -> the model's image inputs (pixel_values, maybe pixel_mask)
    PixelFn = Callable[[Sequence[Tensor]], dict[str, Tensor]]

T = TypeVar("T")

TINY_SEED = 0  # every tiny model is built right after torch.manual_seed(TINY_SEED)


def resolve_device(device: str, precision: str) -> tuple[TorchDevice, TorchDtype]:
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


def cuda_sync(dev: TorchDevice) -> Callable[[], None] | None:
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


def from_pretrained(loader: Callable[..., T], source: str, what: str, **kwargs: object) -> T:
    """``loader(source, local_files_only=True)`` with low-level errors wrapped."""
    try:
        return loader(source, local_files_only=True, **kwargs)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelError(f"could not load {what} from {source}: {type(exc).__name__}: {exc}") from exc


def load_pretrained(
    name: str, checkpoint: str, load_model: Callable[..., PreTrainedModel], weights: str | None
) -> tuple[PreTrainedModel, BaseImageProcessor, PreTrainedTokenizerBase, str]:
    """Real weights from ``weights`` or the local HF cache (never downloaded): the model,
    its image processor and tokenizer (from the checkpoint's processor), and the source."""
    import transformers as tf

    source = pretrained_source(name, checkpoint, weights)
    model = from_pretrained(load_model, source, name)
    processor = from_pretrained(tf.AutoProcessor.from_pretrained, source, f"{name} processor")
    return model, processor.image_processor, processor.tokenizer, source


def finish_model(model: PreTrainedModel, dev: TorchDevice, dtype: TorchDtype) -> PreTrainedModel:
    """Eval mode on the target device and dtype."""
    return model.to(device=dev, dtype=dtype).eval()


def cap_per_prompt(scores: ArrayLike, labels: ArrayLike, max_per_prompt: int = MAX_PER_PROMPT) -> np.ndarray:
    """Indices (numpy) of the kept boxes: sorted by score, at most ``max_per_prompt`` per label."""
    return top_per_prompt(scores, labels, max_per_prompt)


def device_pixels(processor: BaseImageProcessor, dev: TorchDevice, dtype: TorchDtype) -> PixelFn:
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

    def __init__(
        self, model: PreTrainedModel, image_processor: BaseImageProcessor, tokenizer: PreTrainedTokenizerBase,
        *, name: str, dev: TorchDevice, dtype: TorchDtype, score_threshold: float = 0.0,
        preprocess: str = "device",
    ) -> None:
        from probench.models.preprocess import Uploader, check_preprocess

        super().__init__(device=str(dev), score_threshold=score_threshold)
        self.model = model
        self.image_processor = image_processor
        self.tokenizer = tokenizer
        self.name = name
        self.dev = dev
        self.dtype = dtype
        self.preprocess = check_preprocess(preprocess)
        self._upload = Uploader(dev)
        self._device_pixels: PixelFn | None = None
        self._attach()

    def _attach(self) -> None:
        """The adapter's own setup on its model, once the fields above are set."""

    def pixel_inputs(self, images: Sequence[Frame]) -> dict[str, Tensor]:
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


RANDOM_SOURCE = "random init (real-size config; generated tokenizer)"
DetectorT = TypeVar("DetectorT", bound=HFDetector)


class RandomBuild(NamedTuple):
    """An adapter's model without weights: its generated tokenizer, ``make`` (the model,
    built under the tiny seed) and its image processor."""

    tokenizer: PreTrainedTokenizerBase
    make: Callable[[], PreTrainedModel]
    image_processor: BaseImageProcessor


class HFFactory(Generic[DetectorT]):
    """The zoo factories of a transformers adapter (``build`` and ``build_tiny``, the zoo
    contract): real weights from a local folder or the HF cache, or a seeded random model
    from ``random_build(spec, tiny)``, made into a ``detector`` on the device and dtype."""

    def __init__(
        self, detector: type[DetectorT], random_build: Callable[[ModelSpec, bool], RandomBuild],
        model_class: Callable[[ModelSpec], type[PreTrainedModel]],
    ) -> None:
        self.detector, self.random_build, self.model_class = detector, random_build, model_class

    def build(
        self, spec: ModelSpec, *, device: str, precision: str, score_threshold: float,
        weights: str | None, random_weights: bool, preprocess: str = "device",
    ) -> DetectorT:
        """``<name>``: the real model (``random_weights``: the real-size config, random weights)."""
        dev, dtype = resolve_device(device, precision)
        if random_weights:
            model, image_processor, tokenizer = self._random(spec, tiny=False)
            source = RANDOM_SOURCE
        else:
            model, image_processor, tokenizer, source = load_pretrained(
                spec.name, spec.checkpoint, self.model_class(spec).from_pretrained, weights
            )
        det = self._detector(
            spec.name, model, image_processor, tokenizer, dev, dtype, score_threshold, preprocess
        )
        det.weights_source = source
        return det

    def build_tiny(
        self, spec: ModelSpec, *, device: str, precision: str, score_threshold: float,
        preprocess: str = "device",
    ) -> DetectorT:
        """``tiny-<name>``: the adapter's tiny config with seeded random weights."""
        dev, dtype = resolve_device(device, precision)
        model, image_processor, tokenizer = self._random(spec, tiny=True)
        return self._detector(
            "tiny-" + spec.name, model, image_processor, tokenizer, dev, dtype, score_threshold, preprocess
        )

    def _random(
        self, spec: ModelSpec, *, tiny: bool
    ) -> tuple[PreTrainedModel, BaseImageProcessor, PreTrainedTokenizerBase]:
        parts = self.random_build(spec, tiny)
        with seeded():
            model = parts.make()
        return model, parts.image_processor, parts.tokenizer

    def _detector(
        self, name: str, model: PreTrainedModel, image_processor: BaseImageProcessor,
        tokenizer: PreTrainedTokenizerBase, dev: TorchDevice, dtype: TorchDtype, score_threshold: float,
        preprocess: str,
    ) -> DetectorT:
        return self.detector(
            finish_model(model, dev, dtype), image_processor, tokenizer,
            name=name, dev=dev, dtype=dtype, score_threshold=score_threshold, preprocess=preprocess,
        )
