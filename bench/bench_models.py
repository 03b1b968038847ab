"""CPU latency of every zoo architecture here, and the speed-up of the text-embedding cache.

For each model (``tiny-*`` variants and the real-size architectures built with random
weights): one 640x480 image, 5 prompts; per-frame latency of ``detect`` with the prompt set
unchanged (text side cached) and with the text side re-encoded every frame, interleaved in
this process; printed are the medians and their ratio (the cache's speed-up).
``text_encoder_calls`` is checked so that the cached frames really encoded nothing and the
re-encoding frames encoded every time. Models whose cache level is "tokens" (the text
tower is fused into the forward pass) are expected near 1x.

    python bench/bench_models.py                     # every tiny model + every real-size one
    python bench/bench_models.py --quick             # fewer runs
    python bench/bench_models.py --models tiny-owlv2,owlv2-b --runs 3
    python bench/bench_models.py --tiny-only --json out.json

Real-size architectures on a few CPU cores take seconds per frame: keep --runs small.
Absolute numbers depend on the machine and its load; the ratios are what compares.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

PROMPTS = ["a person", "the red fire extinguisher", "an open door", "a chair next to the table", "a car"]


def model_names(args: argparse.Namespace) -> list[tuple[str, bool]]:
    """(zoo name, random_weights) pairs to measure."""
    from probench.models.zoo import ZOO, tiny_names

    if args.models:
        out = []
        for name in (n.strip() for n in args.models.split(",") if n.strip()):
            out.append((name, not name.startswith(("tiny-", "test-"))))
        return out
    out = []
    if not args.real_only:
        out += [(n, False) for n in tiny_names() if n != "tiny-owlv2"]  # the alias of tiny-owlv2-b
    if not args.tiny_only:
        out += [(s.name, True) for s in ZOO.values()]
    return out


def _frame(det, image, reencode: bool) -> tuple[float, dict[str, float]]:
    if reencode:
        # BaseDetector re-encodes when its cached text state is gone: the baseline pays
        # the text tower every frame, as a detector without the cache would.
        det._text_state = None
    t0 = time.perf_counter()
    dets = det.detect(image, PROMPTS)
    return (time.perf_counter() - t0) * 1000.0, dets.timings_ms


def bench_one(name: str, random_weights: bool, image, runs: int, warmup: int, device: str) -> dict:
    """Cached and re-encoding frames interleaved (cached, re-encode, cached, ...), so that
    load from other processes on the machine hits both loops alike."""
    from probench.models.zoo import load_detector

    t0 = time.perf_counter()
    det = load_detector(name, device=device, random_weights=random_weights)
    load_s = time.perf_counter() - t0
    det.set_prompts(PROMPTS)
    for _ in range(warmup):
        det.detect(image)
    cached, fresh, stage_sums = [], [], {}
    encodes = {False: 0, True: 0}
    for _ in range(runs):
        for reencode in (False, True):
            calls0 = det.text_encoder_calls
            ms, timings = _frame(det, image, reencode)
            encodes[reencode] += det.text_encoder_calls - calls0
            (fresh if reencode else cached).append(ms)
            if not reencode:
                for k, v in timings.items():
                    stage_sums[k] = stage_sums.get(k, 0.0) + v / runs
    if encodes[False] != 0 or encodes[True] != runs:
        raise RuntimeError(
            f"text cache not behaving as measured: {encodes[False]} encodes in cached frames, "
            f"{encodes[True]} in re-encoding frames (expected 0 and {runs})"
        )
    return {
        "model": name, "random_weights": random_weights, "load_s": load_s, "runs": runs,
        "cached_ms": statistics.median(cached), "cached_mean_ms": statistics.mean(cached),
        "reencode_ms": statistics.median(fresh), "reencode_mean_ms": statistics.mean(fresh),
        "cache_speedup": statistics.median(fresh) / statistics.median(cached),
        "stages_ms": {k: round(v, 3) for k, v in stage_sums.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    ap.add_argument("--tiny-only", action="store_true")
    ap.add_argument("--real-only", action="store_true")
    ap.add_argument("--quick", action="store_true", help="1 warm-up, 2 runs (tiny) / 1 run (real)")
    ap.add_argument("--runs", type=int, default=None, help="timed frames per loop (default 10 tiny, 2 real)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed frames first (default 2 tiny, 1 real)")
    ap.add_argument("--size", default="640x480", help="image WxH (default 640x480)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    w, h = (int(v) for v in args.size.lower().split("x"))
    image = np.random.default_rng(0).integers(0, 255, (h, w, 3), dtype=np.uint8)
    print(f"# bench_models: {args.size} image, {len(PROMPTS)} prompts, device {args.device}, "
          f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")
    header = (f"{'model':28} {'weights':8} {'load s':>7} {'cached ms':>11} {'re-encode ms':>13} "
              f"{'cache x':>8}  stage means (ms, cached frames)")
    print(header)
    results, failed = [], []
    for name, rw in model_names(args):
        real = rw
        runs = args.runs or ((1 if real else 2) if args.quick else (2 if real else 10))
        warmup = args.warmup if args.warmup is not None else (1 if (args.quick or real) else 2)
        try:
            r = bench_one(name, rw, image, runs, warmup, args.device)
        except Exception as exc:  # noqa: BLE001 - one model failing must not stop the table
            msg = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            print(f"{name:28} {'random' if rw else 'tiny':8} not measured: {msg}")
            if os.environ.get("PROBENCH_DEBUG") == "1":
                traceback.print_exc()
            failed.append({"model": name, "random_weights": rw, "error": msg})
            continue
        results.append(r)
        stages = " ".join(f"{k}={v:.1f}" for k, v in r["stages_ms"].items() if k != "total")
        print(f"{name:28} {'random' if rw else 'tiny':8} {r['load_s']:7.1f} {r['cached_ms']:11.1f} "
              f"{r['reencode_ms']:13.1f} {r['cache_speedup']:7.2f}x  {stages}  (n={runs})", flush=True)
        del r
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"size": args.size, "prompts": PROMPTS, "results": results, "failed": failed},
                      fh, indent=2)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
