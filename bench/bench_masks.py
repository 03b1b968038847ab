"""CPU cost of the instance-mask outputs per frame, at 640x480 with 20 masks, against the
frame's detection time.

Each frame: 20 detections (4 prompts, random scores, masks: ellipses of 20-200 px,
overlapping) are turned into the three mask images (``compose_masks``: instances mono16,
semantic and confidence mono8) and serialized (``mono_image_to_cdr`` x 3: the bytes the
node publishes); apart, the debug image's mask fill (``fill_masks``) and the target's
points (``target_points`` of the best mask on a 16UC1 depth image, ``points_to_cdr``).
Baseline, in the same process and interleaved frame by frame so machine load hits both
alike: a tiny segmentation model's ``detect`` on the same 640x480 frame (default
tiny-yoloe-s, boxes only: with random weights it keeps ~100 boxes, whose full-size masks
would cost seconds, ``--model-masks``; its boxes are not the 20 above). Printed:
medians (ms) of each stage, and the mask images' total (compose + encode) as a ratio to the
detection time; the target is a total of 1 ms or less. The total is also taken back to back
without the model in between (after a model call, its idle threads still spin for a while).

    python bench/bench_masks.py                      # 200 frames
    python bench/bench_masks.py --frames 500 --model tiny-sam3
    python bench/bench_masks.py --frames 20 --model-masks   # the model builds its own masks too
"""

from __future__ import annotations

import argparse
import statistics
import time
from types import SimpleNamespace

import numpy as np


def _scene(n: int, h: int, w: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Boxes, scores, prompt indices and ellipse masks of ``n`` overlapping objects."""
    from probench.models.testing import ellipse_masks

    rng = np.random.default_rng(seed)
    size = rng.uniform(20, 200, (n, 2))
    corner = rng.uniform(0, 1, (n, 2)) * (np.array([w, h]) - size)
    xyxy = np.hstack([corner, corner + size])
    return xyxy, rng.uniform(0.2, 0.95, n), rng.integers(0, 4, n), ellipse_masks(xyxy, (h, w))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--masks", type=int, default=20)
    ap.add_argument("--model", default="tiny-yoloe-s", help="the baseline: a tiny segmentation model")
    ap.add_argument("--model-masks", action="store_true", help="the baseline model builds its masks too")
    args = ap.parse_args(argv)

    from probench.detections import Detections
    from probench.models.zoo import load_detector
    from probench.msgs.masks import mono_image_to_cdr, points_to_cdr
    from probench.msgs.wire import top_order
    from probench.spatial.depth import Intrinsics, depth_image
    from probench.spatial.masks import compose_masks, target_detection, target_points
    from probench.viz import fill_masks

    h, w = 480, 640
    xyxy, scores, pidx, masks = _scene(args.masks, h, w)
    dets = Detections.from_arrays(xyxy, scores, pidx, image_size=(h, w), masks=masks)
    rgb = np.random.default_rng(1).integers(0, 256, (h, w, 3), dtype=np.uint8)
    depth = depth_image(np.random.default_rng(2).integers(500, 5000, (h, w)).astype(np.uint16), "16UC1")
    k = Intrinsics(525.0, 525.0, 319.5, 239.5, w, h)
    header = SimpleNamespace(stamp=SimpleNamespace(sec=1, nanosec=2), frame_id="camera")
    detector = load_detector(args.model)
    detector.return_masks = args.model_masks
    prompts = ["a red car", "person", "a chair", "the door"]
    detector.set_prompts(prompts)

    stages: dict[str, list[float]] = {name: [] for name in ("compose", "encode", "total", "fill", "points",
                                                            "baseline")}
    n_pixels: list[int] = []
    for f in range(args.warmup + args.frames):
        t0 = time.perf_counter()
        detector.detect(rgb, prompts)
        t1 = time.perf_counter()
        order = top_order(dets, max_detections=100)
        images = compose_masks(dets, order, (h, w))
        t2 = time.perf_counter()
        for image in images:
            mono_image_to_cdr(image, header)
        t3 = time.perf_counter()
        canvas = rgb.copy()
        t4 = time.perf_counter()
        fill_masks(canvas, dets, masks)
        t5 = time.perf_counter()
        best = target_detection(dets)
        assert best is not None
        points_to_cdr(target_points(depth, masks[best], k), header)
        t6 = time.perf_counter()
        if f >= args.warmup:
            for name, ms in (("baseline", t1 - t0), ("compose", t2 - t1), ("encode", t3 - t2),
                             ("total", t3 - t1), ("fill", t5 - t4), ("points", t6 - t5)):
                stages[name].append(ms * 1e3)
            n_pixels.append(int((images.instances > 0).sum()))
    alone: list[float] = []  # the mask images again, without a model call between (no torch threads spinning)
    for _ in range(args.frames):
        t0 = time.perf_counter()
        for image in compose_masks(dets, top_order(dets, max_detections=100), (h, w)):
            mono_image_to_cdr(image, header)
        alone.append((time.perf_counter() - t0) * 1e3)
    med = {name: statistics.median(v) for name, v in stages.items()}
    p95 = {name: float(np.percentile(v, 95)) for name, v in stages.items()}
    print(f"mask outputs, {w}x{h}, {args.masks} masks ({statistics.median(n_pixels) / (h * w):.0%} of the "
          f"pixels covered), {args.frames} frames:")
    for name, what in (("compose", "compose_masks (3 images)"), ("encode", "3 x mono_image_to_cdr"),
                       ("total", "mask images, total"), ("fill", "debug image fill_masks"),
                       ("points", "target points + PointCloud2")):
        print(f"  {what:30} median {med[name]:7.3f} ms   p95 {p95[name]:7.3f} ms")
    print(f"  mask images, total, back to back without the model: median {statistics.median(alone):.3f} ms")
    what = "with its masks" if args.model_masks else "boxes only"
    print(f"  baseline ({args.model} detect, {what}): median {med['baseline']:.3f} ms")
    print(f"  mask images total / detection: {med['total'] / med['baseline']:.4f}x;  target total <= 1 ms: "
          f"{'met' if med['total'] <= 1.0 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
