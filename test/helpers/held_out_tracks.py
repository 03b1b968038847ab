"""The held-out sequence case of issue 36: 3 videos, 2 targets each (a red and a blue square,
asked by the same two prompts in every video), one clean track per target (always visible,
moving 2 px a frame), and a gap on every 5th frame: there the squares are drawn pink, so the
colour detector (the example plugin's) finds neither, although both are visible. The right
answers: continuity 0.8 (16 of every 20 visible frames found) and no ID switch.

The videos put each colour far from where the previous video left it, so every video's
tracks start anew after the tracker's first frame: their first frame is unconfirmed (no
track id), which must not count as an identity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

N_VIDEOS, N_FRAMES, GAP_EVERY = 3, 20, 5
W, H, SIZE, STEP = 160, 120, 20, 2
RED, BLUE, PINK, GREY = (200, 30, 30), (30, 60, 200), (240, 150, 180), (128, 128, 128)
# per video: each target's (x, y) on its first frame
STARTS = {1: {"red": (10, 10), "blue": (100, 70)},
          2: {"red": (100, 70), "blue": (10, 10)},
          3: {"red": (10, 70), "blue": (100, 10)}}


def is_gap(frame_index: int) -> bool:
    return frame_index % GAP_EVERY == GAP_EVERY - 1


def write_dataset(folder: Path) -> Path:
    """The case as a sequence dataset (annotations.json and PNG frames) in ``folder``."""
    import cv2

    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    categories: list[dict[str, Any]] = []
    for v in range(1, N_VIDEOS + 1):
        qids = {"red": 10 * v, "blue": 10 * v + 1}
        categories += [{"id": q, "name": "square", "prompts": {"orig": f"the {c} square", "cat": "square"},
                        "prompt_types": ["attributive"]} for c, q in qids.items()]
        for f in range(N_FRAMES):
            iid = 1000 * v + f
            rgb = np.full((H, W, 3), GREY, np.uint8)
            for k, (colour, paint) in enumerate((("red", RED), ("blue", BLUE))):
                x, y = STARTS[v][colour][0] + STEP * f, STARTS[v][colour][1]
                rgb[y:y + SIZE, x:x + SIZE] = PINK if is_gap(f) else paint
                annotations.append({"id": len(annotations) + 1, "image_id": iid, "category_id": qids[colour],
                                    "bbox": [float(x), float(y), float(SIZE), float(SIZE)],
                                    "area": float(SIZE * SIZE), "iscrowd": 0, "track_id": 100 * v + k})
            name = f"images/v{v}/{f:04d}.png"
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(folder / name), rgb[:, :, ::-1])
            images.append({"id": iid, "file_name": name, "width": W, "height": H, "domain": "indoor",
                           "query_ids": list(qids.values()), "video_id": v, "frame_index": f,
                           "timestamp": round(f / 10.0, 6)})
    videos = [{"id": v, "name": f"held-out-{v}"} for v in range(1, N_VIDEOS + 1)]
    coco = {"info": {"description": "issue 36's held-out tracking case"}, "videos": videos, "images": images,
            "categories": categories, "annotations": annotations}
    (folder / "annotations.json").write_text(json.dumps(coco))
    return folder
