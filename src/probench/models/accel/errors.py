"""Errors of the acceleration room (ONNX export, ONNX Runtime, TensorRT)."""

from probench.models.errors import BackendUnavailableError, ModelError

TENSORRT_HINT = "TensorRT needs an NVIDIA GPU and the tensorrt package (pip install tensorrt)"


class AccelError(ModelError):
    """An export, engine build or accelerated run failed."""


class ExportError(AccelError):
    """A model could not be exported to ONNX (or an engine)."""


class RuntimeUnavailableError(BackendUnavailableError):
    """The requested runtime (onnxruntime, TensorRT) is missing or cannot run here."""


class UnsupportedRuntimeError(AccelError):
    """The model has no export path for the requested runtime."""


class CaptureError(AccelError):
    """The compiled runtime could not compile or capture a model's image head."""
