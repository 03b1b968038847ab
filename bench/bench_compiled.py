"""CPU latency of the compiled runtime (and ONNX Runtime, where the model has it) against
eager PyTorch, same model, same process.

For each model: one 640x480 image, 5 prompts (text side cached, padded to the 8-prompt
bucket by the compiled runtime), ``detect`` timed on the eager detector and on its
``runtime="compiled"`` (and ``"onnxruntime"``) twins, interleaved frame by frame so that
machine load hits all alike. Printed: the medians, the ratios compiled / eager and ORT /
eager (< 1: faster than eager), the compile time (the warm-up that makes the graph) and the
largest score difference from eager (parity; boxes are compared by the tests).

    python bench/bench_compiled.py                                  # tiny + two real-size models
    python bench/bench_compiled.py --models owlv2-b --runs 3        # others (real size: random weights)

On a CPU, ``compiled`` is ``torch.compile`` (inductor). The CUDA-graph path it takes on a
GPU is measured by bench/gpu_check.py on a lent GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

PROMPTS = ["a person", "the red fire extinguisher", "an open door", "a chair next to the table", "a car"]
DEFAULT = "tiny-owlv2,tiny-owlvit,tiny-yolo-world-s,tiny-yoloe-s,owlvit,yolo-world-s"
FRAME = (480, 640)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def bench_one(name: str, runs: int, warmup: int, cache_dir: str) -> dict[str, object]:
    import numpy as np

    from probench.models.zoo import load_detector, resolve

    spec, tiny = resolve(name)
    kw: dict[str, object] = {} if tiny else {"random_weights": True}
    dets = {"eager": load_detector(name, **kw)}
    t0 = time.perf_counter()
    dets["compiled"] = load_detector(name, runtime="compiled", **kw)
    dets["compiled"].warmup(FRAME, len(PROMPTS))  # buckets 1, 2, 4 and 8 (5 prompts)
    compile_s = time.perf_counter() - t0
    if spec.capabilities.onnx:
        dets["onnxruntime"] = load_detector(name, runtime="onnxruntime", engine_cache=cache_dir, **kw)
    img = np.random.default_rng(0).integers(0, 256, (*FRAME, 3), dtype=np.uint8)
    for det in dets.values():
        det.set_prompts(PROMPTS)  # ultralytics ORT: the export happens here (vocabulary baked in)
        for _ in range(warmup):
            det.detect(img)
    ms: dict[str, list[float]] = {k: [] for k in dets}
    for _ in range(runs):
        for k, det in dets.items():
            ms[k].append(_timed(lambda det=det: det.detect(img)))
    eager, compiled = dets["eager"].detect(img), dets["compiled"].detect(img)
    same = len(eager) == len(compiled)
    med = {k: statistics.median(v) for k, v in ms.items()}
    return {
        "model": name, "eager_ms": med["eager"], "compiled_ms": med["compiled"],
        "ort_ms": med.get("onnxruntime"), "compile_s": compile_s,
        "compiled_ratio": med["compiled"] / med["eager"],
        "ort_ratio": med["onnxruntime"] / med["eager"] if "onnxruntime" in med else None,
        "score_diff": float(np.abs(eager.scores - compiled.scores).max()) if same and len(eager) else None,
        "same_count": same,
    }


def _f(v: object, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=DEFAULT, help=f"comma-separated zoo names (default {DEFAULT})")
    parser.add_argument("--runs", type=int, default=10, help="timed frames per runtime (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed frames per runtime first (default 2)")
    args = parser.parse_args(argv)
    import torch

    print(f"CPU: {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.1f}; 640x480 frame, {len(PROMPTS)} prompts")
    print("| model | eager ms | compiled ms | compiled / eager | ORT ms | ORT / eager | compile s "
          "| max score diff |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench_compiled-") as cache_dir:
        for name in args.models.split(","):
            torch._dynamo.reset()  # each model's graphs from scratch, none left by the one before
            try:
                r = bench_one(name.strip(), args.runs, args.warmup, cache_dir)
            except Exception as exc:  # noqa: BLE001 - a model that fails is a row, not the end of the table
                print(f"| {name} | failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} |||||||")
                continue
            diff = _f(r["score_diff"], 6) if r["same_count"] else "box counts differ"
            print(f"| {r['model']} | {_f(r['eager_ms'], 1)} | {_f(r['compiled_ms'], 1)} | "
                  f"{_f(r['compiled_ratio'])} | {_f(r['ort_ms'], 1)} | {_f(r['ort_ratio'])} | "
                  f"{_f(r['compile_s'], 1)} | {diff} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
