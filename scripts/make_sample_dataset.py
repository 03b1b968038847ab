#!/usr/bin/env python3
"""Build ``datasets/probench-sample``: a tiny, real, redistributable Pro-Bench dataset.

The photographs come from packages that ship them with permissive licences
(scikit-image's bundled ``skimage.data`` images, scikit-learn's ``china.jpg`` /
``flower.jpg``, matplotlib's ``grace_hopper.jpg``); see the dataset README for sources
and licences. The boxes below were annotated by hand on the saved images (which keep
their native resolution: every source is already <= 640 px on its long side) and checked
by drawing them (``--preview DIR``).

Usage (needs scikit-image, scikit-learn and matplotlib, only to read the source images):

    python scripts/make_sample_dataset.py --out datasets/probench-sample [--preview /tmp/prev]

The output does not depend on this script's environment: plain JPEGs and one JSON file.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

JPEG_QUALITY = 90


# -- sources ---------------------------------------------------------------------------------
def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import skimage.data

        return getattr(skimage.data, name)()

    return load


def _sklearn(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from sklearn.datasets import load_sample_image

        return load_sample_image(name)

    return load


def _matplotlib(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import matplotlib.cbook
        import matplotlib.image

        with matplotlib.cbook.get_sample_data(name) as fh:
            return np.asarray(matplotlib.image.imread(fh, format="jpg"))

    return load


# file stem -> (loader, domain)
SOURCES: dict[str, tuple[Callable[[], np.ndarray], str]] = {
    "coffee": (_skimage("coffee"), "indoor"),
    "chelsea": (_skimage("chelsea"), "indoor"),
    "astronaut": (_skimage("astronaut"), "indoor"),
    "grace_hopper": (_matplotlib("grace_hopper.jpg"), "indoor"),
    "clock": (_skimage("clock"), "indoor"),
    "coins": (_skimage("coins"), "indoor"),
    "rocket": (_skimage("rocket"), "industrial"),
    "camera": (_skimage("camera"), "outdoor"),
    "china": (_sklearn("china.jpg"), "outdoor"),
    "flower": (_sklearn("flower.jpg"), "outdoor"),
}

# -- queries (COCO categories) ---------------------------------------------------------------
# (id, name, orig, cat, prompt_types, coref or None for all three)
QUERIES: list[tuple[int, str, str, str, list[str], list[str] | None]] = [
    (1, "person", "a person", "person", ["categorical"], None),
    (2, "spoon", "a spoon", "spoon", ["categorical"], None),
    (3, "coffee cup", "a ceramic cup filled with coffee on the saucer", "cup",
     ["compositional", "relational", "state"], None),
    (4, "cup handle", "the part of the cup you hold to lift it", "cup handle",
     ["affordance", "part-whole"], None),
    (5, "cat nose", "the nose of the cat", "cat nose", ["part-whole"], None),
    (6, "cat eyes", "the cat's green eyes", "cat eye", ["attributive", "part-whole"], None),
    (7, "grounded rocket", "a rocket that has not launched yet", "rocket", ["state"], None),
    (8, "blurred clock", "a wall clock blurred by camera motion", "clock",
     ["state", "attributive"], None),
    (9, "video camera", "the video camera mounted on the tripod", "video camera",
     ["relational"], None),
    (10, "tripod", "something that holds a camera steady", "tripod", ["affordance"], None),
    (11, "coin", "an ancient coin", "coin", ["categorical", "attributive"], None),
    (12, "pagoda", "a tiered pagoda with red pillars and green roofs", "pagoda",
     ["attributive"], None),
    # "flower" also names the cut-off second dahlia at the bottom: cat loses the referent.
    (13, "central dahlia", "the orange dahlia in full bloom in the centre", "flower",
     ["attributive", "state", "relational"], ["orig", "tmpl"]),
    # "person" also names people wearing a hat: cat loses the exclusion.
    (14, "bareheaded person", "a person who is not wearing a hat", "person",
     ["negative"], ["orig", "tmpl"]),
    (15, "unworn helmet", "a space helmet that nobody is wearing", "helmet",
     ["negative", "state"], None),
    (16, "flag", "the American flag behind the person", "flag", ["relational", "attributive"], None),
    (17, "shuttle model", "a small model of the space shuttle on a stand", "space shuttle",
     ["compositional"], None),
    (18, "eyeglasses", "something worn to correct eyesight", "eyeglasses", ["affordance"], None),
    (19, "name tag", "the name tag on the uniform", "name tag", ["part-whole", "relational"], None),
    (20, "camera operator", "a man in a dark coat looking through a video camera", "man",
     ["compositional"], None),
]

# -- annotations: file stem -> [(query id, [x, y, w, h], shape)] -------------------------------
# shape "box": the segmentation is the box polygon; "ellipse": the inscribed ellipse (round
# objects: coins, clock face, flower heads, eyes).
BOX, ELL = "box", "ellipse"
ANNOTATIONS: dict[str, list[tuple[int, list[float], str]]] = {
    "coffee": [
        (2, [325, 66, 100, 260], BOX),
        (3, [173, 18, 236, 290], BOX),
        (4, [195, 228, 67, 80], BOX),
    ],
    "chelsea": [
        (5, [228, 225, 64, 40], BOX),
        (6, [134, 85, 72, 64], ELL),
        (6, [299, 109, 45, 56], ELL),
    ],
    "astronaut": [
        (1, [20, 15, 342, 497], BOX),
        (14, [20, 15, 342, 497], BOX),
        (15, [276, 341, 236, 171], BOX),
        (16, [0, 0, 97, 512], BOX),
        (17, [353, 0, 120, 288], BOX),
        (19, [277, 338, 52, 35], BOX),
    ],
    "grace_hopper": [
        (1, [24, 22, 488, 578], BOX),
        (16, [0, 0, 232, 600], BOX),
        (18, [152, 167, 206, 64], BOX),
        (19, [79, 484, 89, 33], BOX),
    ],
    "clock": [(8, [140, 93, 143, 123], ELL)],
    "coins": [
        (11, b, ELL)
        for b in [
            [22, 33, 45, 41], [81, 39, 39, 35], [131, 28, 48, 46], [192, 30, 51, 43],
            [255, 34, 42, 38], [305, 16, 60, 56],
            [25, 104, 42, 42], [84, 107, 38, 38], [134, 110, 40, 35], [185, 105, 42, 39],
            [245, 96, 51, 48], [317, 105, 39, 40],
            [25, 178, 38, 39], [80, 175, 44, 42], [135, 179, 39, 38], [189, 170, 48, 46],
            [251, 172, 46, 44], [315, 156, 65, 62],
            [18, 233, 57, 55], [92, 245, 44, 42], [144, 236, 57, 52], [220, 241, 49, 47],
            [276, 240, 50, 48], [336, 248, 48, 41],
        ]
    ],
    "rocket": [(7, [308, 125, 29, 280], BOX)],
    "camera": [
        (1, [0, 62, 332, 450], BOX),
        (9, [252, 139, 73, 47], BOX),
        (10, [229, 186, 177, 326], BOX),
        (14, [0, 62, 332, 450], BOX),
        (20, [0, 62, 332, 450], BOX),
    ],
    "china": [(12, [62, 29, 311, 398], BOX)],
    "flower": [(13, [168, 84, 279, 277], ELL)],
}

# Explicit label spaces: the queries with GT there plus queries with none (negative pairs).
# Images not listed here use the default label space (the queries with GT in the image).
EXTRA_LABEL_SPACE: dict[str, list[int]] = {
    "coffee": [10, 11],  # no tripod, no coin on the table
    "chelsea": [1],  # a cat, not a person
    "grace_hopper": [14, 15],  # she wears a hat; no helmet
    "clock": [11],
    "rocket": [1, 9],  # nobody on the pad, no video camera
    "flower": [5],
}


def _polygon(box: list[float], shape: str, n: int = 24) -> list[float]:
    x, y, w, h = box
    if shape == BOX:
        return [x, y, x + w, y, x + w, y + h, x, y + h]
    cx, cy, rx, ry = x + w / 2, y + h / 2, w / 2, h / 2
    pts: list[float] = []
    for k in range(n):
        t = 2 * math.pi * k / n
        pts += [round(cx + rx * math.cos(t), 1), round(cy + ry * math.sin(t), 1)]
    return pts


def _polygon_area(poly: list[float]) -> float:
    xs, ys = poly[0::2], poly[1::2]
    s = sum(xs[i] * ys[(i + 1) % len(xs)] - xs[(i + 1) % len(xs)] * ys[i] for i in range(len(xs)))
    return abs(s) / 2.0


def _as_rgb_uint8(img: np.ndarray) -> np.ndarray:
    img = np.asarray(img)
    if img.dtype != np.uint8:  # matplotlib may hand floats in [0, 1]
        img = np.clip(np.round(img * 255.0 if img.max() <= 1.0 else img), 0, 255).astype(np.uint8)
    if img.ndim == 2:  # grey sources (camera, clock, coins) are stored as 3-channel RGB
        img = np.stack([img] * 3, axis=-1)
    return np.ascontiguousarray(img[:, :, :3])


def build(out: Path, preview: Path | None = None) -> dict:
    import cv2

    (out / "images").mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    ann_id = 1
    for image_id, (stem, (load, domain)) in enumerate(SOURCES.items(), start=1):
        rgb = _as_rgb_uint8(load())
        h, w = rgb.shape[:2]
        if max(h, w) > 640:
            raise SystemExit(f"{stem}: {w}x{h} is larger than 640 px; boxes assume native size")
        file_name = f"images/{stem}.jpg"
        ok = cv2.imwrite(str(out / file_name), rgb[:, :, ::-1],
                         [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise SystemExit(f"cannot write {out / file_name}")
        anns = ANNOTATIONS[stem]
        record = {"id": image_id, "file_name": file_name, "width": w, "height": h, "domain": domain}
        if stem in EXTRA_LABEL_SPACE:
            record["query_ids"] = sorted({q for q, _, _ in anns} | set(EXTRA_LABEL_SPACE[stem]))
        images.append(record)
        for qid, box, shape in anns:
            x, y, bw, bh = box
            if x < 0 or y < 0 or x + bw > w or y + bh > h:
                raise SystemExit(f"{stem}: box {box} of query {qid} leaves the {w}x{h} image")
            poly = _polygon(box, shape)
            annotations.append({
                "id": ann_id, "image_id": image_id, "category_id": qid,
                "bbox": [float(v) for v in box], "area": round(_polygon_area(poly), 1),
                "iscrowd": 0, "segmentation": [poly],
            })
            ann_id += 1
        if preview is not None:
            _draw(preview / f"{stem}.png", rgb, anns)
    categories = []
    for qid, name, orig, cat, types, coref in QUERIES:
        c = {"id": qid, "name": name, "prompts": {"orig": orig, "cat": cat, "tmpl": "a photo of " + orig},
             "prompt_types": types}
        if coref is not None:
            c["coref"] = coref
        categories.append(c)
    coco = {
        "info": {"description": "probench-sample: 10 redistributable photographs, hand-annotated "
                                "Pro-Bench queries (see README.md)", "version": "1.0"},
        "images": images, "categories": categories, "annotations": annotations,
    }
    (out / "annotations.json").write_text(json.dumps(coco, indent=1) + "\n", encoding="utf-8")
    return coco


def _draw(path: Path, rgb: np.ndarray, anns: list[tuple[int, list[float], str]]) -> None:
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    bgr = np.ascontiguousarray(rgb[:, :, ::-1]).copy()
    colours = [(0, 0, 255), (0, 255, 0), (255, 0, 0), (0, 255, 255), (255, 0, 255), (255, 255, 0)]
    for k, (qid, (x, y, w, h), _shape) in enumerate(anns):
        c = colours[k % len(colours)]
        cv2.rectangle(bgr, (int(x), int(y)), (int(x + w) - 1, int(y + h) - 1), c, 1)
        cv2.putText(bgr, str(qid), (int(x) + 2, int(y) + 12), cv2.FONT_HERSHEY_SIMPLEX, 0.4, c, 1)
    cv2.imwrite(str(path), bgr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("datasets/probench-sample"))
    ap.add_argument("--preview", type=Path, default=None, help="also draw the boxes into DIR")
    args = ap.parse_args()
    coco = build(args.out, args.preview)
    print(f"{args.out}: {len(coco['images'])} images, {len(coco['categories'])} queries, "
          f"{len(coco['annotations'])} boxes")


if __name__ == "__main__":
    main()
