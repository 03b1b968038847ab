"""ONNX export of the OWL image path (OWL-ViT and OWLv2).

What is exported is the per-frame computation of :class:`probench.models.owl.OwlDetector`
(its image head, :func:`probench.models.owl.owl_image_head`: ``image_embedder`` ->
``class_predictor`` + ``box_predictor``) with the **cached text
embeddings as an input**: ``(pixel_values[B,3,S,S], query_embeds[1,Q,D]) -> (logits[B,P,Q],
pred_boxes[B,P,4])``. The text tower stays in PyTorch and runs once per prompt set, so a
prompt change never needs a new ONNX file or TensorRT engine (Q is a dynamic axis).

Exporter: ``torch.onnx.export(..., dynamo=False)`` (TorchScript-based). The dynamo exporter
needs ``onnxscript``, which is not installed here.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from probench.models.accel.errors import ExportError
from probench.models.owl import HEAD_INPUTS, HEAD_OUTPUTS, owl_geometry, owl_image_head

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and transformers (pyproject)
    from torch.nn import Module
    from transformers import PreTrainedModel

OPSET = 17
INPUTS, OUTPUTS = HEAD_INPUTS, HEAD_OUTPUTS  # the image head's names (probench.models.owl)


def model_fingerprint(model: Module) -> str:
    """SHA-256 over every parameter and buffer (names, shapes, dtypes, values): the identity
    of the weights an exported file was made from."""
    import torch

    h = hashlib.sha256()
    with torch.no_grad():
        for name, t in model.state_dict().items():
            h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
            h.update(t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def export_owl_onnx(model: PreTrainedModel, path: str | Path, *, opset: int = OPSET) -> Path:
    """Write the OWL image path of ``model`` (fp32, CPU copy) as ONNX to ``path``."""
    import copy

    import torch

    side, dim = owl_geometry(model)
    cpu_model = copy.deepcopy(model).to(device="cpu", dtype=torch.float32).eval()
    head = owl_image_head(cpu_model)
    example = (torch.rand(1, 3, side, side), torch.randn(1, 2, dim))
    path = Path(path)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # tracer warnings about shape-dependent Python code
            torch.onnx.export(
                head, example, str(path), input_names=list(INPUTS), output_names=list(OUTPUTS),
                dynamic_axes={
                    "pixel_values": {0: "batch"},
                    "query_embeds": {1: "queries"},
                    "logits": {0: "batch", 2: "queries"},
                    "pred_boxes": {0: "batch"},
                },
                opset_version=opset, dynamo=False,
            )
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ExportError(f"ONNX export of the OWL image path failed: {exc}") from exc
    return path


def owl_onnx_parts(model: PreTrainedModel, name: str, opset: int = OPSET) -> dict[str, object]:
    """What an exported OWL ONNX file depends on (its cache key)."""
    import torch

    side, dim = owl_geometry(model)
    return {
        "model": name, "weights": model_fingerprint(model), "class": type(model).__name__,
        "image_size": side, "query_dim": dim, "opset": opset, "torch": torch.__version__,
    }
