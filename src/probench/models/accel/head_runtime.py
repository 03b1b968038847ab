"""ONNX Runtime and TensorRT for any detector with an image head (:mod:`probench.models.head`):
Grounding DINO / MM-GD / LLMDet, OmDet-T, SAM3 / SAM3-Lite.

The detector stays the PyTorch adapter (preprocessing, text side, post-processing); only its
``run_head`` is replaced by a runner that executes the exported head (:mod:`.head_export`).
A runner exports lazily, on the first call of each input geometry (every input shape but
the prompt axes: one per frame size for Grounding DINO, one in all for OmDet-T and SAM3),
through the artefact cache, so a warm-up frame pays for it and later runs find the file.

- ``onnxruntime``: fp32, CPU (CUDA when onnxruntime-gpu offers it); the prompt axes dynamic.
- ``tensorrt``: the same ONNX built into an FP16 engine whose optimisation profile spans
  1..``MAX_QUERIES`` along each prompt axis (:func:`profile_shapes`), run on CUDA tensors.
  UNTESTED on a GPU here (this machine has none and no tensorrt package); the profile logic
  and the refusals are unit-tested on the CPU.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from probench.models.accel.cache import ArtifactCache
from probench.models.accel.errors import AccelError, UnsupportedRuntimeError
from probench.models.accel.head_export import (
    Geometry,
    cpu_inputs,
    export_head_onnx,
    geometry,
    head_fingerprint,
    head_onnx_parts,
)
from probench.models.base import BaseDetector

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and onnxruntime (pyproject)
    from onnxruntime import InferenceSession
    from torch import Tensor

    from probench.models.head import ImageHead

Shapes = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]  # name -> min, opt, max
Inputs = tuple["Tensor", ...]
Run = Callable[[Inputs], Inputs]  # the head on one runtime, for one geometry
# (engine path, input names, output names, trt=module) -> a callable running the engine
EngineFactory = Callable[..., Callable[..., Inputs]]


def head_of(base: BaseDetector, runtime: str) -> ImageHead:
    """The detector's image head, or a clear refusal naming the fallback."""
    head = base.image_head()
    if head is None:
        raise UnsupportedRuntimeError(
            f"{base.name}: no image head to export, so no {runtime} path; use --runtime torch"
        )
    return head


