"""Benchmark of the bag replay: the replay clock's accuracy and bag-writing throughput.

1. The replay: ``probench eval`` (both nodes, through DDS on loopback) streams N frames,
   each with its own prompt set (label spaces vary frame to frame, as in Pro-Bench), at
   ``--rate`` Hz with ``test-instant`` (a detector that answers at once), camera-rate mode.
   Reported from its realtime.json (definitions: docs/EVALUATION.md): the evaluator's clock
   (achieved send rate, replay jitter = |send interval - 1/rate|), the system's output
   (delivered rate = answered / sent x send rate, the answer spacing and output jitter
   = |difference of consecutive arrival intervals|, first/last sent-to-received, latency,
   missed frames; the warm-up trial apart). Baseline for the replay jitter, in this
   process: a bare Python loop sleeping to the same absolute deadlines (the best the
   evaluator's timing loop can do on this machine), run before and after the replay (the
   quieter run counts: the CPU is shared); ratio = evaluator / bare.
2. Bag writing: ``probench.bags.write_bag`` vs the raw ``rosbags`` writer doing the same
   essential work on the same images (decode each file, serialize a sensor_msgs/Image,
   write it; same storage and compression), frames per second and ratio (ours / raw).

    python bench/bench_replay.py              # 150 frames at 30 Hz, 640x480
    python bench/bench_replay.py --frames 60  # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_dataset(root: Path, n: int, width: int, height: int) -> Path:
    import cv2

    (root / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    images, anns = [], []
    yy, xx = np.mgrid[0:height, 0:width]
    for i in range(1, n + 1):
        rgb = np.stack([(xx + i) % 256, (yy * 2) % 256, np.full_like(xx, i % 256)], axis=2).astype(np.uint8)
        rgb[rng.integers(0, height // 2):, : width // 3] //= 2
        cv2.imwrite(str(root / f"images/{i:05d}.png"), rgb[:, :, ::-1])
        qids = [[1], [1, 2], [2], [1, 2, 3]][i % 4]
        images.append({"id": i, "file_name": f"images/{i:05d}.png", "width": width, "height": height,
                       "domain": "indoor", "query_ids": qids})
        anns.append({"id": i, "image_id": i, "category_id": qids[0], "bbox": [10.0, 10.0, 50.0, 40.0],
                     "area": 2000.0, "iscrowd": 0})
    cats = [{"id": 1, "name": "valve", "prompts": {"orig": "the red valve"}},
            {"id": 2, "name": "pipe", "prompts": {"orig": "the pipe"}},
            {"id": 3, "name": "gauge", "prompts": {"orig": "the pressure gauge"}}]
    (root / "annotations.json").write_text(json.dumps({"images": images, "categories": cats,
                                                       "annotations": anns}))
    return root


def bare_loop_jitter(n: int, rate: float) -> np.ndarray:
    """|interval - period| (ms) of a bare loop sleeping to absolute deadlines."""
    period = 1.0 / rate
    t0 = time.perf_counter()
    sent = []
    for i in range(n):
        delay = t0 + i * period - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent.append(time.monotonic_ns())  # the evaluator's clock
    return np.abs(np.diff(np.asarray(sent)) / 1e6 - 1000.0 * period)


def raw_write(dataset_root: Path, out: Path, storage: str) -> None:
    """The raw rosbags writer: decode, serialize, write: nothing else."""
    import cv2
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    Image = ts.types["sensor_msgs/msg/Image"]
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]
    coco = json.loads((dataset_root / "annotations.json").read_text())
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    w = Writer(out, version=9, storage_plugin=plugin)
    if storage == "mcap":
        w.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    w.open()
    conn = w.add_connection("/camera/image_raw", "sensor_msgs/msg/Image", typestore=ts)
    for i, im in enumerate(sorted(coco["images"], key=lambda r: r["id"])):
        rgb = cv2.imread(str(dataset_root / im["file_name"]), cv2.IMREAD_COLOR)[:, :, ::-1]
        rgb = np.ascontiguousarray(rgb)
        h, wd = rgb.shape[:2]
        t = 1_000_000_000 + i * 33_333_333
        msg = Image(header=Header(stamp=Time(sec=t // 10**9, nanosec=t % 10**9), frame_id="cam"),
                    height=h, width=wd, encoding="rgb8", is_bigendian=0, step=wd * 3, data=rgb.reshape(-1))
        w.write(conn, t, ts.serialize_cdr(msg, "sensor_msgs/msg/Image"))
    w.close()


def bench_writing(dataset_root: Path, tmp: Path, storage: str, repeats: int) -> tuple[float, float]:
    from probench.bags.writer import write_bag
    from probench.data.dataset import load_dataset

    ds = load_dataset(dataset_root)
    n = len(ds.images)
    ours, raw = [], []
    for r in range(repeats):  # interleaved, best of `repeats`: fair under a shared CPU
        t = time.perf_counter()
        write_bag(ds, tmp / f"ours-{storage}-{r}", storage=storage, progress=False)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        raw_write(dataset_root, tmp / f"raw-{storage}-{r}", storage)
        raw.append(time.perf_counter() - t)
    return n / min(ours), n / min(raw)


def bench_replay(bag: Path, tmp: Path, rate: float) -> dict:
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    run = tmp / "run"
    cmd = [sys.executable, "-m", "probench", "eval", "--model", "test-instant", "--bag", str(bag),
           "--out", str(run), "--rate", str(rate), "--formulations", "orig",
           "--domain-id", str(random.SystemRandom().randint(150, 230))]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"bench_replay: probench eval failed:\n{r.stderr[-2000:]}")
    return json.loads((run / "realtime.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--repeats", type=int, default=3, help="bag-writing repeats (best of)")
    args = ap.parse_args(argv)

    from probench.bags.writer import write_bag
    from probench.data.dataset import load_dataset

    with tempfile.TemporaryDirectory(prefix="bench_replay_") as d:
        tmp = Path(d)
        root = make_dataset(tmp / "ds", args.frames, args.width, args.height)
        print(f"{args.frames} frames {args.width}x{args.height}, a prompt set per frame, "
              f"rate {args.rate} Hz")

        print(f"\n== bag writing (frames/s, best of {args.repeats}) ==")
        for storage in ("mcap", "sqlite3"):
            ours, raw = bench_writing(root, tmp, storage, args.repeats)
            print(f"{storage:8s} probench {ours:7.1f} fps   raw rosbags {raw:7.1f} fps   "
                  f"ratio {ours / raw:.2f}")

        print("\n== replay (test-instant, camera-rate) ==")
        bag = tmp / "bag"
        write_bag(load_dataset(root), bag, progress=False)
        # The CPU is shared: the bare loop runs before and after the replay, the quieter counts.
        bare_runs = [bare_loop_jitter(args.frames, args.rate)]
        rt = bench_replay(bag, tmp, args.rate)
        bare_runs.append(bare_loop_jitter(args.frames, args.rate))
        bare = min(bare_runs, key=lambda a: float(np.percentile(a, 99)))
        bp50, bp99 = float(np.percentile(bare, 50)), float(np.percentile(bare, 99))
        j, o, lat = rt["replay_jitter_ms"], rt["output_jitter_ms"], rt["latency_ms"]
        print(f"send rate (evaluator's clock): {rt['achieved_send_rate_hz']} Hz over "
              f"{rt['n_send_intervals']} intervals")
        print(f"replay jitter: p50 {j['p50']:.3f} ms  p99 {j['p99']:.3f} ms  max {j['max']:.3f} ms")
        print(f"bare loop:     p50 {bp50:.3f} ms  p99 {bp99:.3f} ms")
        print(f"ratio evaluator/bare: p50 {j['p50'] / max(bp50, 1e-6):.2f}  "
              f"p99 {j['p99'] / max(bp99, 1e-6):.2f}")
        print(f"delivered (instant model): {rt['delivered_rate_hz']} Hz ({rt['frames_received']} of "
              f"{rt['frames_sent']} answered); answer spacing {rt['output_rate_hz']} Hz, output jitter "
              f"p50 {o['p50']:.3f} ms  p95 {o['p95']:.3f} ms  max {o['max']:.3f} ms")
        print(f"first / last sent to received: {rt['first_sent_to_received_ms']} / "
              f"{rt['last_sent_to_received_ms']} ms")
        print(f"latency send->detections: p50 {lat['p50']:.2f} ms  p95 {lat['p95']:.2f} ms  "
              f"received {rt['frames_received']}/{rt['frames_sent']} (missed {rt['frames_missed']}; "
              f"warm-up {rt['warmup']['frames']} apart, cold start {rt['cold_start_ms']} ms), within "
              f"{rt['budget_ms']} ms: {100 * rt['within_budget']:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
