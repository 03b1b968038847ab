"""CompressedImage decoding: OpenCV straight to RGB (what the grounding node uses) against
the other decoders installed here, on the same JPEG / PNG frames, in one process.

    python bench/bench_decode.py                    # 640x480, 1280x720, 1920x1080; CPU
    python bench/bench_decode.py --device cuda      # adds nvJPEG (torchvision.io.decode_jpeg on the GPU)

Prints the median ms per decode and each decoder's time relative to OpenCV's RGB decode
(>1: slower), and checks that every decoder gives the same pixels (max |difference|).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench_stages import jpeg_message, parse_sizes, synthetic_frame


def _median_ms(fn: Callable[[], Any], runs: int, sync: Callable[[], None] | None = None) -> float:
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def decoders(device: str) -> dict[str, Callable[[bytes], Any]]:
    import cv2
    import numpy as np
    import torch
    from PIL import Image
    from torchvision.io import ImageReadMode, decode_image, decode_jpeg

    def tv(data: bytes) -> Any:
        return decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode=ImageReadMode.RGB)

    out: dict[str, Callable[[bytes], Any]] = {
        "opencv rgb (used)": lambda d: cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_COLOR_RGB),
        "opencv bgr+cvtColor": lambda d: cv2.cvtColor(
            cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB),
        "PIL": lambda d: np.asarray(Image.open(io.BytesIO(d)).convert("RGB")),
        "torchvision cpu": lambda d: tv(d).permute(1, 2, 0),
    }
    if device.startswith("cuda"):
        out["nvjpeg (cuda)"] = lambda d: decode_jpeg(
            torch.frombuffer(bytearray(d), dtype=torch.uint8), mode=ImageReadMode.RGB, device=device
        ).permute(1, 2, 0)
    return out


def main(argv: list[str] | None = None) -> int:
    import cv2
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="640x480,1280x720,1920x1080")
    ap.add_argument("--runs", type=int, default=31)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    sync = None
    if args.device.startswith("cuda"):
        import torch

        sync = torch.cuda.synchronize
    table = decoders(args.device)
    print("| frame | format | KiB | " + " | ".join(table) + " | max pixel diff |")
    print("|---|---|---|" + "---|" * (len(table) + 1))
    for h, w in parse_sizes(args.sizes):
        frame = synthetic_frame(h, w)
        for fmt in ("jpeg", "png"):
            if fmt == "jpeg":
                data = jpeg_message(frame).data
            else:
                data = cv2.imencode(".png", frame[..., ::-1])[1].tobytes()
            names = [n for n in table if "nvjpeg" not in n] if fmt == "png" else list(table)
            ref = table["opencv rgb (used)"](data)
            diff = max(int(np.abs(np.asarray(_cpu(table[n](data)), dtype=int) - ref).max()) for n in names)
            ms = {n: _median_ms(lambda n=n, d=data: table[n](d), args.runs, sync) for n in names}
            base = ms["opencv rgb (used)"]
            cells = [f"{ms[n]:.2f} ({ms[n] / base:.2f}x)" if n in ms else "-" for n in table]
            print(f"| {w}x{h} | {fmt} | {len(data) // 1024} | " + " | ".join(cells) + f" | {diff} |")
            sys.stdout.flush()
    return 0


def _cpu(x: Any) -> Any:
    return x.cpu().numpy() if hasattr(x, "cpu") else x


if __name__ == "__main__":
    raise SystemExit(main())
