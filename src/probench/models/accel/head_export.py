"""ONNX export of any detector's image head (:class:`probench.models.head.ImageHead`).

One function for every family that exposes a head (Grounding DINO / MM-GD / LLMDet, OmDet-T,
SAM3 / SAM3-Lite): the head's module is traced with the inputs of a real call, its tensors
named by ``input_names`` / ``output_names``, the axes in ``prompt_axes`` dynamic, so a new
prompt set (another prompt or token count) never needs a new file. Every other dimension
is fixed by the trace (spatial shapes, level start indices and the like are constants of
it), so a file is made per input geometry: the cache key holds the family, the weights'
fingerprint, every input's shape with its prompt axis left out, the dtypes, the opset and
torch's version. A head runs one frame per call (batch 1).

Exporter: ``torch.onnx.export(..., dynamo=False)`` (TorchScript-based); the dynamo exporter
needs ``onnxscript``, which is not installed here.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from probench.models.accel.errors import ExportError
from probench.models.accel.onnx_export import OPSET, model_fingerprint

if TYPE_CHECKING:  # names for the checker only: mypy skips torch (pyproject)
    from torch import Tensor
    from torch.nn import Module

    from probench.models.head import ImageHead

Geometry = tuple[tuple[tuple[int, ...], str], ...]  # per input: shape (prompt axis -1), dtype


def geometry(head: ImageHead, inputs: tuple[Tensor, ...]) -> Geometry:
    """What a traced file is specific to: each input's shape, its prompt axis as -1, and dtype."""
    if len(inputs) != len(head.input_names):
        raise ExportError(f"{head.family} head takes {len(head.input_names)} inputs, got {len(inputs)}")
    out = []
    for name, t in zip(head.input_names, inputs, strict=True):
        shape = list(t.shape)
        axis = head.prompt_axes.get(name)
        if axis is not None:
            shape[axis] = -1
        out.append((tuple(int(s) for s in shape), str(t.dtype).removeprefix("torch.")))
    return tuple(out)


def head_onnx_parts(
    head: ImageHead, name: str, weights: str, geo: Geometry, opset: int = OPSET
) -> dict[str, object]:
    """What an exported head depends on (its cache key)."""
    import torch

    return {
        "family": head.family, "model": name, "weights": weights, "class": type(head.module).__qualname__,
        "inputs": list(head.input_names), "outputs": list(head.output_names),
        "prompt_axes": dict(sorted(head.prompt_axes.items())),
        "geometry": [[list(shape), dtype] for shape, dtype in geo], "opset": opset,
        "torch": torch.__version__,
    }


def dynamic_axes(head: ImageHead) -> dict[str, dict[int, str]]:
    """ONNX dynamic axes: each prompt axis, named after its tensor."""
    return {name: {axis: f"{name}_n"} for name, axis in head.prompt_axes.items()}


def _cpu_fp32(module: Module) -> Module:
    """The module as is when it is already fp32 on the CPU, else an fp32 CPU copy (a GPU fp16
    detector exports the same graph; the export never touches its weights)."""
    import torch

    tensors = [*module.parameters(), *module.buffers()]
    if all(t.device.type == "cpu" and (t.dtype == torch.float32 or not t.is_floating_point())
           for t in tensors):
        return module
    return copy.deepcopy(module).to(device="cpu", dtype=torch.float32).eval()


def cpu_inputs(inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """Inputs as the exported file takes them: on the CPU, floating ones fp32."""
    import torch

    return tuple(t.detach().to("cpu", torch.float32) if t.is_floating_point() else t.detach().cpu()
                 for t in inputs)


def export_head_onnx(
    head: ImageHead, inputs: tuple[Tensor, ...], path: str | Path, *, opset: int = OPSET
) -> Path:
    """Trace ``head`` on ``inputs`` (a real call's, any prompt count) and write it as ONNX (fp32)."""
    import torch

    module, example = _cpu_fp32(head.module), cpu_inputs(inputs)
    path = Path(path)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # tracer warnings about shape-dependent Python code
            torch.onnx.export(
                module, example, str(path), input_names=list(head.input_names),
                output_names=list(head.output_names), dynamic_axes=dynamic_axes(head),
                opset_version=opset, dynamo=False,
            )
    except (RuntimeError, TypeError, ValueError, torch.onnx.errors.OnnxExporterError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ExportError(f"ONNX export of the {head.family} image head failed: {first}") from exc
    _float_grid_samples(path)
    return path


def _float_grid_samples(path: Path) -> None:
    """Cast any float64 input of a GridSample node to float32, in place. The TorchScript
    exporter turns the deformable attention's ``linspace`` reference points into float64 for
    some input sizes (Grounding DINO at a square 64 px input), and ONNX Runtime's CPU
    GridSample has no float64 kernel; eager PyTorch computes these in float32 too."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(path))
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type
             for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]}
    nodes, changed = [], False
    for node in model.graph.node:
        if node.op_type == "GridSample":
            for i, name in enumerate(node.input):
                if types.get(name) == TensorProto.DOUBLE:
                    cast_out = f"{name}__as_float32"
                    nodes.append(helper.make_node("Cast", [name], [cast_out], to=TensorProto.FLOAT,
                                                  name=f"{node.name}__cast{i}"))
                    node.input[i] = cast_out
                    changed = True
        nodes.append(node)
    if changed:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        onnx.save(model, str(path))


def head_fingerprint(head: ImageHead) -> str:
    """The weights' identity (SHA-256 over the head module's state dict)."""
    return model_fingerprint(head.module)
