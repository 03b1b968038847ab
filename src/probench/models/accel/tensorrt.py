"""TensorRT for the OWL detectors, and the engine builder and runner of every image head
(:mod:`.head_runtime`: Grounding DINO family, OmDet-T, SAM3): the ONNX image path built into an
FP16 engine with the tensorrt Python API, run on CUDA tensors. UNTESTED on a GPU here (this
machine has none); everything up to the TensorRT calls is unit-tested with a fake module.

The text embeddings are an engine input with a dynamic query axis (optimisation profile
1..``max_queries``), so a prompt change never rebuilds the engine; the engine depends only
on the weights, input size, precision, TensorRT version and GPU model (its cache key).
For YOLO-World/YOLOE, see :mod:`.ultra_export` (ultralytics' engine export, vocabulary
baked in, one engine per prompt set).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from probench.cache.atomic import write_bytes_atomic
from probench.models.accel.cache import ArtifactCache
from probench.models.accel.errors import TENSORRT_HINT, AccelError, ExportError, RuntimeUnavailableError
from probench.models.accel.onnx_export import INPUTS, OUTPUTS, export_owl_onnx, owl_onnx_parts
from probench.models.accel.owl_runtime import ExportedOwlDetector
from probench.models.base import BaseDetector
from probench.models.errors import import_backend
from probench.models.owl import OwlDetector, owl_geometry

if TYPE_CHECKING:  # names for the checker only: mypy skips torch (pyproject)
    from torch import Tensor

MAX_QUERIES = 256  # upper end of the query-axis profile (a Pro-Bench image has far fewer)
OPT_QUERIES = 8
WORKSPACE_GIB = 4


def tensorrt_module() -> ModuleType:
    """``import tensorrt`` or a clear :class:`RuntimeUnavailableError`."""
    return import_backend("tensorrt", lambda exc: f"{TENSORRT_HINT} ({exc})", RuntimeUnavailableError)


def require_tensorrt(device: str) -> ModuleType:
    """TensorRT needs a CUDA device and the tensorrt package; checked before any build."""
    import torch

    if not str(device).startswith("cuda"):
        raise RuntimeUnavailableError(f"{TENSORRT_HINT}: use --device cuda (got {device!r})")
    if not torch.cuda.is_available():
        raise RuntimeUnavailableError(f"{TENSORRT_HINT}: no CUDA device is available here")
    return tensorrt_module()


def build_engine(
    onnx_path: str | Path, engine_path: str | Path, *, image_size: int, query_dim: int,
    fp16: bool = True, max_batch: int = 1, max_queries: int = MAX_QUERIES, trt: ModuleType | None = None,
) -> Path:
    """Parse the OWL ONNX file and write a serialised engine (FP16 when asked) with one
    optimisation profile: batch 1..max_batch, queries 1..max_queries."""
    s = int(image_size)
    shapes = {
        INPUTS[0]: ((1, 3, s, s), (1, 3, s, s), (max_batch, 3, s, s)),
        INPUTS[1]: ((1, 1, query_dim), (1, OPT_QUERIES, query_dim), (1, max_queries, query_dim)),
    }
    return build_profiled_engine(onnx_path, engine_path, shapes, fp16=fp16, trt=trt)


def build_profiled_engine(
    onnx_path: str | Path, engine_path: str | Path,
    shapes: Mapping[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]], *,
    fp16: bool = True, trt: ModuleType | None = None,
) -> Path:
    """Parse any ONNX file and write a serialised engine (FP16 when asked) with one
    optimisation profile: ``shapes`` maps each input to its (min, opt, max) shape."""
    trt = trt or tensorrt_module()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    # TensorRT 10+ networks are always explicit-batch; older versions need the flag.
    flag = getattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH", None)
    network = builder.create_network(0 if flag is None else 1 << int(flag))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(Path(onnx_path).read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ExportError(f"TensorRT could not parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_GIB << 30)
    if fp16:
        if not hasattr(trt.BuilderFlag, "FP16"):
            # TensorRT 11 dropped precision flags for strongly typed networks (FP16 in the ONNX)
            raise ExportError(
                f"TensorRT {getattr(trt, '__version__', '?')} has no FP16 builder flag; "
                "build with fp16=False or use TensorRT 10"
            )
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    for name, (lo, opt, hi) in shapes.items():
        profile.set_shape(name, lo, opt, hi)
    config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ExportError(f"TensorRT engine build from {onnx_path} failed (see the TensorRT log above)")
    write_bytes_atomic(engine_path, bytes(serialized))
    return Path(engine_path)


class OwlRunner(Protocol):
    """The OWL image path as an engine: (pixel_values, query_embeds) -> (logits, pred_boxes)."""

    def __call__(self, pixel_values: Tensor, query_embeds: Tensor) -> tuple[Tensor, Tensor]: ...


class EngineRunner:
    """Runs a deserialised engine on torch CUDA tensors (TensorRT 10 tensor-address API)."""

    def __init__(self, engine_path: str | Path, trt: ModuleType | None = None) -> None:
        trt = trt or tensorrt_module()
        self.trt = trt
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        self.engine = runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
        if self.engine is None:
            raise AccelError(f"cannot deserialise {engine_path} (built by another TensorRT version or GPU?)")
        self.context = self.engine.create_execution_context()

    def __call__(self, pixel_values: Tensor, query_embeds: Tensor) -> tuple[Tensor, Tensor]:
        import torch

        if query_embeds.shape[1] > MAX_QUERIES:
            raise AccelError(f"{query_embeds.shape[1]} prompts exceed the engine profile ({MAX_QUERIES})")
        inputs = {INPUTS[0]: pixel_values.float().contiguous(), INPUTS[1]: query_embeds.float().contiguous()}
        for name, t in inputs.items():
            self.context.set_input_shape(name, tuple(t.shape))
            self.context.set_tensor_address(name, t.data_ptr())
        outputs = {}
        for name in OUTPUTS:
            shape = tuple(self.context.get_tensor_shape(name))
            outputs[name] = torch.empty(shape, dtype=torch.float32, device=pixel_values.device)
            self.context.set_tensor_address(name, outputs[name].data_ptr())
        stream = torch.cuda.current_stream(pixel_values.device)
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise AccelError("TensorRT execution failed")
        return outputs[OUTPUTS[0]], outputs[OUTPUTS[1]]


class HeadEngineRunner(EngineRunner):
    """Any image head's engine: named inputs in, named fp32 outputs out (CUDA tensors)."""

    def __init__(
        self, engine_path: str | Path, input_names: Sequence[str], output_names: Sequence[str],
        trt: ModuleType | None = None,
    ) -> None:
        super().__init__(engine_path, trt=trt)
        self.input_names, self.output_names = tuple(input_names), tuple(output_names)

    def __call__(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        import torch

        device = inputs[0].device
        feeds = [t.float().contiguous() if t.is_floating_point() else t.contiguous() for t in inputs]
        for name, t in zip(self.input_names, feeds, strict=True):
            self.context.set_input_shape(name, tuple(t.shape))
            self.context.set_tensor_address(name, t.data_ptr())
        outputs = []
        for name in self.output_names:
            out = torch.empty(tuple(self.context.get_tensor_shape(name)), dtype=torch.float32, device=device)
            self.context.set_tensor_address(name, out.data_ptr())
            outputs.append(out)
        if not self.context.execute_async_v3(torch.cuda.current_stream(device).cuda_stream):
            raise AccelError("TensorRT execution failed")
        return tuple(outputs)


class TrtOwlDetector(ExportedOwlDetector):
    """An :class:`OwlDetector` whose image path runs as a TensorRT engine."""

    runtime = "tensorrt"

    def __init__(self, base: OwlDetector, engine_path: Path, runner: OwlRunner) -> None:
        super().__init__(base)
        self.engine_path, self.runner = engine_path, runner

    def run_head(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        pixel_values, query_embeds = inputs  # the OWL image head's inputs
        return self.runner(pixel_values, query_embeds)


def engine_parts(base: OwlDetector, fp16: bool, trt_version: str, gpu: str) -> dict[str, object]:
    return {**owl_onnx_parts(base.model, base.name), "fp16": fp16, "tensorrt": trt_version,
            "gpu": gpu, "max_queries": MAX_QUERIES}


def to_tensorrt(
    base: BaseDetector, cache: ArtifactCache | None = None, *, fp16: bool = True,
    trt: ModuleType | None = None, runner_cls: Callable[..., OwlRunner] = EngineRunner,
) -> TrtOwlDetector:
    """Export ONNX (cached), build the FP16 engine (cached), wrap the OWL detector."""
    if not isinstance(base, OwlDetector):
        from probench.models.accel.errors import UnsupportedRuntimeError

        raise UnsupportedRuntimeError(
            f"{base.name}: TensorRT is provided for the OWL models and, through "
            "ultralytics' engine export, the YOLO-World/YOLOE models"
        )
    trt = trt or require_tensorrt(base.device)
    import torch

    cache = cache or ArtifactCache()
    gpu = torch.cuda.get_device_name(base.dev) if torch.cuda.is_available() else "none"
    side, dim = owl_geometry(base.model)
    onnx_path = cache.get_or_build("owl", owl_onnx_parts(base.model, base.name), ".onnx",
                                   lambda tmp: export_owl_onnx(base.model, tmp))
    engine = cache.get_or_build(
        "owl-trt", engine_parts(base, fp16, str(getattr(trt, "__version__", "?")), gpu), ".engine",
        lambda tmp: build_engine(onnx_path, tmp, image_size=side, query_dim=dim, fp16=fp16, trt=trt),
    )
    return TrtOwlDetector(base, engine, runner_cls(engine, trt=trt))
