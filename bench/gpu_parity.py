"""CPU-against-CUDA parity of a detector's network, before any box is made (bench/gpu_check.py).

For one tiny model and one frame, the same detector is built on the CPU (fp32, the
reference) and on the device (fp32 or fp16). Forward hooks on every module of each network
record the *outermost* module calls of one ``detect()`` (the modules the adapter calls
itself: ultralytics' network; OWL's image embedder, class and box heads; G-DINO's and
OmDet's model; SAM3's vision encoder and detector): their inputs and outputs, cloned.

- **preprocessed**: each call's tensor inputs on the device path against the CPU path's
  (the pixel values each path built from the frame, and any text tensors passed in);
- **raw outputs**: each device module run again on the CPU call's own inputs (moved to the
  device, floating tensors cast to the device model's dtype) against the CPU module's
  outputs: the network's arithmetic alone, every output tensor (logits, boxes, feature
  maps, mask prototypes), never boxes after NMS or top-k.

The error of a tensor is ``max |device - cpu|`` (``max_abs``) and that over the CPU tensor's
largest magnitude (``max_rel``, so a model's scale does not matter); a model passes when
every tensor's ``max_rel`` is within :data:`TOLERANCE` of its precision. On CUDA, fp32 runs
with TF32 off (:func:`strict_fp32`): what is left is the order of summation (~1e-6 relative),
so a wrong input, a wrong dtype or a wrong kernel (errors of order 1) fails, and TF32's
10-bit mantissa (~1e-3) would too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# max |device - cpu| / max |cpu| per tensor. fp32 with TF32 off: summation order only.
# fp16: a 10-bit mantissa through a deep network. The same networks in fp16 on the CPU
# against fp32 (`python bench/gpu_parity.py calibrate`, 2-core x86-64 CPU): OWL-ViT / OWLv2
# 1.1e-3, SAM3 2.7e-3, YOLO-World-S 2.8e-2, YOLOE-S 4.5e-2, YOLO-World-X 0.22, YOLOE-X
# overflows (random weights); G-DINO / OmDet not emulated (their text caches hold fp32). So
# 2e-2 for fp16, and the YOLO family's rows are judged by fp16_limited.
TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2}
FP16_LIMITED = 4.0  # fp16_limited: the device's fp16 error within 4x the CPU's own
# the preprocessed inputs: the device path and the CPU path may round a pixel to the next
# 8-bit level (1/255 of the range, normalised: ~0.6% of the largest value), no more
PRE_TOLERANCE = 1e-2


def strict_fp32() -> None:
    """TF32 off for matmuls and cuDNN convolutions, highest float32 matmul precision."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def network(det: Any) -> Any:
    """The adapter's torch network: ``net`` (ultralytics' inner model) or ``model``."""
    import torch

    for attr in ("net", "model"):
        mod = getattr(det, attr, None)
        if isinstance(mod, torch.nn.Module):
            return mod
    raise TypeError(f"{det.name}: no torch network (net / model) to check")


