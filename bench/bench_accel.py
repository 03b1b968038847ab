"""CPU latency of the ONNX Runtime path against PyTorch, same model, same process.

For each model: one 640x480 image, 5 prompts (text side cached), ``detect`` timed on the
PyTorch detector and on its ``runtime="onnxruntime"`` twin, interleaved frame by frame so
machine load hits both alike; printed are the medians, their ratio (>1: ONNX Runtime
faster) and the largest box / score difference between the two outputs (parity).

    python bench/bench_accel.py                                   # tiny OWL + tiny YOLO models
    python bench/bench_accel.py --models owlv2-b --random-weights --runs 3   # real-size OWLv2-B

Ultralytics models are exported with a square input (the PyTorch path letterboxes to a
multiple of 32), so their parity numbers on this non-square image are not a parity check
(test/models/test_models_accel_ultra.py checks parity on a square image). TensorRT is not
measured here: it needs an NVIDIA GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

PROMPTS = ["a person", "the red fire extinguisher", "an open door", "a chair next to the table", "a car"]
DEFAULT = "tiny-owlv2,tiny-owlvit,tiny-yoloe-s,tiny-yolo-world-s"


def bench_one(name: str, random_weights: bool, runs: int, warmup: int, cache_dir: str) -> dict:
    import numpy as np

    from probench.models.zoo import load_detector

    kw = {"random_weights": True} if random_weights else {}
    t0 = time.perf_counter()
    torch_det = load_detector(name, **kw)
    t1 = time.perf_counter()
    ort_det = load_detector(name, runtime="onnxruntime", **kw)
    t2 = time.perf_counter()
    img = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    torch_det.set_prompts(PROMPTS)
    t3 = time.perf_counter()
    ort_det.set_prompts(PROMPTS)  # ultralytics: the export happens here (vocabulary baked in)
    t4 = time.perf_counter()
    for _ in range(warmup):
        torch_det.detect(img)
        ort_det.detect(img)
    a_ms, b_ms = [], []
    for _ in range(runs):
        s = time.perf_counter()
        a = torch_det.detect(img)
        a_ms.append((time.perf_counter() - s) * 1e3)
        s = time.perf_counter()
        b = ort_det.detect(img)
        b_ms.append((time.perf_counter() - s) * 1e3)
    n = min(len(a), len(b))
    box_diff = float(np.abs(a.xyxy[:n] - b.xyxy[:n]).max()) if n and len(a) == len(b) else float("nan")
    score_diff = float(np.abs(a.scores[:n] - b.scores[:n]).max()) if n and len(a) == len(b) else float("nan")
    return {
        "model": name, "torch_ms": statistics.median(a_ms), "ort_ms": statistics.median(b_ms),
        "build_torch_s": t1 - t0, "build_ort_s": (t2 - t1) + (t4 - t3), "n_boxes": (len(a), len(b)),
        "max_box_diff_px": box_diff, "max_score_diff": score_diff,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--random-weights", action="store_true", help="real-size architectures, random weights")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["PROBENCH_ENGINE_CACHE"] = cache_dir
        print(f"{'model':22} {'torch ms':>9} {'ort ms':>9} {'speed-up':>8} {'boxes':>10} "
              f"{'max dbox px':>11} {'max dscore':>10} {'export s':>8}")
        for name in (n.strip() for n in args.models.split(",") if n.strip()):
            r = bench_one(name, args.random_weights, args.runs, args.warmup, cache_dir)
            print(f"{r['model']:22} {r['torch_ms']:9.1f} {r['ort_ms']:9.1f} "
                  f"{r['torch_ms'] / r['ort_ms']:7.2f}x {r['n_boxes']!s:>10} "
                  f"{r['max_box_diff_px']:11.2e} {r['max_score_diff']:10.2e} {r['build_ort_s']:8.1f}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
