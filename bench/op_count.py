"""Kernel launches, host syncs and GPU kernel time of a call, counted with ``torch.profiler``.

On CUDA the counts are the real ones: CUDA runtime launch calls (``cudaLaunchKernel`` and
kin), synchronising calls (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
``cudaEventSynchronize``, a blocking ``cudaMemcpy``) and the summed time of the kernels on
the GPU. On a CPU they are a proxy for what the same code launches on a GPU:

- ``launches``: the ATen operators that do work (an operator that only makes a view or
  an empty tensor launches nothing on a GPU; a composite operator counts once, through the
  operators it calls);
- ``syncs``: the tensor calls that wait for a GPU when their tensor is on one (``.item()``,
  ``.tolist()``, ``.cpu()``, ``.numpy()``, ``bool()``/``int()``/``float()`` of a tensor,
  ``nonzero``, ``masked_select``, indexing with a boolean tensor).

    from op_count import count_ops
    counts = count_ops(lambda: det.detect(frame), device="cpu",
                       stages={"post": (det, "postprocess"), "fwd": (det.net, "forward")})
    counts["launches"], counts["syncs"], counts["stages"]["post"]["syncs"]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

# ATen operators that launch no kernel on a GPU: views, metadata, allocation
NO_KERNEL = frozenset({
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::resize_", "aten::as_strided",
    "aten::as_strided_", "aten::view", "aten::_reshape_alias", "aten::reshape", "aten::_unsafe_view",
    "aten::detach", "aten::detach_", "aten::resolve_conj", "aten::resolve_neg", "aten::lift_fresh",
    "aten::alias", "aten::expand", "aten::expand_as", "aten::permute", "aten::transpose", "aten::t",
    "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::slice", "aten::split",
    "aten::split_with_sizes", "aten::narrow", "aten::unbind", "aten::chunk", "aten::_nnpack_available",
    "aten::is_nonzero",
    "aten::item", "aten::_local_scalar_dense", "aten::set_", "aten::view_as", "aten::flatten",
    "aten::unflatten", "aten::contiguous", "aten::to", "aten::type_as", "aten::new_empty",
    "aten::new_empty_strided", "aten::_has_compatible_shallow_copy_type", "aten::result_type",
})
# tensor calls that copy a value to the host (wait for the GPU) when the tensor is on one
SYNC_CALLS = frozenset({
    "item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "nonzero",
    "masked_select", "argwhere", "unique", "unique_consecutive", "equal", "allclose",
})
CUDA_LAUNCH = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
               "cudaLaunchCooperativeKernel", "cudaGraphLaunch")
CUDA_SYNC = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
MARK = "op_count:"


def _is_cuda_call(name: str, names: tuple[str, ...]) -> bool:
    return any(name == n or name.startswith(n + "_v") for n in names)


def _work_ops(events: list[Any]) -> list[Any]:
    """The ATen events that do work: not a view or allocation, and calling no operator
    that does (a composite counts once, through its parts). A conversion an operator makes
    of its own argument (a Python number wrapped as a tensor, a mixed-dtype operand) is not
    counted: on a GPU the kernel reads those as they are."""
    aten = [e for e in events if e.name.startswith("aten::")]

    def inner_cast(e: Any) -> bool:
        parent = e.cpu_parent
        return e.name == "aten::to" and parent is not None and parent.name.startswith("aten::")

    skipped: set[int] = set()
    stack = [e for e in aten if inner_cast(e)]
    while stack:
        e = stack.pop()
        skipped.add(id(e))
        stack.extend(e.cpu_children)
    work: dict[int, bool] = {}

    def is_work(e: Any) -> bool:
        if id(e) not in work:
            parts = [c for c in e.cpu_children if c.name.startswith("aten::") and id(c) not in skipped]
            below = [is_work(c) for c in parts]
            work[id(e)] = e.name not in NO_KERNEL and not any(below)
        return work[id(e)]

    return [e for e in aten if id(e) not in skipped and is_work(e)]


def _bool_index(args: tuple[Any, ...]) -> bool:
    import torch

    index = args[1] if len(args) > 1 else None
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


class _HostSyncs:
    """Counts, per active stage label, the tensor calls in :data:`SYNC_CALLS` (a CPU proxy)."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.total = 0
        self.by_label: dict[str, int] = {}

    def mode(self) -> Any:
        from torch.overrides import TorchFunctionMode

        counter = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                                   kwargs: dict[str, Any] | None = None) -> Any:
                name = getattr(func, "__name__", "")
                if name in SYNC_CALLS or (name == "__getitem__" and _bool_index(args)):
                    counter.total += 1
                    for label in set(counter.labels):
                        counter.by_label[label] = counter.by_label.get(label, 0) + 1
                return func(*args, **(kwargs or {}))

        return Mode()