class _HeadRunner(abc.ABC):
    """Per input geometry: one exported file and what runs it (``_open``)."""

    runtime = "torch"

    def __init__(self, base: BaseDetector, head: ImageHead, cache: ArtifactCache) -> None:
        self.name, self.head, self.cache = base.name, head, cache
        self._weights: str | None = None
        self._by_geometry: dict[Geometry, Run] = {}
        self.files: list[Path] = []  # what this runner exported or found (tests, logs)

    def onnx_for(self, inputs: tuple[Tensor, ...]) -> tuple[Geometry, Path]:
        geo = geometry(self.head, inputs)
        if self._weights is None:
            self._weights = head_fingerprint(self.head)
        parts = head_onnx_parts(self.head, self.name, self._weights, geo)
        path = self.cache.get_or_build(self.head.family, parts, ".onnx",
                                       lambda tmp: export_head_onnx(self.head, inputs, tmp))
        return geo, path

    def __call__(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        geo = geometry(self.head, inputs)
        run = self._by_geometry.get(geo)
        if run is None:
            _, path = self.onnx_for(inputs)
            run = self._by_geometry[geo] = self._open(path, inputs)
        return run(inputs)

    @abc.abstractmethod
    def _open(self, onnx_path: Path, inputs: Inputs) -> Run:
        """What runs the exported file at ``onnx_path`` (ORT session, TensorRT engine)."""


class OrtHeadRunner(_HeadRunner):
    """The head as an ONNX Runtime session (fp32); outputs come back as fp32 tensors on the
    device of the first input."""

    runtime = "onnxruntime"

    def __init__(self, base: BaseDetector, head: ImageHead, cache: ArtifactCache) -> None:
        from probench.models.accel.ort import providers_for

        super().__init__(base, head, cache)
        self.providers = providers_for(base.device)

    def _open(self, onnx_path: Path, inputs: Inputs) -> Run:
        from probench.models.accel.ort import _onnxruntime

        ort = _onnxruntime()
        opts = ort.SessionOptions()
        opts.log_severity_level = 3  # errors only
        try:
            session = ort.InferenceSession(str(onnx_path), sess_options=opts, providers=self.providers)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise AccelError(f"cannot open {onnx_path} with onnxruntime: {exc}") from exc
        self.files.append(onnx_path)
        return lambda xs: self._run(session, xs)

    def _run(self, session: InferenceSession, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        import torch

        feeds = {name: t.numpy() for name, t in zip(self.head.input_names, cpu_inputs(inputs), strict=True)}
        try:
            outs = session.run(list(self.head.output_names), feeds)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise AccelError(f"{self.name}: onnxruntime inference failed: {exc}") from exc
        device = inputs[0].device
        return tuple(torch.from_numpy(np.asarray(o)).to(device) for o in outs)


def profile_shapes(
    head: ImageHead, inputs: tuple[Tensor, ...], *, max_prompts: int, opt_prompts: int
) -> Shapes:
    """TensorRT's optimisation profile for one geometry: every input's shape as in ``inputs``,
    its prompt axis spanning 1 (min), ``opt_prompts`` and ``max_prompts``."""
    if not 1 <= opt_prompts <= max_prompts:
        raise ValueError(f"need 1 <= opt ({opt_prompts}) <= max ({max_prompts})")
    shapes: Shapes = {}
    for name, t in zip(head.input_names, inputs, strict=True):
        shape = tuple(int(s) for s in t.shape)
        axis = head.prompt_axes.get(name)
        if axis is None:
            shapes[name] = (shape, shape, shape)
            continue
        if shape[axis] > max_prompts:
            raise AccelError(f"{name}: {shape[axis]} along the prompt axis exceed the engine profile "
                             f"({max_prompts})")
        at = [(*shape[:axis], n, *shape[axis + 1 :]) for n in (1, opt_prompts, max_prompts)]
        shapes[name] = (at[0], at[1], at[2])
    return shapes


class TrtHeadRunner(_HeadRunner):
    """The head as an FP16 TensorRT engine (UNTESTED on a GPU, module doc)."""

    runtime = "tensorrt"

    def __init__(
        self, base: BaseDetector, head: ImageHead, cache: ArtifactCache, *, trt: ModuleType, gpu: str,
        fp16: bool = True, engine_runner: EngineFactory | None = None,
    ) -> None:
        super().__init__(base, head, cache)
        self.trt, self.gpu, self.fp16 = trt, gpu, fp16
        self.engine_runner = engine_runner

    def _open(self, onnx_path: Path, inputs: Inputs) -> Run:
        from probench.models.accel import tensorrt as trt_build

        shapes = profile_shapes(self.head, inputs, max_prompts=trt_build.MAX_QUERIES,
                                opt_prompts=trt_build.OPT_QUERIES)
        parts: Mapping[str, object] = {
            "onnx": onnx_path.name, "fp16": self.fp16, "tensorrt": str(getattr(self.trt, "__version__", "?")),
            "gpu": self.gpu, "profile": {k: [list(s) for s in v] for k, v in sorted(shapes.items())},
        }
        engine = self.cache.get_or_build(
            f"{self.head.family}-trt", parts, ".engine",
            lambda tmp: trt_build.build_profiled_engine(onnx_path, tmp, shapes, fp16=self.fp16, trt=self.trt),
        )
        self.files.append(engine)
        make = self.engine_runner or trt_build.HeadEngineRunner
        runner = make(engine, self.head.input_names, self.head.output_names, trt=self.trt)
        return lambda xs: runner(*xs)


def attach(base: BaseDetector, runner: _HeadRunner) -> BaseDetector:
    """``base`` with its head on ``runner``: the instance's ``run_head`` is the runner (the
    adapter calls nothing else per frame), its name suffixed with the runtime."""
    base.name = f"{base.name}@{runner.runtime}"
    vars(base)["run_head"] = runner  # an instance attribute shadows BaseDetector.run_head
    vars(base)["head_runner"] = runner
    return base


def to_onnxruntime(base: BaseDetector, cache: ArtifactCache | None = None) -> BaseDetector:
    """A head-based detector whose head runs in ONNX Runtime (fp32)."""
    from probench.models.accel.ort import _onnxruntime

    _onnxruntime()  # a missing package is refused before anything is built
    head = head_of(base, "onnxruntime")
    return attach(base, OrtHeadRunner(base, head, cache or ArtifactCache()))


def to_tensorrt(
    base: BaseDetector, cache: ArtifactCache | None = None, *, fp16: bool = True,
    trt: ModuleType | None = None, engine_runner: EngineFactory | None = None,
) -> BaseDetector:
    """A head-based detector whose head runs as an FP16 TensorRT engine (UNTESTED on a GPU)."""
    from probench.models.accel.tensorrt import require_tensorrt

    trt = trt or require_tensorrt(base.device)
    head = head_of(base, "tensorrt")
    import torch

    gpu = torch.cuda.get_device_name(base.device) if torch.cuda.is_available() else "none"
    runner = TrtHeadRunner(base, head, cache or ArtifactCache(), trt=trt, gpu=gpu, fp16=fp16,
                           engine_runner=engine_runner)
    return attach(base, runner)
