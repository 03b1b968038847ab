"""A tiny dataset with real image files, built in tmp_path (no dependency on other rooms)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


def make_image_dataset(root: Path, n_images: int = 4) -> Path:
    import cv2

    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    images, annotations = [], []
    for i in range(1, n_images + 1):
        h, w = 40 + 4 * i, 56 + 2 * i
        # smooth, channel-distinct content: JPEG keeps it close and a channel swap shows
        yy, xx = np.mgrid[0:h, 0:w]
        rgb = np.stack([xx * 255 // w, yy * 255 // h, np.full_like(xx, 40 * i)], axis=2).astype(np.uint8)
        rgb[: h // 2, : w // 2] += rng.integers(0, 8, size=(h // 2, w // 2, 3), dtype=np.uint8)
        name = f"images/{i:03d}.png"
        cv2.imwrite(str(root / name), rgb[:, :, ::-1])
        images.append({"id": i, "file_name": name, "width": w, "height": h,
                       "domain": ["indoor", "urban"][i % 2], "query_ids": [1, 2, 3]})
        annotations.append({"id": i, "image_id": i, "category_id": 1 + i % 3,
                            "bbox": [2.0, 3.0, 20.0, 15.0], "area": 300.0, "iscrowd": 0})
    categories = [
        {"id": 1, "name": "valve", "prompts": {"orig": "the red valve on the left"},
         "prompt_types": ["attributive"]},
        # queries 2 and 3 share their `cat` text: detections must be credited to both
        {"id": 2, "name": "pipe", "prompts": {"orig": "the rusty pipe"}, "prompt_types": ["state"]},
        {"id": 3, "name": "pipe", "prompts": {"orig": "a pipe you could hold"},
         "prompt_types": ["affordance"]},
    ]
    (root / "annotations.json").write_text(
        json.dumps({"images": images, "categories": categories, "annotations": annotations})
    )
    return root


@pytest.fixture
def image_dataset(tmp_path: Path) -> Path:
    return make_image_dataset(tmp_path / "ds")
