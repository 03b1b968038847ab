"""ONNX Runtime for the OWL detectors: the exported image path (:mod:`.onnx_export`) run by
onnxruntime, the text tower and the pre/post-processing those of the PyTorch adapter
(:class:`probench.models.owl.OwlDetector`), so the two differ only in the forward pass."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from probench.models.accel.cache import ArtifactCache
from probench.models.accel.errors import AccelError, RuntimeUnavailableError
from probench.models.accel.onnx_export import INPUTS, export_owl_onnx, owl_onnx_parts
from probench.models.accel.owl_runtime import ExportedOwlDetector
from probench.models.base import BaseDetector
from probench.models.errors import import_backend
from probench.models.owl import OwlDetector

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and onnxruntime (pyproject)
    from pathlib import Path

    from onnxruntime import InferenceSession
    from torch import Tensor


def _onnxruntime() -> ModuleType:
    return import_backend(
        "onnxruntime", lambda exc: f"onnxruntime is not installed ({exc}); pip install onnxruntime",
        RuntimeUnavailableError,
    )


def providers_for(device: str) -> list[str]:
    """CPU, or CUDA first when the device is a GPU and onnxruntime-gpu offers it."""
    ort = _onnxruntime()
    if device.startswith("cuda"):
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise RuntimeUnavailableError(
                "device is CUDA but this onnxruntime has no CUDAExecutionProvider "
                "(pip install onnxruntime-gpu)"
            )
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


class OrtOwlDetector(ExportedOwlDetector):
    """An :class:`OwlDetector` whose image path runs in ONNX Runtime (fp32)."""

    runtime = "onnxruntime"

    def __init__(self, base: OwlDetector, onnx_path: Path, session: InferenceSession) -> None:
        super().__init__(base)
        self.onnx_path, self.session = onnx_path, session

    def run_head(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        import torch

        feeds = {name: t.detach().float().cpu().numpy() for name, t in zip(INPUTS, inputs, strict=True)}
        try:
            logits, boxes = self.session.run(None, feeds)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise AccelError(f"{self.name}: onnxruntime inference failed: {exc}") from exc
        return torch.from_numpy(np.asarray(logits)), torch.from_numpy(np.asarray(boxes))


def to_onnxruntime(base: BaseDetector, cache: ArtifactCache | None = None) -> OrtOwlDetector:
    """Export (once, cached by weights + geometry) and wrap an OWL detector."""
    if not isinstance(base, OwlDetector):
        from probench.models.accel.errors import UnsupportedRuntimeError

        raise UnsupportedRuntimeError(
            f"{base.name}: onnxruntime is provided for the OWL models (owlvit, owlv2-*) "
            "and, through ultralytics' own export, the YOLO-World/YOLOE models"
        )
    ort = _onnxruntime()
    cache = cache or ArtifactCache()
    parts = owl_onnx_parts(base.model, base.name)
    path = cache.get_or_build("owl", parts, ".onnx", lambda tmp: export_owl_onnx(base.model, tmp))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # errors only
    try:
        session = ort.InferenceSession(str(path), sess_options=opts, providers=providers_for(base.device))
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise AccelError(f"cannot open {path} with onnxruntime: {exc}") from exc
    return OrtOwlDetector(base, path, session)
