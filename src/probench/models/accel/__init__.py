"""Accelerated runtimes for zoo detectors: compiled graphs, ONNX Runtime and TensorRT.

``compiled`` (:mod:`.compiled`) serves every detector whose adapter exposes its image head
(:mod:`probench.models.head`): ``torch.compile`` on a CPU, CUDA graphs on a GPU (untested
on a GPU here). The table below is the exported runtimes'.

The registry (:func:`probench.models.zoo.load_detector`) builds the PyTorch detector and
hands it to :func:`wrap` with its spec; the wrapper is chosen from the spec's data
(``Capabilities.accel``), never by importing the registry. Grounding DINO / MM-GD / LLMDet,
OmDet-T and SAM3 / SAM3-Lite (``accel="head"``) export their image head
(:mod:`probench.models.head`) generically (:mod:`.head_runtime`): ONNX with the prompt axes
dynamic, run by ONNX Runtime (fp32) or built into an FP16 TensorRT engine (UNTESTED, no
GPU). The OWL and ultralytics paths:

=============  ======================================  =========================================
runtime        OWL-ViT / OWLv2 (transformers)          YOLO-World / YOLOE (ultralytics)
=============  ======================================  =========================================
``torch``      the PyTorch detector as is              the PyTorch detector as is
``onnxruntime`` image path exported to ONNX (text        ``model.export(format="onnx")``, vocabulary
               embeddings an input), run by ORT         baked in, one file per prompt set
``tensorrt``   that ONNX built into an FP16 engine     ``model.export(format="engine")`` FP16,
               (dynamic query axis: no rebuild on      one engine per prompt set, cached
               prompt change) -- UNTESTED, no GPU      -- UNTESTED, no GPU
=============  ======================================  =========================================

Exported files are cached under ``$PROBENCH_ENGINE_CACHE`` (default
``~/.cache/probench/engines``), keyed by weights, prompts where baked in, input size,
precision and versions. Heavy imports happen inside the functions.
"""

from __future__ import annotations

from probench.errors import UsageError
from probench.models.base import BaseDetector
from probench.models.spec import RUNTIMES, ModelSpec


def check_runtime(spec: ModelSpec, runtime: str, *, device: str, precision: str) -> None:
    """Refuse an impossible runtime before any model is built (a clear one-line error)."""
    from probench.models.accel.errors import UnsupportedRuntimeError

    if runtime not in RUNTIMES:
        raise UsageError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime in ("torch", "compiled"):  # compiled: any adapter with an image head (wrap)
        return
    caps = spec.capabilities
    if caps.accel is None or not (caps.onnx if runtime == "onnxruntime" else caps.tensorrt):
        raise UnsupportedRuntimeError(
            f"{spec.name}: no {runtime} path (provided for the OWL, Grounding DINO, OmDet-T, SAM3, "
            "YOLO-World and YOLOE families; the others run in PyTorch)"
        )
    if runtime == "tensorrt":
        from probench.models.accel.tensorrt import require_tensorrt

        require_tensorrt(device)
    if runtime == "onnxruntime" and precision != "fp32":
        raise UsageError("the onnxruntime path runs in fp32; use --precision fp32")


def wrap(base: BaseDetector, spec: ModelSpec, runtime: str, *, cache_dir: str | None = None) -> BaseDetector:
    """``base`` (the spec's PyTorch detector) on ``runtime`` (see the module doc)."""
    from probench.models.accel.cache import ArtifactCache
    from probench.models.accel.errors import UnsupportedRuntimeError

    if runtime == "compiled":
        from probench.models.accel.compiled import to_compiled

        return to_compiled(base)
    cache = ArtifactCache(cache_dir)
    family = spec.capabilities.accel
    if family == "owl":
        if runtime == "onnxruntime":
            from probench.models.accel.ort import to_onnxruntime

            return to_onnxruntime(base, cache)
        from probench.models.accel.tensorrt import to_tensorrt

        return to_tensorrt(base, cache)
    if family == "head":
        from probench.models.accel import head_runtime

        if runtime == "onnxruntime":
            return head_runtime.to_onnxruntime(base, cache)
        return head_runtime.to_tensorrt(base, cache)
    if family == "ultralytics":
        from probench.models.accel.ultra_export import to_exported

        return to_exported(base, "onnx" if runtime == "onnxruntime" else "engine", cache)
    raise UnsupportedRuntimeError(f"{spec.name}: no {runtime} path")
