"""A detector's per-frame network as one module: the seam every runtime replaces.

Each adapter splits a frame into three parts: preprocessing (numpy/torch, on the device),
the **image head** (the network that runs on every frame, with the cached text side as
tensor inputs) and post-processing. Only the image head differs between runtimes:

- ``torch``: the head's module, eager;
- ``compiled``: the same module under ``torch.compile`` (CPU) or captured as CUDA graphs
  with static input buffers (GPU), one graph per bucket of prompt counts: the inputs padded
  to a bucket (``ImageHead.pad``: by default the last prompt's rows repeated up to
  :data:`PROMPT_BUCKETS`), the outputs sliced back;
- ``onnxruntime`` / ``tensorrt``: the module exported to ONNX (the prompt axes dynamic) and
  run by ONNX Runtime, or built into an FP16 TensorRT engine.

An adapter exposes its head with :meth:`image_head` and calls it only through
``self.run_head(*inputs)``; a runtime wrapper replaces ``run_head``. Heavy imports
(torch) happen inside functions: this module is importable without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for the checker only: mypy skips torch (pyproject)
    from argparse import ArgumentParser, _ArgumentGroup

    from torch import Tensor
    from torch.nn import Module

# Prompt counts a captured graph is made for: a prompt set of n prompts runs in the
# smallest bucket >= n (padded rows are sliced off the outputs), so a new prompt set of a
# known size class never recaptures. Sets above the last bucket run eagerly.
PROMPT_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
# Token counts, where a head's growing axis is a sentence's tokens (a Grounding DINO
# caption, OmDet-T's task sentence): capped at the model's token limit (:func:`buckets_upto`)
TOKEN_BUCKETS: tuple[int, ...] = (16, 32, 64, 128, 256)

# a head's own padding (ImageHead.pad): inputs -> the inputs padded to their graph's shapes,
# or None when an axis is above its last bucket (the head runs eagerly)
Pad = Callable[[tuple["Tensor", ...]], "tuple[Tensor, ...] | None"]


@dataclass(frozen=True)
class ImageHead:
    """The per-frame network of one detector.

    ``module.forward(*inputs)`` takes tensors named ``input_names`` and returns a tuple of
    tensors named ``output_names``; it holds no Python-side state that changes per frame.
    ``prompt_axes`` maps an input or output name to its axis that grows with the number of
    prompts (ONNX marks it dynamic; the compiled runtime pads inputs to a bucket along it and
    slices outputs back). ``example_inputs(n_prompts)`` builds inputs of the right shapes,
    dtypes and device for ``n_prompts`` prompts (for export, capture and warm-up).
    ``pad_prompts``: padding the prompt axes by repeating the last prompt's rows leaves the
    real prompts' outputs unchanged (each prompt's outputs depend on the image and on that
    prompt alone, or on a max over prompts, which a repeated row does not change). A head
    whose prompts interact (attention across prompts, a softmax over them) says False: the
    compiled runtime then captures one graph per exact prompt count instead of per bucket.
    ``pad``: the head's own padding, for a head whose growing axes are not one independent
    row per prompt (tokens of a caption; two axes growing apart): it grows each axis to a
    bucket of its choosing with rows that leave the real rows' outputs unchanged (masked
    tokens, repeated classes) and returns None above a last bucket (run eagerly); the
    compiled runtime makes one graph per padded shapes and slices the outputs' prompt axes
    back to :func:`prompt_count` of the unpadded inputs. None: the default padding above.
    """

    family: str
    module: Module
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    example_inputs: Callable[[int], tuple[Tensor, ...]]
    prompt_axes: dict[str, int] = field(default_factory=dict)
    pad_prompts: bool = True
    pad: Pad | None = None

    def __post_init__(self) -> None:
        known = set(self.input_names) | set(self.output_names)
        unknown = sorted(set(self.prompt_axes) - known)
        if unknown:
            raise ValueError(f"{self.family} head: prompt axes name unknown tensors {unknown}")


def bucket_for(n_prompts: int, buckets: Sequence[int] = PROMPT_BUCKETS) -> int | None:
    """The smallest bucket that holds ``n_prompts``, or None when none does (run eagerly)."""
    if n_prompts < 1:
        raise ValueError(f"a prompt set has at least one prompt, got {n_prompts}")
    return next((b for b in buckets if b >= n_prompts), None)


def buckets_upto(limit: int, buckets: Sequence[int] = TOKEN_BUCKETS) -> tuple[int, ...]:
    """The ``buckets`` below ``limit``, then ``limit``: the sizes of an axis that never grows
    past it (a model's token limit)."""
    return (*(b for b in buckets if b < limit), limit)


def prompt_count(head: ImageHead, inputs: Sequence[Tensor]) -> int | None:
    """The number of prompts of ``inputs``: the length of the first input's prompt axis
    (None: the head has no prompt axis among its inputs)."""
    for name, t in zip(head.input_names, inputs, strict=True):
        axis = head.prompt_axes.get(name)
        if axis is not None:
            return int(t.shape[axis])
    return None


def repeat_last(t: Tensor, axis: int, size: int) -> Tensor:
    """``t`` grown to ``size`` along ``axis`` by repeating its last row (as is when it is
    that long already)."""
    import torch

    n = int(t.shape[axis])
    if n >= size:
        return t
    reps = [1] * t.dim()
    reps[axis] = size - n
    return torch.cat((t, t.narrow(axis, n - 1, 1).repeat(*reps)), axis)


def fill_to(t: Tensor, axis: int, size: int, value: float = 0) -> Tensor:
    """``t`` grown to ``size`` along ``axis`` with rows of ``value`` (as is when it is that
    long already)."""
    import torch

    n = int(t.shape[axis])
    if n >= size:
        return t
    shape = list(t.shape)
    shape[axis] = size - n
    return torch.cat((t, t.new_full(shape, value)), axis)


# Prompt counts a warm-up covers (:meth:`probench.models.base.BaseDetector.warmup`): the
# buckets 1, 2, 4 and 8; a larger set compiles or captures its graph on first use.
WARMUP_PROMPTS = 8


def add_runtime_arguments(parser: ArgumentParser | _ArgumentGroup) -> None:
    """``--runtime`` and ``--warmup-size``: the flags of the grounding node's ``runtime`` and
    ``warmup_size`` (``ground``, ``eval``)."""
    from probench.models.spec import RUNTIMES

    parser.add_argument("--runtime", default="torch", choices=RUNTIMES,
                        help="the model's runtime (default torch; compiled: torch.compile on a CPU, CUDA "
                        "graphs on a GPU; docs/ACCELERATION.md)")
    parser.add_argument("--warmup-size", default="", metavar="WxH",
                        help="warm up on a blank WIDTHxHEIGHT frame with 1, 2, 4 and 8 prompts before the "
                        "first frame (the compiled runtime captures its graphs then); default: none")


def parse_warmup_size(text: str, what: str = "warmup_size") -> tuple[int, int] | None:
    """``"WIDTHxHEIGHT"`` (e.g. ``1280x720``) -> ``(height, width)``; ``""``: None (no warm-up).
    A malformed value is a one-line :class:`ValueError` naming ``what``."""
    text = text.strip().lower()
    if not text:
        return None
    parts = text.split("x")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        width, height = int(parts[0]), int(parts[1])
        if 1 <= width <= 16384 and 1 <= height <= 16384:
            return height, width
    raise ValueError(f"{what} must be WIDTHxHEIGHT in pixels (1..16384 each, e.g. 1280x720) or empty, "
                     f"got {text!r}")


def warmup_size_flag(text: str) -> tuple[int, int] | None:
    """``--warmup-size``: :func:`parse_warmup_size`, a bad value a one-line UsageError."""
    from probench.errors import UsageError

    try:
        return parse_warmup_size(text, "--warmup-size")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
