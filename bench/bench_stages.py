"""Where a frame's time goes, per model: decode / preprocess / text (cold, warm) / forward /
postprocess, on the device path beside the reference path and beside the floor of any
preprocessing (one bilinear ``interpolate`` of the uploaded frame to the model's input size).

    python bench/bench_stages.py                              # every tiny model, 640x480 + 1280x720
    python bench/bench_stages.py --real --runs 2              # real-size random-weight builds
    python bench/bench_stages.py --models tiny-owlv2 --sizes 1280x720 --device cuda --precision fp16

Per model and frame size (one synthetic frame, JPEG-encoded once):

- ``decode``: the frame's JPEG -> RGB as the grounding node decodes it
  (:func:`probench.msgs.images.compressed_to_device`: OpenCV on CPU, nvJPEG on CUDA);
- ``text cold``: a prompt set never seen (every prompt encoded); ``text warm``: the mean
  text stage over a stream of frames whose prompt sets are new combinations of known
  prompts (per-prompt caches answer them; per-set caches encode each new set), and its
  share of those frames' end-to-end time (``text %``);
- ``preprocess`` / ``forward`` / ``postprocess``: medians over ``--runs`` frames of the
  detector's own stage timings, device path (``dev``) then reference path (``ref``), each
  after its own warm-up (interleaving them frame by frame let the reference's large
  allocations and cache misses land on the device path's frames);
- ``floor``: upload + one ``interpolate`` to the model's input size;
- ``pre/floor``: the device path's preprocessing over the floor, each the least of at least
  20 frames taken in turns (the target: 2 or less); ``post/fwd``: postprocess over forward
  (medians, device path; the YOLOE target: 0.25 or less);
- ``launches`` / ``syncs``: kernel launches and host syncs of one frame (``bench/op_count.py``:
  counted on CUDA, a proxy on a CPU), and of its postprocess stage where the detector has
  one (``post launches`` / ``post syncs``: the ultralytics models). On a GPU, where a frame
  is bound by launches and syncs, these say where its time goes.

Times are medians in ms. ``--json FILE`` also writes every number. Nothing is downloaded:
tiny models and ``--real`` (``--random-weights``) builds come from code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")

REAL = ("owlvit", "owlv2-b", "omdet-turbo", "yolo-world-s", "yoloe-s")
SIZES = ((480, 640), (720, 1280))
VOCABULARY = (
    "a person", "the red fire extinguisher", "an open door", "a chair next to the table", "a car",
    "a backpack on the floor", "the exit sign", "a laptop", "a cup of coffee", "a staircase",
    "a window", "a trash can", "a potted plant", "a bicycle", "a traffic cone", "a fire hose",
)
COLD = ("a yellow forklift", "the emergency stop button", "a wooden pallet")
STAGES = ("preprocess", "forward", "postprocess")


def tiny_models() -> list[str]:
    from probench.models.zoo import tiny_names

    return sorted(set(tiny_names()) - {"tiny-owlv2"})  # tiny-owlv2 is an alias of tiny-owlv2-b


def synthetic_frame(h: int, w: int, seed: int = 0) -> Any:
    """A camera-like frame (smooth shapes + a little noise): JPEG sizes like a real camera's."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (max(h // 32, 2), max(w // 32, 2), 3), dtype=np.uint8)
    frame = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.int16)
    frame += rng.integers(-6, 7, (h, w, 3), dtype=np.int16)
    return np.clip(frame, 0, 255).astype(np.uint8)


def noise_frame(h: int, w: int, seed: int = 0) -> Any:
    """Uniform noise: random-weight real-size models keep hundreds of boxes on it (on the
    smooth synthetic frame YOLOE-S keeps none), as trained weights do on a busy scene, so
    the post-processing has its full work."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def jpeg_message(frame: Any) -> Any:
    """A CompressedImage-like message holding the frame as JPEG (quality 90)."""
    from types import SimpleNamespace

    import cv2

    ok, enc = cv2.imencode(".jpg", frame[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return SimpleNamespace(format="jpeg", data=enc.tobytes())


def _timed(fn: Callable[[], Any], sync: Callable[[], None] | None) -> tuple[float, Any]:
    if sync:
        sync()
    t0 = time.perf_counter()
    out = fn()
    if sync:
        sync()
    return (time.perf_counter() - t0) * 1000.0, out


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def text_stream(det: Any, frame: Any, n_frames: int, seed: int = 0) -> dict[str, float]:
    """Warm the text cache with every vocabulary prompt once, then run ``n_frames`` frames
    whose prompt sets are new combinations of them; the text stage's mean, its share of
    the frames' end-to-end time and the encoder calls during the stream."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for start in range(0, len(VOCABULARY), 4):
        det.set_prompts(list(VOCABULARY[start : start + 4]))
    calls0 = det.text_encoder_calls
    seen: set[tuple[str, ...]] = set()
    text, total = [], []
    while len(text) < n_frames:
        k = int(rng.integers(3, 7))
        prompts = tuple(VOCABULARY[i] for i in rng.choice(len(VOCABULARY), k, replace=False))
        if prompts in seen:
            continue
        seen.add(prompts)
        dets = det.detect(frame, list(prompts))
        text.append(dets.timings_ms["text"])
        total.append(sum(dets.timings_ms.get(s, 0.0) for s in ("text", *STAGES)))
    return {"text_warm_ms": float(np.mean(text)), "text_share": float(np.sum(text) / np.sum(total)),
            "stream_encoder_calls": det.text_encoder_calls - calls0}


