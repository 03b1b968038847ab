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
    python bench/bench_models.py --harness-only      # infer loop: image prefetch vs none

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


def bench_harness(n_images: int, model: str, size: tuple[int, int]) -> dict:
    """``run_inference`` with image prefetch (decode the next JPEG in a thread) against
    without, same process, same scripted model; and its overhead over bare ``detect``."""
    import tempfile
    from pathlib import Path

    import cv2
    import numpy as np

    from probench.data.dataset import load_dataset
    from probench.models.infer import run_inference
    from probench.models.zoo import load_detector

    w, h = size
    with tempfile.TemporaryDirectory(prefix="bench_models_") as tmp:
        root = Path(tmp) / "ds"
        (root / "images").mkdir(parents=True)
        rng = np.random.default_rng(0)
        images, anns = [], []
        for i in range(n_images):
            # smooth noise compresses like a photo rather than like white noise
            small = rng.integers(0, 255, (h // 8, w // 8, 3), dtype=np.uint8)
            cv2.imwrite(str(root / "images" / f"{i:04d}.jpg"), cv2.resize(small, (w, h)))
            images.append({"id": i + 1, "file_name": f"images/{i:04d}.jpg", "width": w, "height": h,
                           "domain": "indoor"})
            anns.append({"id": i + 1, "image_id": i + 1, "category_id": 1 + i % 5, "bbox": [1, 1, 9, 9],
                         "area": 81.0, "iscrowd": 0})
        cats = [{"id": k + 1, "name": p, "prompts": {"orig": p}, "prompt_types": ["categorical"]}
                for k, p in enumerate(PROMPTS)]
        (root / "annotations.json").write_text(json.dumps({"images": images, "categories": cats,
                                                           "annotations": anns}))
        ds = load_dataset(root)
        times = {}
        for label, prefetch in (("sequential", False), ("prefetch", True), ("sequential2", False),
                                ("prefetch2", True)):
            t0 = time.perf_counter()
            run_inference(load_detector(model), ds, Path(tmp) / label, ["orig"], progress=False,
                          prefetch=prefetch)
            times[label] = (time.perf_counter() - t0) / n_images * 1000.0
        det = load_detector(model)
        image = ds.read_image(1)
        t0 = time.perf_counter()
        for i in range(n_images):
            det.detect(image, [PROMPTS[i % 5]])
        bare = (time.perf_counter() - t0) / n_images * 1000.0
    seq = min(times["sequential"], times["sequential2"])
    pre = min(times["prefetch"], times["prefetch2"])
    return {"model": model, "n_images": n_images, "sequential_ms_per_image": seq,
            "prefetch_ms_per_image": pre, "bare_detect_ms": bare, "prefetch_speedup": seq / pre}


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
    ap.add_argument("--harness", action="store_true",
                    help="also time probench infer's loop: image prefetch vs none (scripted model)")
    ap.add_argument("--harness-only", action="store_true", help="only the --harness measurement")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    w, h = (int(v) for v in args.size.lower().split("x"))
    image = np.random.default_rng(0).integers(0, 255, (h, w, 3), dtype=np.uint8)
    print(f"# bench_models: {args.size} image, {len(PROMPTS)} prompts, device {args.device}, "
          f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")
    harness = None
    if args.harness or args.harness_only:
        harness = bench_harness(40, "test-slow-15ms", (w, h))
        print(f"# infer loop, {harness['n_images']} JPEGs {args.size}, {harness['model']}: "
              f"sequential {harness['sequential_ms_per_image']:.1f} ms/img, prefetch "
              f"{harness['prefetch_ms_per_image']:.1f} ms/img -> {harness['prefetch_speedup']:.2f}x "
              f"(bare detect {harness['bare_detect_ms']:.1f} ms)", flush=True)
        if args.harness_only:
            return 0
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
            json.dump({"size": args.size, "prompts": PROMPTS, "results": results, "failed": failed,
                       "harness": harness}, fh, indent=2)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
