"""The compiled runtime (probench.models.accel.compiled).

- Bucket logic on a toy head with an injected capture function (what the CUDA-graph path
  does on a GPU, minus the graph): padding, slicing, one graph per (shapes, bucket), eager
  above the last bucket, one graph per exact count where a head may not be padded.
- Equality: every tiny model whose adapter has an image head gives the same detections
  compiled as eager (boxes within BOX_ATOL px, scores within SCORE_ATOL); a tiny model
  without a head is refused in one line naming ``--runtime torch``. Compiling costs
  20-150 s per head family on a 2-core CPU with a cold cache (dynamo's trace of the network
  and inductor's C++ code generation; about 6 min for all five families), more than the
  suite's 20 minutes can hold. So inductor compiles the OWL family in every run, and with
  ``PROBENCH_TEST_INDUCTOR=all`` the first model of every head family (``ImageHead.family``;
  the others are the same code at another size); the other models run the same padded,
  bucketed head through an eager capture function: what
  they check is that padding their prompt axes (by repetition, or the head's own padding:
  G-DINO's masked tokens, OmDet-T's classes and task tokens) leaves every real prompt's
  boxes and scores unchanged. Every call here is padded (none is a bucket size already).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from probench.models.accel.compiled import (  # noqa: E402
    CompiledHead,
    compile_capture,
    pad_prompts,
    slice_prompts,
    to_compiled,
)
from probench.models.accel.errors import CaptureError, UnsupportedRuntimeError  # noqa: E402
from probench.models.head import ImageHead  # noqa: E402
from probench.models.zoo import load_detector, resolve, tiny_names  # noqa: E402

# fp32: inductor's fused kernels round differently from eager's; through ~100 layers that
# moves a YOLO box corner by up to ~2e-3 px here (a DFL expectation times the stride)
BOX_ATOL = 1e-2  # pixels
SCORE_ATOL = 1e-4
PROMPTS = ["a red backpack", "a door handle", "a chair"]  # 3 prompts: padded to bucket 4


class _PerPrompt(torch.nn.Module):
    """Image features (B, F) and prompt embeddings (1, n, F) -> scores (B, n), pooled (B, F)."""

    def forward(self, image: torch.Tensor, text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return image @ text[0].T, image * 2.0


def _toy_head(pad: bool = True) -> ImageHead:
    return ImageHead("toy", _PerPrompt(), ("image", "text"), ("scores", "pooled"),
                     lambda n: (torch.ones(1, 3), torch.ones(1, n, 3)),
                     prompt_axes={"text": 1, "scores": 1}, pad_prompts=pad)


class _Recorder:
    """A capture function that records the shapes it was asked for and runs eagerly."""

    def __init__(self) -> None:
        self.shapes: list[tuple[tuple[int, ...], ...]] = []

    def __call__(self, module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> Callable[..., tuple]:
        self.shapes.append(tuple(tuple(t.shape) for t in example))
        return module


def _inputs(n: int, batch: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(n)
    return torch.randn(batch, 3, generator=gen), torch.randn(1, n, 3, generator=gen)


def test_pad_repeats_the_last_prompt_and_slice_cuts_back() -> None:
    head = _toy_head()
    image, text = _inputs(3)
    padded = pad_prompts(head, (image, text), 4)
    assert padded[0] is image and padded[1].shape == (1, 4, 3)
    assert torch.equal(padded[1][:, :3], text) and torch.equal(padded[1][:, 3], text[:, 2])
    scores, pooled = slice_prompts(head, head.module(*padded), 3)
    assert scores.shape == (1, 3) and torch.equal(scores, image @ text[0].T) and pooled.shape == (1, 3)


def test_one_graph_per_shape_and_bucket_outputs_as_eager() -> None:
    rec = _Recorder()
    run = CompiledHead(_toy_head(), rec, name="toy", buckets=(1, 2, 4, 8))
    for n in (3, 4, 3, 2, 1, 5):
        inputs = _inputs(n)
        out = run(*inputs)
        for got, want in zip(out, _toy_head().module(*inputs), strict=True):
            assert torch.equal(got, want)
    # 3 and 4 share bucket 4; 2, 1 and 5 (-> 8) each make one
    assert [s[1] for s in rec.shapes] == [(1, 4, 3), (1, 2, 3), (1, 1, 3), (1, 8, 3)]
    run(*_inputs(2, batch=2))  # another image batch: another shape, another graph
    assert run.graphs == 5 and run.eager_runs == 0


def test_above_the_last_bucket_runs_eagerly() -> None:
    rec = _Recorder()
    run = CompiledHead(_toy_head(), rec, name="toy", buckets=(1, 2))
    scores, _ = run(*_inputs(3))
    assert scores.shape == (1, 3) and run.eager_runs == 1 and rec.shapes == []


def test_a_head_that_may_not_be_padded_gets_a_graph_per_exact_count() -> None:
    rec = _Recorder()
    run = CompiledHead(_toy_head(pad=False), rec, name="toy", buckets=(1, 2, 4, 8))
    for n in (3, 4, 3):
        run(*_inputs(n))
    assert [s[1] for s in rec.shapes] == [(1, 3, 3), (1, 4, 3)]


def test_a_head_with_its_own_padding_gets_a_graph_per_padded_shapes() -> None:
    """``ImageHead.pad``: the head pads (here: zero rows to a multiple of 4, None above 8),
    the runtime keys graphs by the padded shapes, runs eagerly on None and slices the
    outputs back to the unpadded prompt count."""
    def pad_zeros(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...] | None:
        image, text = inputs
        n = text.shape[1]
        if n > 8:
            return None
        return image, torch.cat((text, text.new_zeros(1, -n % 4, text.shape[2])), 1)

    head = ImageHead("toy", _PerPrompt(), ("image", "text"), ("scores", "pooled"),
                     lambda n: (torch.ones(1, 3), torch.ones(1, n, 3)),
                     prompt_axes={"text": 1, "scores": 1}, pad=pad_zeros)
    rec = _Recorder()
    run = CompiledHead(head, rec, name="toy", buckets=(1, 2))  # the head's own padding wins
    for n in (3, 4, 5, 9):
        inputs = _inputs(n)
        for got, want in zip(run(*inputs), head.module(*inputs), strict=True):
            assert got.shape == want.shape and torch.equal(got, want)
    assert [s[1] for s in rec.shapes] == [(1, 4, 3), (1, 8, 3)]
    assert run.padded_runs == 2 and run.eager_runs == 1  # 3 -> 4 and 5 -> 8 padded; 4 as is; 9 eager


def test_a_failed_capture_is_one_line_naming_the_fallback() -> None:
    def refuse(module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> Callable[..., tuple]:
        raise RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph capture\nmore")

    run = CompiledHead(_toy_head(), refuse, name="toy")
    with pytest.raises(CaptureError) as info:
        run(*_inputs(1))
    message = str(info.value)
    assert "\n" not in message and "--runtime torch" in message and "CUDA graph capture" in message


def test_a_recompile_refused_on_a_later_frame_is_one_line_too() -> None:
    """Dynamo's recompile limit (made an error by the runtime) hit on a frame after the
    capture: the same one-line refusal; an error of the model's own code passes as is."""
    from torch._dynamo.exc import FailOnRecompileLimitHit

    calls = []

    def flaky(module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> Callable[..., tuple]:
        def run(*inputs: torch.Tensor) -> tuple:
            calls.append(1)
            if len(calls) == 2:
                raise FailOnRecompileLimitHit("recompile_limit reached with fullgraph=False")
            if len(calls) == 3:
                raise ValueError("the model's own error")
            return module(*inputs)
        return run

    run = CompiledHead(_toy_head(), flaky, name="toy")
    run(*_inputs(1))
    with pytest.raises(CaptureError, match=r"recompile_limit.*--runtime torch"):
        run(*_inputs(1))
    with pytest.raises(ValueError, match="own error"):
        run(*_inputs(1))


def _tiny_models() -> list[str]:
    """Each tiny model once (aliases of the same spec left out)."""
    seen: set[str] = set()
    names = []
    for name in sorted(tiny_names()):
        spec, _ = resolve(name)
        if spec.name not in seen:
            seen.add(spec.name)
            names.append(name)
    return names


_INDUCTOR_FAMILIES: set[str] = set()  # head families inductor has compiled in this session
# the families inductor compiles (module doc): "owl" by default, every one on request
_INDUCTOR_ALL = os.environ.get("PROBENCH_TEST_INDUCTOR", "") == "all"


def _eager_capture(module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> Callable[..., tuple]:
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", _tiny_models())
def test_compiled_equals_eager_or_refuses(name: str) -> None:
    det = load_detector(name)  # eager first, then the same detector compiled (one build)
    head = det.image_head()
    if head is None:
        with pytest.raises(UnsupportedRuntimeError) as info:
            to_compiled(det)
        assert "\n" not in str(info.value) and "--runtime torch" in str(info.value)
        return
    image = np.random.default_rng(7).integers(0, 256, (96, 160, 3), dtype=np.uint8)
    want = det.detect(image, PROMPTS)
    inductor = head.family not in _INDUCTOR_FAMILIES and (_INDUCTOR_ALL or head.family == "owl")
    _INDUCTOR_FAMILIES.add(head.family)
    compiled = to_compiled(det, compile_capture() if inductor else _eager_capture)
    got = compiled.detect(image, PROMPTS)
    runner = compiled._head_runner
    assert isinstance(runner, CompiledHead)
    # 3 prompts: one call in bucket 4 (OmDet-T: 4 classes, its task tokens in a token bucket);
    # a tiny G-DINO caption holds 24 tokens, so two calls: 22 tokens -> 24, 5 -> 16
    calls = 2 if head.family == "grounding-dino" else 1
    assert runner.graphs == calls and runner.padded_runs == calls and runner.eager_runs == 0
    assert len(want) > 0 and len(got) == len(want)
    np.testing.assert_array_equal(got.prompt_index, want.prompt_index)
    np.testing.assert_allclose(got.xyxy, want.xyxy, atol=BOX_ATOL, rtol=0)
    np.testing.assert_allclose(got.scores, want.scores, atol=SCORE_ATOL, rtol=0)


def test_load_detector_compiled_and_its_warmup() -> None:
    """``runtime="compiled"`` through the zoo; the warm-up makes the graphs of buckets 1, 2
    and 4 (3 prompts) and leaves the active prompts and the text cache as they were."""
    det = load_detector("tiny-owlvit", runtime="compiled")
    runner = det._head_runner
    assert isinstance(runner, CompiledHead)
    det.set_prompts(PROMPTS[:2])
    stats, entries = det.text_cache_stats(), list(det._text_lru)
    det.warmup((96, 160), 3)
    assert runner.graphs == 3 and det.prompts == tuple(PROMPTS[:2])
    assert det.text_cache_stats() == stats and list(det._text_lru) == entries
    det.detect(np.zeros((96, 160, 3), np.uint8))  # bucket 2 at this frame size: made already
    assert runner.graphs == 3


def test_warmup_refuses_a_bad_size() -> None:
    from probench.models.errors import ModelError

    det = load_detector("tiny-owlvit")
    with pytest.raises(ModelError, match="warm-up needs"):
        det.warmup((0, 160), 3)
