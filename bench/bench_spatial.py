"""CPU cost of the grounding node's spatial stage per frame: depth pairing by stamp, 3D
estimation and tracking, at 640x480 with 50 detections (5 prompts x 10 boxes).

Each frame: the depth image (16UC1, the serialized message's bytes, 1% noise, 30% holes)
is put into the node's stamp map and taken back for its colour frame (pairing), read and
turned into 50 3D estimates (``estimate_3d``), and the 50 boxes, moving back and forth 2 px
a frame, are tracked (one ByteTrack per prompt, 10 tracks each; for comparison also all 50
in one tracker). Baseline, in the same process and interleaved frame by frame so machine
load hits both alike: the node's decode of the same frame's 640x480 bgr8 Image message
(``rgb_from_cdr``), a cost every frame pays already. Printed: medians (ms) of each stage,
their total, and the total's ratio to the baseline; the target is a total of 1 ms or less.

    python bench/bench_spatial.py                 # 300 frames
    python bench/bench_spatial.py --frames 1000
"""

from __future__ import annotations

import argparse
import statistics
import struct
import time
from typing import Any

import numpy as np


def _image_cdr(rgb: np.ndarray, sec: int, nanosec: int, encoding: str, itemsize: int = 1) -> bytes:
    """A serialized sensor_msgs/Image (little-endian CDR), as the node receives it."""
    def string(s: str) -> bytes:
        raw = s.encode() + b"\x00"
        return struct.pack("<I", len(raw)) + raw

    h, w = rgb.shape[:2]
    head = struct.pack("<iI", sec, nanosec) + string("cam")
    head += b"\x00" * (-len(head) % 4) + struct.pack("<II", h, w) + string(encoding)
    head += b"\x00"  # is_bigendian
    head += b"\x00" * (-len(head) % 4)
    data = rgb.tobytes()
    step = w * (rgb.shape[2] if rgb.ndim == 3 else 1) * itemsize
    return b"\x00\x01\x00\x00" + head + struct.pack("<II", step, len(data)) + data


class MovingBoxes:
    """``n`` boxes of 5 prompts (``n / 5`` each) moving back and forth 2 px a frame, no jumps."""

    def __init__(self, rng: np.random.Generator, n: int = 50) -> None:
        self.n = n
        self.corner = np.stack([rng.uniform(200, 320, n), rng.uniform(200, 240, n)], axis=1)
        self.size = rng.uniform(20, 120, (n, 2))
        self.velocity = rng.choice([-2.0, 2.0], (n, 2))
        self.scores = rng.uniform(0.3, 0.9, n)
        self.pidx = np.repeat(np.arange(5), n // 5)

    def xyxy(self, f: int) -> np.ndarray:
        phase = f % 200
        xy = self.corner + self.velocity * (phase if phase < 100 else 200 - phase)
        return np.hstack([xy, xy + self.size])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args(argv)

    from probench.detections import Detections
    from probench.msgs.wire import image_from_cdr, rgb_from_cdr
    from probench.realtime.grounding_worker import StampedMap
    from probench.spatial.depth import depth_from_bytes, estimate_3d
    from probench.spatial.synthetic import DEFAULT_K, Box3D, Scene, degrade, encode
    from probench.spatial.tracking import PromptTrackers

    k = DEFAULT_K
    rng = np.random.default_rng(0)
    scene = Scene(tuple(Box3D((rng.uniform(-1.5, 1.5), rng.uniform(-1.0, 1.0), rng.uniform(1.5, 5.0)),
                              rng.uniform(0.2, 0.6), rng.uniform(0.2, 0.6), rng.uniform(-40, 40))
                        for _ in range(12)))
    rgb, depth_m = scene.render()
    mm = encode(degrade(depth_m, noise_rel=0.01, invalid_share=0.3, seed=1), "16UC1")
    prompts = tuple(f"prompt {i}" for i in range(5))
    boxes = MovingBoxes(rng)
    n, scores, pidx = boxes.n, boxes.scores, boxes.pidx

    depth_map: StampedMap[Any] = StampedMap(capacity=8)
    trackers = PromptTrackers()
    one_prompt = PromptTrackers()  # for comparison: the same 50 boxes as one prompt's (one tracker)
    period_ns = 33_333_333
    stages: dict[str, list[float]] = {"pairing": [], "3d": [], "tracking": [], "total": [], "baseline": [],
                                      "tracking_1": []}
    n_3d: list[int] = []
    for f in range(args.warmup + args.frames):
        stamp = 1_700_000_000 * 10**9 + f * period_ns
        sec, nsec = divmod(stamp, 10**9)
        depth_msg = _image_cdr(mm, sec, nsec, "16UC1", itemsize=2)
        colour_msg = _image_cdr(rgb[:, :, ::-1].copy(), sec, nsec, "bgr8")
        dets = Detections(boxes.xyxy(f), scores, pidx)

        t0 = time.perf_counter()
        rgb_from_cdr(colour_msg, compressed=False)  # baseline: the node's decode of the colour frame
        t1 = time.perf_counter()
        fields = image_from_cdr(depth_msg)  # the node's depth callback: header only
        depth_map.put(stamp + 1_000_000, fields)  # stamped 1 ms off its colour frame
        paired = depth_map.take(stamp, wait_s=0.0, tolerance_ns=20_000_000)
        t2 = time.perf_counter()
        assert paired is not None
        ids = trackers.update(dets, prompts, t_s=stamp * 1e-9)
        t3 = time.perf_counter()
        image = depth_from_bytes(paired.data, paired.height, paired.width, paired.step, paired.encoding)
        est = estimate_3d(dets.with_tracker_id(ids), image, k, 50)
        t4 = time.perf_counter()
        one_prompt.update(Detections(dets.xyxy, scores, np.zeros(n, np.int64)), prompts[:1], t_s=stamp * 1e-9)
        t5 = time.perf_counter()
        if f >= args.warmup:
            stages["tracking_1"].append((t5 - t4) * 1e3)
            stages["baseline"].append((t1 - t0) * 1e3)
            stages["pairing"].append((t2 - t1) * 1e3)
            stages["tracking"].append((t3 - t2) * 1e3)
            stages["3d"].append((t4 - t3) * 1e3)
            stages["total"].append((t4 - t1) * 1e3)
            n_3d.append(len(est))
    med = {name: statistics.median(v) for name, v in stages.items()}
    p95 = {name: float(np.percentile(v, 95)) for name, v in stages.items()}
    print(f"spatial stage, 640x480, {n} detections ({len(prompts)} prompts), {args.frames} frames "
          f"(median 3D estimates per frame: {statistics.median(n_3d):.0f}):")
    for name in ("pairing", "3d", "tracking", "total"):
        print(f"  {name:9} median {med[name]:7.3f} ms   p95 {p95[name]:7.3f} ms")
    print(f"  (tracking the same 50 boxes as one prompt's, one tracker: median {med['tracking_1']:.3f} ms)")
    print(f"  baseline (node decode of the 640x480 bgr8 frame): median {med['baseline']:.3f} ms")
    print(f"  total / baseline: {med['total'] / med['baseline']:.2f}x;  target total <= 1 ms: "
          f"{'met' if med['total'] <= 1.0 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