def model_input_size(det: Any, frame: Any) -> tuple[int, int]:
    """The network input's (H, W) for this frame (the device path's pixel values)."""
    pv = det.pixel_inputs([frame])["pixel_values"]
    return int(pv.shape[-2]), int(pv.shape[-1])


def floor_ms(det: Any, frame: Any, runs: int, sync: Callable[[], None] | None) -> tuple[float, float]:
    """(median floor, least device preprocess / least floor): the ratio from the two taken in
    turns, frame by frame, over at least 20 frames (the least of each is the steadiest
    figure on a loaded machine)."""
    import torch

    from probench.models.preprocess import Uploader, interpolate_floor

    size = model_input_size(det, frame)
    upload = Uploader(torch.device(det.device))
    pre, floor = [], []
    for _ in range(max(runs, 20) + 1):
        pre.append(_timed(lambda: det.pixel_inputs([frame]), sync)[0])
        floor.append(_timed(lambda: interpolate_floor(upload([frame])[0], size), sync)[0])
    return statistics.median(floor[1:]), min(pre[1:]) / min(floor[1:])


def op_counts(det: Any, frame: Any, device: str) -> dict[str, float]:
    """Kernel launches and host syncs of one ``detect`` (prompts already set), and of its
    postprocess stage where the detector has one (``bench/op_count.py``)."""
    from op_count import count_ops

    stages = {"post": (det, "postprocess")} if callable(getattr(det, "postprocess", None)) else {}
    counts = count_ops(lambda: det.detect(frame), device=device, stages=stages)
    row = {"launches": counts["launches"], "syncs": counts["syncs"]}
    if "post" in counts["stages"]:
        row["post_launches"] = counts["stages"]["post"]["launches"]
        row["post_syncs"] = counts["stages"]["post"]["syncs"]
    return row


def bench_model(
    name: str, size: tuple[int, int], *, device: str, precision: str, runtime: str, random_weights: bool,
    runs: int, warmup: int, stream: int, noise: bool = False,
) -> dict[str, Any]:
    import torch

    from probench.models.zoo import load_detector
    from probench.msgs.images import compressed_to_device

    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    h, w = size
    frame = noise_frame(h, w) if noise else synthetic_frame(h, w)
    msg = jpeg_message(frame)
    row: dict[str, Any] = {"model": name, "frame": f"{w}x{h}", "device": device, "precision": precision,
                           "runtime": runtime}
    t0 = time.perf_counter()
    det = load_detector(name, device=device, precision=precision, runtime=runtime,
                        random_weights=random_weights)
    row["build_s"] = time.perf_counter() - t0
    row["text_cache"] = det.text_cache
    row["decode_ms"] = statistics.median(
        [_timed(lambda: compressed_to_device(msg, device), sync)[0] for _ in range(max(runs, 3))])
    row["text_cold_ms"], _ = _timed(lambda: det.set_prompts(list(COLD)), sync)
    det.set_prompts(list(VOCABULARY[:5]))
    paths = ["device", "reference"] if getattr(det, "preprocess", None) == "device" else [det.preprocess]
    stages: dict[str, dict[str, list[float]]] = {p: {s: [] for s in (*STAGES, "total")} for p in paths}
    for path in paths:  # one path at a time: the reference's large allocations and cache misses
        det.preprocess = path  # would otherwise land on the device path's next frame
        for i in range(warmup + runs):
            ms, dets = _timed(lambda: det.detect(frame), sync)
            if i >= warmup:
                for s in STAGES:
                    stages[path][s].append(dets.timings_ms.get(s, 0.0))
                stages[path]["total"].append(ms)
    det.preprocess = paths[0]
    for path, per_stage in stages.items():
        tag = "dev" if path == "device" else "ref"
        for s, values in per_stage.items():
            row[f"{s}_{tag}_ms"] = _median(values)
    row["floor_ms"], row["pre_floor_least"] = (floor_ms(det, frame, max(runs, 3), sync)
                                               if hasattr(det, "pixel_inputs") and det.preprocess == "device"
                                               else (None, None))
    tag = "dev" if "forward_dev_ms" in row else "ref"
    fwd, post = row.get(f"forward_{tag}_ms"), row.get(f"postprocess_{tag}_ms")
    row["post_fwd"] = post / fwd if post is not None and fwd else None
    row.update(op_counts(det, frame, device))
    row.update(text_stream(det, frame, stream))
    row["text_cache_stats"] = det.text_cache_stats()
    return row


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