@contextlib.contextmanager
def _stages(stages: dict[str, tuple[Any, str]], syncs: _HostSyncs) -> Iterator[None]:
    """While active, each ``owner.method`` of ``stages`` runs inside a profiler range and a
    sync-counter label named by its key."""
    import torch

    patched = []
    for label, (owner, attr) in stages.items():
        original = getattr(owner, attr)
        own = vars(owner).get(attr)  # already an instance attribute: restored as it was

        def wrapper(*args: Any, _f: Any = original, _label: str = label, **kwargs: Any) -> Any:
            syncs.labels.append(_label)
            try:
                with torch.profiler.record_function(MARK + _label):
                    return _f(*args, **kwargs)
            finally:
                syncs.labels.pop()

        setattr(owner, attr, wrapper)
        patched.append((owner, attr, own))
    try:
        yield
    finally:
        for owner, attr, own in reversed(patched):
            if own is None:
                delattr(owner, attr)  # the class's method shows again
            else:
                setattr(owner, attr, own)


def count_ops(
    fn: Callable[[], Any], *, device: str, calls: int = 1, stages: dict[str, tuple[Any, str]] | None = None,
) -> dict[str, Any]:
    """Run ``fn`` ``calls`` times under the profiler; per call: ``launches``, ``syncs``,
    ``kernel_ms`` (CUDA: the summed kernel time on the GPU; CPU: None), and the same counts
    for each stage in ``stages`` ({label: (object, method name)}) as ``stages[label]``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    host = _HostSyncs()
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with _stages(stages or {}, host), profile(activities=activities) as prof:
        with contextlib.nullcontext() if cuda else host.mode():
            for _ in range(calls):
                fn()
        if cuda:
            torch.cuda.synchronize()  # the harness's own sync (taken off below)
    events = list(prof.events())
    if cuda:
        launches = [e for e in events if _is_cuda_call(e.name, CUDA_LAUNCH)]
        syncs: list[Any] = [e for e in events if _is_cuda_call(e.name, CUDA_SYNC)]
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        kernel_ms: float | None = sum(e.time_range.elapsed_us() for e in kernels) / 1000.0 / calls
        n_syncs = max(len(syncs) - 1, 0)
    else:
        launches, syncs, kernel_ms, n_syncs = _work_ops(events), [], None, host.total
    per_stage: dict[str, dict[str, float]] = {}
    for label in stages or {}:
        spans = [e.time_range for e in events if e.name == MARK + label]

        def inside(e: Any, spans: list[Any] = spans) -> bool:
            return any(s.start <= e.time_range.start and e.time_range.end <= s.end for s in spans)

        stage_syncs = sum(map(inside, syncs)) if cuda else host.by_label.get(label, 0)
        per_stage[label] = {"launches": sum(map(inside, launches)) / calls, "syncs": stage_syncs / calls}
    return {"launches": len(launches) / calls, "syncs": n_syncs / calls, "kernel_ms": kernel_ms,
            "stages": per_stage}
