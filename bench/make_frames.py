"""A Pro-Bench-format dataset of synthetic camera frames, for latency measurements offline.

    python bench/make_frames.py OUT_DIR --size 1280x720 --images 20

Frames are camera-like (smooth shapes plus noise) JPEGs of one size; 16 queries exist and
every image asks its own combination of 3 to 6 of them (all combinations distinct), as in
Pro-Bench where each image has its own label space over a shared set of queries. So once
each query has been seen, every further image is a new combination of known prompts: the
stream the per-prompt text caches are for. Deterministic (seeded).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

QUERIES = (
    "a person", "the red fire extinguisher", "an open door", "a chair next to the table", "a car",
    "a backpack on the floor", "the exit sign", "a laptop", "a cup of coffee", "a staircase",
    "a window", "a trash can", "a potted plant", "a bicycle", "a traffic cone", "a fire hose",
)


def make_frames(
    root: Path, *, size: tuple[int, int] = (720, 1280), n_images: int = 20, seed: int = 0
) -> Path:
    """Write ROOT/annotations.json and ROOT/images/*.jpg; returns ROOT."""
    import cv2
    import numpy as np

    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    h, w = size
    categories = [{"id": i + 1, "name": q, "prompts": {"orig": q}, "prompt_types": ["categorical"]}
                  for i, q in enumerate(QUERIES)]
    images, annotations, seen = [], [], set()
    while len(images) < n_images:
        k = int(rng.integers(3, 7))
        qids = tuple(sorted(int(q) + 1 for q in rng.choice(len(QUERIES), k, replace=False)))
        if qids in seen:
            continue
        seen.add(qids)
        i = len(images)
        coarse = rng.integers(0, 256, (max(h // 32, 2), max(w // 32, 2), 3), dtype=np.uint8)
        frame = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.int16)
        frame = np.clip(frame + rng.integers(-6, 7, (h, w, 3), dtype=np.int16), 0, 255).astype(np.uint8)
        name = f"images/frame{i:04d}.jpg"
        cv2.imwrite(str(root / name), frame, [cv2.IMWRITE_JPEG_QUALITY, 90])
        images.append({"id": i + 1, "file_name": name, "width": w, "height": h, "domain": "synthetic"})
        for q in qids:
            x, y = float(rng.uniform(0, w * 0.7)), float(rng.uniform(0, h * 0.7))
            bw, bh = float(rng.uniform(0.03 * w, 0.3 * w)), float(rng.uniform(0.03 * h, 0.3 * h))
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": q,
                                "bbox": [x, y, bw, bh], "area": bw * bh, "iscrowd": 0})
    coco = {"images": images, "categories": categories, "annotations": annotations}
    (root / "annotations.json").write_text(json.dumps(coco, indent=1))
    return root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--size", default="1280x720", help="WxH (default 1280x720)")
    ap.add_argument("--images", type=int, default=20)
    args = ap.parse_args(argv)
    w, _, h = args.size.partition("x")
    root = make_frames(Path(args.out), size=(int(h), int(w)), n_images=args.images)
    print(f"wrote {root / 'annotations.json'} ({args.images} frames of {args.size})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
