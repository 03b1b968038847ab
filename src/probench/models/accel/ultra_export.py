"""YOLO-World / YOLOE through ultralytics' own exporters, the vocabulary baked in.

ultralytics exports a model whose classes are fixed: YOLO-World's text features and YOLOE's
fused text embeddings become constants of the ONNX graph / TensorRT engine. So the exported
file depends on the prompt set: one file per (weights, prompts, input size, precision,
max_det, versions), cached on disk by that key (:class:`~.cache.ArtifactCache`), rebuilt only
for a prompt set not seen before, and reloaded when the prompt set changes back.

Formats: ``onnx`` (runs here, with onnxruntime on CPU) and ``engine`` (TensorRT, FP16 on an
NVIDIA GPU; UNTESTED here: no GPU). Exported models take a fixed square input, so a
non-square image is letterboxed to a square (PyTorch letterboxes to the nearest multiple of
32): boxes equal PyTorch's on square images, and differ slightly on others.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from probench.detections import Detections
from probench.models.accel.cache import ArtifactCache
from probench.models.accel.errors import ExportError, RuntimeUnavailableError
from probench.models.base import BaseDetector
from probench.models.hf_common import MAX_PER_PROMPT
from probench.models.ultra.adapter import UltralyticsDetector
from probench.models.ultra.postprocess import results_to_detections

if TYPE_CHECKING:  # names for the checker only: mypy skips ultralytics (pyproject)
    from ultralytics import YOLO

FORMATS = {"onnx": ".onnx", "engine": ".engine"}

Exporter = Callable[[UltralyticsDetector, Path, str, int], None]
Loader = Callable[[Path, UltralyticsDetector], "YOLO"]


def export_with_ultralytics(base: UltralyticsDetector, out: Path, fmt: str, max_det: int) -> None:
    """``model.export(format=fmt)`` of the base detector's model (its vocabulary as set), the
    file written at ``out``."""
    model = base.model
    inner = model.model
    old = getattr(inner, "pt_path", None)
    # ultralytics names the exported file after pt_path: point it into the target folder
    inner.pt_path = str(out.parent / f"{out.stem}.pt")
    kwargs: dict[str, object] = {"format": fmt, "imgsz": base.imgsz, "device": base.device,
                              "max_det": max_det, "verbose": False}
    if fmt == "onnx":
        kwargs["simplify"] = False  # onnxslim is not a dependency; the graph runs as exported
    if base.half:
        kwargs["quantize"] = 16  # FP16 engine (ultralytics' replacement of half=True)
    try:
        with warnings.catch_warnings():
            # tracer warnings say shapes/vocabulary become constants: that is the point here
            warnings.simplefilter("ignore")
            produced = model.export(**kwargs)
    except (RuntimeError, ValueError, AssertionError, ImportError, TypeError) as exc:
        raise ExportError(f"{base.name}: ultralytics {fmt} export failed: {exc}") from exc
    finally:
        inner.pt_path = old
    os.replace(produced, out)


def load_with_ultralytics(path: Path, base: UltralyticsDetector) -> YOLO:
    from ultralytics import YOLO

    task = "segment" if "Segment" in type(base.model.model.model[-1]).__name__ else "detect"
    model: YOLO = YOLO(str(path), task=task)
    return model


class UltralyticsExportedDetector(BaseDetector):
    """A YOLO-World/YOLOE model run from an exported file (ONNX or TensorRT engine)."""

    # The text state is a loaded engine with the vocabulary baked in: keep only the active
    # one in memory (GPU memory); the files stay in the artefact cache, so a set seen before
    # is reloaded, not rebuilt.
    text_cache_size = 1

    def __init__(
        self, base: UltralyticsDetector, fmt: str, cache: ArtifactCache | None = None,
        exporter: Exporter = export_with_ultralytics, loader: Loader = load_with_ultralytics,
    ) -> None:
        if fmt not in FORMATS:
            raise ExportError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")
        super().__init__(device=base.device, score_threshold=base.score_threshold)
        self.base, self.fmt = base, fmt
        self.runtime = "onnxruntime" if fmt == "onnx" else "tensorrt"
        self.name = f"{base.name}@{self.runtime}"
        self.cache = cache or ArtifactCache()
        self.exporter, self.loader = exporter, loader
        self.weights_source = base.weights_source
        self.artifact: Path | None = None
        self._fingerprint: str | None = None

    def key_parts(self, prompts: tuple[str, ...]) -> dict[str, object]:
        """Everything the exported file depends on."""
        if self._fingerprint is None:
            from probench.models.accel.onnx_export import model_fingerprint

            self._fingerprint = model_fingerprint(self.base.model.model)
        parts: dict[str, object] = {
            "model": self.base.name, "weights": self._fingerprint, "prompts": list(prompts),
            "imgsz": self.base.imgsz, "half": self.base.half, "format": self.fmt,
            "max_det": MAX_PER_PROMPT * len(prompts), "versions": _versions(self.fmt),
        }
        if self.fmt == "engine":
            parts["gpu"] = _gpu_name(self.device)  # engines are specific to the GPU model
        return parts

    def _encode_prompts(self, prompts: tuple[str, ...]) -> object:
        self.base.set_prompts(prompts)  # text encoder + vocabulary on the PyTorch model
        max_det = MAX_PER_PROMPT * len(prompts)
        self.artifact = self.cache.get_or_build(
            f"{self.base.name}-vocab", self.key_parts(prompts), FORMATS[self.fmt],
            lambda tmp: self.exporter(self.base, tmp, self.fmt, max_det),
        )
        return self.loader(self.artifact, self.base)

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        exported: YOLO = text_state  # the ultralytics YOLO loaded from the exported file
        results = exported.predict(  # ultralytics' own preprocessing (the reference path)
            np.ascontiguousarray(image[..., ::-1]), imgsz=self.base.imgsz, conf=self.base.conf,
            max_det=MAX_PER_PROMPT * len(self._prompts), device=self.device, verbose=False,
        )
        return results_to_detections(results[0], image.shape[:2])


def _versions(fmt: str) -> dict[str, str]:
    import torch
    import ultralytics

    out = {"torch": torch.__version__, "ultralytics": ultralytics.__version__}
    if fmt == "engine":
        try:
            import tensorrt

            out["tensorrt"] = tensorrt.__version__
        except ImportError:
            out["tensorrt"] = "missing"
    return out


def _gpu_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        name: str = torch.cuda.get_device_name(torch.device(device))
        return name
    return "none"


def to_exported(
    base: BaseDetector, fmt: str, cache: ArtifactCache | None = None
) -> UltralyticsExportedDetector:
    if not isinstance(base, UltralyticsDetector):
        raise ExportError(f"{base.name} is not an ultralytics detector")
    if fmt == "onnx":
        try:
            import onnxruntime  # noqa: F401 - ultralytics runs exported ONNX with it
        except ImportError as exc:
            raise RuntimeUnavailableError("onnxruntime is not installed; pip install onnxruntime") from exc
    return UltralyticsExportedDetector(base, fmt, cache)