COLUMNS = (
    ("model", "model", 0), ("frame", "frame", 0), ("decode", "decode_ms", 1), ("floor", "floor_ms", 2),
    ("pre dev", "preprocess_dev_ms", 1), ("pre ref", "preprocess_ref_ms", 1),
    ("text cold", "text_cold_ms", 1), ("text warm", "text_warm_ms", 3), ("text %", "text_share_pct", 2),
    ("fwd dev", "forward_dev_ms", 1), ("fwd ref", "forward_ref_ms", 1),
    ("post dev", "postprocess_dev_ms", 1), ("post ref", "postprocess_ref_ms", 1),
    ("total dev", "total_dev_ms", 1), ("total ref", "total_ref_ms", 1),
    ("pre/floor", "pre_floor_least", 2), ("post/fwd", "post_fwd", 2),
    ("launches", "launches", 0), ("syncs", "syncs", 0), ("post launches", "post_launches", 0),
    ("post syncs", "post_syncs", 0),
)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table (the docs take it as is)."""
    out = ["| " + " | ".join(c[0] for c in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        r = {**r, "text_share_pct": None if r.get("text_share") is None else 100 * r["text_share"]}
        out.append("| " + " | ".join(_fmt(r.get(key), d) for _, key, d in COLUMNS) + " |")
    return "\n".join(out)


PRE_FLOOR_TARGET = 2.0  # issue 30: the device path's preprocessing within 2x its floor
POST_FWD_TARGET = 0.25  # issue 30: YOLOE's postprocess within a quarter of its forward


def targets(rows: list[dict[str, Any]]) -> list[str]:
    """One line per row against the issue's targets: pre/floor (every device-path row) and
    post/fwd (YOLOE rows)."""
    lines = []
    for r in rows:
        parts = []
        checks = [("pre/floor", r.get("pre_floor_least"), PRE_FLOOR_TARGET)]
        if "yoloe" in r["model"]:
            checks.append(("post/fwd", r.get("post_fwd"), POST_FWD_TARGET))
        for label, value, target in checks:
            if value is not None:
                verdict = "met" if value <= target else "NOT met"
                parts.append(f"{label} {value:.2f} (target <= {target:g}: {verdict})")
        if r.get("post_launches") is not None:
            parts.append(f"post {r['post_launches']:.0f} launches, {r['post_syncs']:.0f} syncs of "
                         f"{r['launches']:.0f}, {r['syncs']:.0f} per frame")
        if parts:
            lines.append(f"{r['model']} {r['frame']}: " + "; ".join(parts))
    return lines


def parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for item in text.split(","):
        w, _, h = item.strip().partition("x")
        sizes.append((int(h), int(w)))
    return sizes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated zoo names (default: every tiny model)")
    ap.add_argument("--real", action="store_true", help=f"real-size random-weight builds: {', '.join(REAL)}")
    ap.add_argument("--sizes", default="640x480,1280x720", help="frame sizes WxH (default 640x480,1280x720)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--runtime", default="torch")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--stream", type=int, default=10, help="frames of the new-combination prompt stream")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    ap.add_argument("--gpu-post-plan", action="store_true",
                    help="ultralytics: the post-processing plan a GPU runs (one NMS call, one mask-filter "
                    "group), here: the launches and syncs it makes, counted on this device")
    ap.add_argument("--noise", action="store_true",
                    help="a uniform-noise frame (random weights keep hundreds of boxes on it)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (default: torch's own; 1 is the steadiest on a shared machine)")
    args = ap.parse_args(argv)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    if args.gpu_post_plan:
        from probench.models.ultra import postprocess

        postprocess.NMS_CHUNK = 1 << 62  # what non_max_suppression and nonempty_masks take on a GPU
        postprocess.MASK_GROUP = 1 << 62
    if args.models:
        names = [n.strip() for n in args.models.split(",") if n.strip()]
    else:
        names = list(REAL) if args.real else tiny_models()
    rows = []
    for name in names:
        for size in parse_sizes(args.sizes):
            row = bench_model(name, size, device=args.device, precision=args.precision, runtime=args.runtime,
                              random_weights=args.real and not name.startswith("tiny-"), runs=args.runs,
                              warmup=args.warmup, stream=args.stream, noise=args.noise)
            rows.append(row)
            print(table([row]).splitlines()[-1] if len(rows) > 1 else table([row]))
            sys.stdout.flush()
    print()
    print(table(rows))
    print()
    print("\n".join(targets(rows)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
