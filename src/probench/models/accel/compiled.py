"""The ``compiled`` runtime: a detector's image head (:mod:`probench.models.head`) compiled
or captured as a graph, for any adapter whose ``image_head()`` is not None.

Why: on a fast GPU the per-frame network is bound by Python launching its kernels one at a
time (issue 35: the kernels of most Table II models take 1.4-39 ms, the frame 2-20x that).
A captured graph launches them all at once.

- **CUDA**: one CUDA graph per (input shapes, dtypes, prompt bucket), captured with
  ``torch.cuda.graph`` after warm-up iterations on a side stream (the PyTorch CUDA-graphs
  recipe), replayed from static input buffers (the image and the text embeddings) that
  each frame's inputs are copied into. All graphs of a head share one memory pool; the
  outputs are copied out of the graph's static buffers at each replay, so no caller holds
  memory the next replay overwrites. **Untested on a GPU here** (no GPU in this project's
  CI): the padding, bucketing and slicing logic is tested on the CPU with an injected
  capture function.
- **CPU**: ``torch.compile(head.module, dynamic=False)`` (inductor; it needs a C++
  compiler), one compiled graph per the same keys. Dynamo's recompile limit is raised to
  :data:`RECOMPILE_LIMIT` and made an error: past it a frame would run eagerly unnoticed.

Prompt sets are padded to :data:`~probench.models.head.PROMPT_BUCKETS` along the head's
``prompt_axes`` by repeating the last prompt's rows (safe where ``ImageHead.pad_prompts``;
else one graph per exact count), or by the head's own ``ImageHead.pad`` (a caption's
tokens: masked tokens to :data:`~probench.models.head.TOKEN_BUCKETS`), and the outputs
are sliced back, so a new prompt set of a known size class runs without a new capture. A
set larger than the last bucket runs the head eagerly. Graphs are made on first use;
:meth:`BaseDetector.warmup` (the grounding node's warm-up, the latency protocol's warm-up
runs) makes them before the timed frames.

A head that cannot be compiled or captured fails with one line naming the fallback,
``--runtime torch`` (:class:`~probench.models.accel.errors.CaptureError`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from probench.models.accel.errors import CaptureError, UnsupportedRuntimeError
from probench.models.base import BaseDetector
from probench.models.head import PROMPT_BUCKETS, ImageHead, bucket_for, prompt_count, repeat_last

if TYPE_CHECKING:  # names for the checker only: mypy skips torch (pyproject)
    from torch import Tensor
    from torch.nn import Module

HeadFn = Callable[..., tuple["Tensor", ...]]
# (head module, padded example inputs) -> a function of inputs of exactly those shapes
Capture = Callable[["Module", tuple["Tensor", ...]], HeadFn]

FALLBACK = "run it with --runtime torch"
# dynamo keeps at most this many graphs per code object (its default, 8, is reached by one
# model's buckets and frame shapes, or by two models sharing layer code); past it, it runs
# the code eagerly: set to raise instead, so a compiled run never turns eager in silence
RECOMPILE_LIMIT = 64
CUDA_WARMUP_ITERS = 3  # eager runs on the side stream before a capture (PyTorch's recipe)


def pad_prompts(head: ImageHead, inputs: Sequence[Tensor], size: int) -> tuple[Tensor, ...]:
    """``inputs`` with every prompt axis grown to ``size`` by repeating its last row."""
    return tuple(
        repeat_last(t, head.prompt_axes[name], size) if name in head.prompt_axes else t
        for name, t in zip(head.input_names, inputs, strict=True)
    )


def slice_prompts(head: ImageHead, outputs: Sequence[Tensor], n: int) -> tuple[Tensor, ...]:
    """``outputs`` with every prompt axis cut back to the first ``n`` prompts."""
    return tuple(
        t.narrow(head.prompt_axes[name], 0, n) if name in head.prompt_axes else t
        for name, t in zip(head.output_names, outputs, strict=True)
    )


def _compiler_error(exc: BaseException) -> bool:
    """An error of dynamo or inductor (not of the model's own code)."""
    return type(exc).__module__.startswith(("torch._dynamo", "torch._inductor"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class CompiledHead:
    """``run_head`` of the compiled runtime (module doc): pads, picks or makes the graph of
    the padded shapes, runs it, slices. ``capture`` makes a graph; ``graphs`` counts the
    ones made, ``eager_runs`` the calls that ran eagerly (a set above the last bucket),
    ``padded_runs`` the calls whose inputs were padded. ``buckets``: the prompt counts of
    the default padding (a head with its own ``pad`` chooses its own)."""

    def __init__(self, head: ImageHead, capture: Capture, *, name: str,
                 buckets: Sequence[int] = PROMPT_BUCKETS) -> None:
        self.head, self.name, self.buckets = head, name, tuple(buckets)
        self._capture = capture
        self._graphs: dict[tuple[object, ...], HeadFn] = {}
        self.eager_runs = 0
        self.padded_runs = 0

    @property
    def graphs(self) -> int:
        return len(self._graphs)

    def size_for(self, n_prompts: int) -> int | None:
        """The prompt count ``n_prompts`` runs at: its bucket (the exact count where the head
        may not be padded), or None above the last bucket (eager)."""
        if n_prompts > self.buckets[-1]:
            return None
        return bucket_for(n_prompts, self.buckets) if self.head.pad_prompts else n_prompts

    def padded(self, inputs: tuple[Tensor, ...], n_prompts: int | None) -> tuple[Tensor, ...] | None:
        """``inputs`` padded to the shapes of their graph (the head's own ``pad``, else the
        last prompt repeated up to the bucket), or None: run eagerly (above a last bucket)."""
        if self.head.pad is not None:
            return self.head.pad(inputs)
        if n_prompts is None:
            return inputs
        size = self.size_for(n_prompts)
        return None if size is None else pad_prompts(self.head, inputs, size)

    def __call__(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        import torch

        n = prompt_count(self.head, inputs)
        with torch.inference_mode():
            padded = self.padded(inputs, n)
            if padded is None:
                self.eager_runs += 1
                eager: tuple[Tensor, ...] = self.head.module(*inputs)
                return eager
            if any(p.shape != t.shape for p, t in zip(padded, inputs, strict=True)):
                self.padded_runs += 1
            key = tuple((tuple(t.shape), str(t.dtype), str(t.device)) for t in padded)
            run = self._graphs.get(key)
            if run is None:
                run = self._graphs[key] = self._make(padded)
            try:
                out = run(*padded)
            except Exception as exc:
                if _compiler_error(exc):  # a recompile on a later frame (its limit, a failure)
                    raise self._refusal(exc) from exc
                raise  # the model's own error, as eager would raise it
        return out if n is None else slice_prompts(self.head, out, n)

    def _refusal(self, exc: BaseException) -> CaptureError:
        return CaptureError(
            f"{self.name}: the compiled runtime cannot compile this model's image head "
            f"({_first_line(exc)}); {FALLBACK}"
        )

    def _make(self, example: tuple[Tensor, ...]) -> HeadFn:
        try:
            return self._capture(self.head.module, example)
        except Exception as exc:  # inductor, dynamo and CUDA raise many kinds: one line for all
            raise self._refusal(exc) from exc


def compile_capture(compiler: Callable[[Module], HeadFn] | None = None) -> Capture:
    """CPU: one ``torch.compile`` of the module (``dynamic=False``: a graph per shape, as
    the keys are), compiled for each new key at once by running it on the example."""
    compiled: dict[int, HeadFn] = {}

    def make(compile_module: Callable[[Module], HeadFn]) -> Capture:
        def capture(module: Module, example: tuple[Tensor, ...]) -> HeadFn:
            fn = compiled.get(id(module))
            if fn is None:
                fn = compiled[id(module)] = compile_module(module)
            fn(*example)  # compiles now (in the warm-up), not on a timed frame
            return fn
        return capture

    def default(module: Module) -> HeadFn:
        import torch._dynamo

        dynamo = torch._dynamo.config
        dynamo.recompile_limit = max(dynamo.recompile_limit, RECOMPILE_LIMIT)
        dynamo.accumulated_recompile_limit = max(dynamo.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT)
        dynamo.fail_on_recompile_limit_hit = True
        fn: HeadFn = torch.compile(module, dynamic=False, fullgraph=False)
        return fn

    return make(compiler or default)


def cuda_graph_capture() -> Capture:
    """CUDA: a CUDA graph per key, from static copies of the example inputs, warmed up on a
    side stream first; the graphs of one head share a memory pool (module doc)."""
    import torch

    pool = torch.cuda.graph_pool_handle()

    def capture(module: Module, example: tuple[Tensor, ...]) -> HeadFn:
        static_in = tuple(t.clone() for t in example)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(CUDA_WARMUP_ITERS):
                module(*static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            static_out = module(*static_in)
        # tensors a module caches as plain attributes (ultralytics' anchors per frame shape)
        # are read by the graph at their capture-time addresses: kept alive with it, so a
        # later shape's replacements never free memory this graph still reads
        kept = [v for m in module.modules() for v in vars(m).values() if isinstance(v, torch.Tensor)]

        held = (graph, static_in, static_out, kept)  # all alive as long as the graph

        def replay(*inputs: Tensor) -> tuple[Tensor, ...]:
            cuda_graph, buffers, outputs, _ = held
            for dst, src in zip(buffers, inputs, strict=True):
                dst.copy_(src, non_blocking=True)
            cuda_graph.replay()
            return tuple(t.clone() for t in outputs)

        return replay

    return capture


def capture_for(device: str) -> Capture:
    """The capture function of ``device``: CUDA graphs on a GPU, ``torch.compile`` else."""
    return cuda_graph_capture() if str(device).startswith("cuda") else compile_capture()


def to_compiled(base: BaseDetector, capture: Capture | None = None) -> BaseDetector:
    """``base`` running its image head through :class:`CompiledHead` (the same detector
    object: its preprocessing, text side and post-processing are unchanged)."""
    head = base.image_head()
    if head is None:
        raise UnsupportedRuntimeError(
            f"{base.name}: the compiled runtime needs the adapter's image head, which this model "
            f"does not expose (or not on this preprocessing path); {FALLBACK}"
        )
    base.use_head_runner(CompiledHead(head, capture or capture_for(base.device), name=base.name))
    return base