@dataclass
class Call:
    """One outermost module call: its qualified name, inputs and output (cloned)."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any


def _mapped(obj: Any, fn: Callable[[Any], Any]) -> Any:
    """``obj`` with ``fn`` applied to every tensor, containers rebuilt as their own type
    (a transformers ``ModelOutput`` stays one: the next module reads its attributes)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        items = [_mapped(o, fn) for o in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        items_d = {k: _mapped(v, fn) for k, v in obj.items()}
        if type(obj) is dict:
            return items_d
        try:
            return type(obj)(**items_d)
        except TypeError:
            return items_d
    return obj


def _clone(obj: Any) -> Any:
    return _mapped(obj, lambda t: t.detach().clone())


@contextlib.contextmanager
def outermost_calls(net: Any) -> Iterator[list[Call]]:
    """Records the outermost module calls under ``net`` while active (hooks on every module)."""
    calls: list[Call] = []
    depth = [0]
    names = {id(m): n for n, m in net.named_modules()}
    handles = []

    def pre(mod: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if depth[0] == 0:
            calls.append(Call(names[id(mod)], _clone(args), _clone(kwargs), None))
        depth[0] += 1

    def post(mod: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        depth[0] -= 1
        if depth[0] == 0:
            calls[-1].output = _clone(output)

    for mod in net.modules():
        handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mod.register_forward_hook(post, with_kwargs=True))
    try:
        yield calls
    finally:
        for h in handles:
            h.remove()


def frame_calls(det: Any, frame: Any, prompts: list[str]) -> list[Call]:
    """The outermost network calls of one ``detect(frame)`` (the text side made ready first)."""
    det.set_prompts(prompts)
    with outermost_calls(network(det)) as calls:
        det.detect(frame)
    return calls


def leaves(obj: Any, path: str = "") -> list[tuple[str, Any]]:
    """The tensors in a nested output (tuples, lists, dicts, ModelOutput), with their paths."""
    import torch

    if isinstance(obj, torch.Tensor):
        return [(path or "out", obj)]
    out: list[tuple[str, Any]] = []
    if isinstance(obj, dict) or hasattr(obj, "items"):
        for k, v in obj.items():
            out += leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out += leaves(v, f"{path}[{i}]")
    return out


def to_device(obj: Any, device: str, dtype: Any) -> Any:
    """Tensors moved to ``device``; floating ones cast to ``dtype``."""
    return _mapped(obj, lambda t: t.to(device, dtype) if t.is_floating_point() else t.to(device))


def errors(ref: Any, got: Any) -> list[dict[str, Any]]:
    """Per floating tensor of ``ref`` (paired by path with ``got``): max_abs, max_rel; a
    missing or misshapen partner is an error of inf."""
    got_by_path = dict(leaves(got))
    rows = []
    for path, a in leaves(ref):
        if not a.is_floating_point():
            continue
        b = got_by_path.get(path)
        if b is None or tuple(b.shape) != tuple(a.shape):
            rows.append(
                {
                    "tensor": path,
                    "max_abs": float("inf"),
                    "max_rel": float("inf"),
                    "note": "missing" if b is None else f"shape {tuple(b.shape)} != {tuple(a.shape)}",
                }
            )
            continue
        a64, b64 = a.detach().double().cpu(), b.detach().double().cpu()
        finite = a64.isfinite() & b64.isfinite()
        same_inf = (a64 == b64) & ~a64.isfinite()  # -inf masks on both sides are equal
        diff = (a64 - b64).abs().where(finite, a64.new_tensor(0.0))
        bad = (~finite & ~same_inf).any()
        max_abs = float("inf") if bool(bad) else (float(diff.max()) if diff.numel() else 0.0)
        scale = float(a64.abs().where(finite, a64.new_tensor(0.0)).max()) if a64.numel() else 0.0
        rows.append(
            {
                "tensor": path,
                "max_abs": max_abs,
                "max_rel": max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf")),
            }
        )
    return rows


def worst(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return max(rows, key=lambda r: r["max_rel"], default={"tensor": "-", "max_abs": 0.0, "max_rel": 0.0})


def check_model(
    build: Callable[[str, str], Any],
    name: str,
    device: str,
    precisions: list[str],
    frame: Any,
    prompts: list[str],
) -> list[dict[str, Any]]:
    """One model's parity rows, one per precision: the preprocessed inputs and the raw
    outputs of each device build against the CPU fp32 build (built once;
    ``build(device, precision)`` makes a detector)."""
    import torch

    ref_det = build("cpu", "fp32")
    ref_calls = frame_calls(ref_det, frame, prompts)
    rows = []
    for precision in precisions:
        dev_det = build(device, precision)
        dev_calls = frame_calls(dev_det, frame, prompts)
        if [c.name for c in ref_calls] != [c.name for c in dev_calls]:
            raise RuntimeError(
                f"{name}: the CPU and {device} paths call different modules: "
                f"{[c.name for c in ref_calls]} vs {[c.name for c in dev_calls]}"
            )
        dev_net = network(dev_det)
        modules = dict(dev_net.named_modules())
        dtype = next(dev_net.parameters()).dtype
        pre: list[dict[str, Any]] = []
        raw: list[dict[str, Any]] = []
        for ref, dev in zip(ref_calls, dev_calls, strict=True):
            label = ref.name or "net"
            for r in errors(
                {"args": ref.args, "kwargs": ref.kwargs}, {"args": dev.args, "kwargs": dev.kwargs}
            ):
                pre.append({**r, "tensor": f"{label}:{r['tensor']}"})
            with torch.inference_mode():
                args, kwargs = to_device(ref.args, device, dtype), to_device(ref.kwargs, device, dtype)
                again = modules[ref.name](*args, **kwargs)
            raw += [{**r, "tensor": f"{label}:{r['tensor']}"} for r in errors(ref.output, again)]
        row = summary(name, precision, [c.name or "net" for c in ref_calls], pre, raw)
        if precision == "fp16":
            fp16_limited(row, lambda: half_copy_error(ref_det, ref_calls, torch.float16))
        rows.append(row)
        del dev_det, dev_calls
    return rows


def fp16_limited(row: dict[str, Any], cpu_fp16: Callable[[], dict[str, Any]]) -> None:
    """An fp16 row over its tolerance passes when the same network in fp16 on the CPU is
    as far from fp32 (within :data:`FP16_LIMITED` times): random-weight networks can lose
    most of their precision, or overflow, in fp16 anywhere; the device reproduces that."""
    try:
        cpu = cpu_fp16()
    except Exception as exc:  # noqa: BLE001 - e.g. a CPU kernel without fp16: the fixed tolerance decides
        row["cpu_fp16"] = f"not emulated: {type(exc).__name__}: {str(exc)[:100]}"
        return
    row["cpu_fp16_max_rel"] = cpu["max_rel"]
    if not row["passed"] and row["pre_passed"] and row["raw_max_rel"] <= FP16_LIMITED * cpu["max_rel"]:
        row["passed"] = True
        row["fp16_limited"] = True


def summary(
    name: str, precision: str, calls: list[str], pre: list[dict[str, Any]], raw: list[dict[str, Any]]
) -> dict[str, Any]:
    """A model's parity row from its tensors' errors: the worst of each kind, pass or fail."""
    tol = TOLERANCE[precision]
    w_pre, w_raw = worst(pre), worst(raw)
    return {
        "model": name,
        "precision": precision,
        "calls": calls,
        "tensors_in": len(pre),
        "tensors_out": len(raw),
        "tolerance": tol,
        "pre_tolerance": PRE_TOLERANCE,
        "pre_max_abs": w_pre["max_abs"],
        "pre_max_rel": w_pre["max_rel"],
        "pre_worst": w_pre["tensor"],
        "raw_max_abs": w_raw["max_abs"],
        "raw_max_rel": w_raw["max_rel"],
        "raw_worst": w_raw["tensor"],
        "pre_passed": w_pre["max_rel"] <= PRE_TOLERANCE,
        "passed": bool(raw) and w_raw["max_rel"] <= tol and w_pre["max_rel"] <= PRE_TOLERANCE,
    }


def calibrate(
    names: list[str], frame: Any, prompts: list[str], dtype_name: str = "float16"
) -> list[dict[str, Any]]:
    """The fp16 tolerance's evidence, on a CPU: each model's network calls replayed by a
    half-precision copy of the CPU network on the same inputs, against fp32."""
    import torch

    from probench.models.zoo import load_detector

    dtype = getattr(torch, dtype_name)
    rows = []
    for name in names:
        try:
            rows.append({"model": name, **_calibrate_one(load_detector(name), frame, prompts, dtype)})
        except Exception as exc:  # noqa: BLE001 - e.g. a CPU kernel without half support
            rows.append({"model": name, "error": f"{type(exc).__name__}: {str(exc)[:120]}"})
        print(rows[-1], flush=True)
    return rows


def _calibrate_one(det: Any, frame: Any, prompts: list[str], dtype: Any) -> dict[str, Any]:
    return half_copy_error(det, frame_calls(det, frame, prompts), dtype)


def half_copy_error(det: Any, calls: list[Call], dtype: Any) -> dict[str, Any]:
    """The worst error of ``calls`` replayed by a ``dtype`` copy of ``det``'s CPU network
    against their recorded fp32 outputs: the precision's own error on these inputs."""
    import copy

    import torch

    half = copy.deepcopy(network(det)).to(dtype)
    modules = dict(half.named_modules())
    raw: list[dict[str, Any]] = []
    for call in calls:
        with torch.inference_mode():
            args, kwargs = to_device(call.args, "cpu", dtype), to_device(call.kwargs, "cpu", dtype)
            again = modules[call.name](*args, **kwargs)
        raw += [{**r, "tensor": f"{call.name or 'net'}:{r['tensor']}"} for r in errors(call.output, again)]
    return worst(raw)


if __name__ == "__main__":  # python bench/gpu_parity.py calibrate [float16|bfloat16]
    import sys

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench_stages import synthetic_frame, tiny_models

    calibrate(
        tiny_models(),
        synthetic_frame(480, 640, seed=1),
        ["a person", "the red fire extinguisher", "an open door", "a chair next to the table"],
        sys.argv[2] if len(sys.argv) > 2 else "float16",
    )
