"""Accelerated runtimes for zoo detectors: ONNX Runtime and TensorRT.

``load_accelerated(name, runtime=...)`` builds the PyTorch detector with
:func:`probench.models.zoo.load_detector`, then:

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

from typing import Any

RUNTIMES = ("torch", "onnxruntime", "tensorrt")


def load_accelerated(
    name: str,
    *,
    runtime: str = "torch",
    device: str = "cpu",
    precision: str = "fp32",
    score_threshold: float = 0.0,
    weights: str | None = None,
    random_weights: bool = False,
    cache_dir: str | None = None,
) -> Any:
    """A zoo detector on the given runtime (see the module doc for what each one does)."""
    from probench.errors import UsageError
    from probench.models.zoo import load_detector

    if runtime not in RUNTIMES:
        raise UsageError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime == "tensorrt":
        from probench.models.accel.tensorrt import require_tensorrt

        require_tensorrt(device)  # fail before any model is built
    if runtime == "onnxruntime" and precision != "fp32":
        raise UsageError("the onnxruntime path runs in fp32; use --precision fp32")
    base = load_detector(
        name, device=device, precision=precision, score_threshold=score_threshold,
        weights=weights, random_weights=random_weights,
    )
    if runtime == "torch":
        return base
    from probench.models.accel.cache import ArtifactCache

    cache = ArtifactCache(cache_dir)
    det = _wrap(base, runtime, cache)
    info = dict(getattr(base, "model_info", {}) or {})
    info["runtime"] = runtime
    det.model_info = info
    return det


def _wrap(base: Any, runtime: str, cache: Any) -> Any:
    from probench.models.accel.errors import UnsupportedRuntimeError

    backend = type(base).__module__
    if backend == "probench.models.owl":
        if runtime == "onnxruntime":
            from probench.models.accel.ort import to_onnxruntime

            return to_onnxruntime(base, cache)
        from probench.models.accel.tensorrt import to_tensorrt

        return to_tensorrt(base, cache)
    if backend == "probench.models.ultra":
        from probench.models.accel.ultra_export import to_exported

        return to_exported(base, "onnx" if runtime == "onnxruntime" else "engine", cache)
    raise UnsupportedRuntimeError(
        f"{getattr(base, 'name', base)}: no {runtime} path (provided for owlvit, owlv2-*, "
        "yolo-world-*, yoloe-*; the others run in PyTorch)"
    )
