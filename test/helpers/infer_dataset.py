"""A tiny Pro-Bench dataset on disk for the infer/latency tests, and a detector wrapper that
counts what it is asked.

Six images of different sizes written by cv2; four queries, two of which share the same
``orig`` prompt text (so the "ask once, credit to each" rule is exercised); one image has
an explicit label space with a negative query.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

QUERIES = [
    {"id": 1, "name": "box", "prompts": {"orig": "the red box on the left"},
     "prompt_types": ["attributive", "relational"]},
    {"id": 2, "name": "crate", "prompts": {"orig": "the red box on the left", "cat": "crate"},
     "prompt_types": ["categorical"]},
    {"id": 3, "name": "valve", "prompts": {"orig": "a valve you can turn", "tmpl": "a picture of a valve"},
     "prompt_types": ["affordance"]},
    {"id": 5, "name": "door", "prompts": {"orig": "the open door"}, "prompt_types": ["state"]},
]
SIZES = [(48, 64), (40, 40), (64, 48), (32, 56), (48, 48), (36, 60)]  # (h, w)


def make_dataset(root: Path, n_images: int = 6, broken: int | None = None) -> Path:
    """Write DATASET/annotations.json and images/*.png; ``broken`` names an image index
    whose file is garbage bytes (not decodable)."""
    import cv2

    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    images, annotations = [], []
    for i in range(n_images):
        h, w = SIZES[i % len(SIZES)]
        name = f"images/im{i:02d}.png"
        if i == broken:
            (root / name).write_bytes(b"this is not a png")
        else:
            cv2.imwrite(str(root / name), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
        image = {"id": 10 + i, "file_name": name, "width": w, "height": h, "domain": "indoor"}
        qids = [1, 2, 3] if i % 2 == 0 else [3, 5]
        if i == 1:
            image["query_ids"] = [1, 3, 5]  # query 1 is a negative here
        images.append(image)
        for k, q in enumerate(qids):
            annotations.append({
                "id": 100 * i + k, "image_id": 10 + i, "category_id": q,
                "bbox": [2.0 + k, 3.0, 10.0, 12.0], "area": 120.0, "iscrowd": 0,
            })
    coco = {"images": images, "categories": QUERIES, "annotations": annotations}
    (root / "annotations.json").write_text(json.dumps(coco, indent=1))
    return root


class Counting:
    """Wraps a detector, recording every detect call and the prompts it was given."""

    def __init__(self, inner, fail_after: int | None = None, exc: BaseException | None = None):
        self.inner, self.calls, self.prompts = inner, 0, []
        self.fail_after, self.exc = fail_after, exc

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def set_prompts(self, prompts):
        self.inner.set_prompts(prompts)

    def detect(self, image, prompts=None):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise self.exc
        self.calls += 1
        self.prompts.append(list(prompts) if prompts is not None else list(self.inner.prompts))
        return self.inner.detect(image, prompts)
