"""Shared helpers of the scoring tests: random datasets with the hard cases, and a
pycocotools reference that evaluates exactly the label-space pairs."""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path

import numpy as np

from probench.cache.run import RunDir
from probench.data.synthetic import synthetic_coco, synthetic_prediction_arrays


def hard_coco(seed: int, n_images: int = 40, n_queries: int = 8) -> dict:
    """A random dataset plus the edge cases: crowd, duplicate GT boxes (IoU ties), areas on
    the COCO size boundaries, a query without GT, an image with no GT at all."""
    coco = synthetic_coco(n_images, n_queries, seed=seed, crowd_fraction=0.1, negatives_per_image=1.5,
                          size_range=(48, 400))  # fmt: skip
    anns = coco["annotations"]
    rng = np.random.default_rng(seed)
    next_id = max(a["id"] for a in anns) + 1
    for a in list(anns[:: max(1, len(anns) // 6)]):  # identical GT boxes in one pair
        anns.append({**copy.deepcopy(a), "id": next_id, "iscrowd": 0})
        next_id += 1
    for k, a in enumerate(anns[:4]):  # areas exactly on the size boundaries
        a["area"] = float([32**2, 96**2][k % 2])
    # a query nobody has GT for, in some label spaces (negatives only)
    ghost = {"id": 999, "name": "ghost", "prompts": {"orig": "a ghost"}, "prompt_types": []}
    coco["categories"].append(ghost)
    for im in coco["images"][:3]:
        gtq = sorted({a["category_id"] for a in anns if a["image_id"] == im["id"]})
        im["query_ids"] = sorted(set(im.get("query_ids") or gtq) | {999})
    # an image with an empty label space
    coco["images"].append({"id": 5000, "file_name": "x.png", "width": 100, "height": 100, "domain": "urban"})
    del rng
    return coco


def hard_predictions(coco: dict, formulation: str, seed: int, fp_per_pair: float = 4.0) -> list[dict]:
    arr = synthetic_prediction_arrays(coco, formulation, seed=seed, fp_per_pair=fp_per_pair, duplicates=0.5,
                                      score_decimals=1)  # fmt: skip
    res = [
        {"image_id": int(i), "category_id": int(c), "bbox": [float(v) for v in b], "score": float(s)}
        for i, c, b, s in zip(arr["image_id"], arr["category_id"], arr["bbox"], arr["score"], strict=True)
    ]
    # detections outside any label space (must be ignored) and exact duplicates (score ties)
    res.append({"image_id": 5000, "category_id": 1, "bbox": [1.0, 1.0, 5.0, 5.0], "score": 0.9})
    res += [dict(r) for r in res[:20]]
    return res


def label_pairs(coco: dict) -> set[tuple[int, int]]:
    gtq: dict[int, set[int]] = {}
    for a in coco["annotations"]:
        gtq.setdefault(a["image_id"], set()).add(a["category_id"])
    out = set()
    for im in coco["images"]:
        qs = im.get("query_ids")
        for q in sorted(gtq.get(im["id"], ())) if qs is None else qs:
            out.add((im["id"], q))
    return out


def cocoeval(coco: dict, results: list[dict], iou_thrs: np.ndarray, area: bool = True, *,
             filtered: bool = True, engine: str = "pycocotools", img_ids: list[int] | None = None):
    """COCOeval (bbox) on the label-space-filtered results (every result with
    ``filtered=False``: plain COCOeval on a plain COCO file); prints silenced. ``engine``:
    "pycocotools" (the reference) or "hotcoco" (a second, independent implementation in
    Rust with pycocotools' API). ``img_ids``: evaluate those images only (``params.imgIds``)."""
    if engine == "hotcoco":
        from hotcoco import COCO, COCOeval
    else:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval

    pairs = label_pairs(coco)
    res = [copy.deepcopy(r) for r in results if not filtered or (r["image_id"], r["category_id"]) in pairs]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = copy.deepcopy(coco)
        gt.createIndex()
        dt = gt.loadRes(res)
        ev = COCOeval(gt, dt, "bbox")
        params = ev.params  # (hotcoco hands out a copy: set it back below)
        params.iouThrs = np.asarray(iou_thrs)
        params.maxDets = [100]
        if img_ids is not None:
            params.imgIds = list(img_ids)
        if not area:
            params.areaRng = params.areaRng[:1]
            params.areaRngLbl = params.areaRngLbl[:1]
        ev.params = params
        ev.evaluate()
        ev.accumulate()
    return ev


REFERENCES = ("pycocotools", "hotcoco")  # the engines the agreement tests compare against


def ref_map(ev, t: int, a: int = 0) -> float:
    s = np.asarray(ev.eval["precision"])[t, :, :, a, 0]
    return float(np.mean(s[s > -1])) if (s > -1).any() else float("nan")


def write_run(run: Path, preds: dict, latency: bool = True, dataset: dict | None = None) -> None:
    """A run folder through the cache's writer; ``dataset`` becomes run.json's dataset."""
    rd = RunDir(run).create()
    for f, res in preds.items():
        w = rd.writer(f)
        by_img: dict[int, list] = {}
        for r in res:
            by_img.setdefault(r["image_id"], []).append(r)
        for i, rs in by_img.items():
            w.add_image(i, rs)
        w.finalize()
    info: dict = {"model": {"name": "tiny-owlv2"}}
    if dataset is not None:
        info["dataset"] = dataset
    rd.write_json("run.json", info)
    if latency:
        summ = {"mean": 1.0, "std": 0.1, "p50": 1.0, "p95": 1.2, "p99": 1.3, "max": 1.5}
        rd.write_json("latency.json", {"summary_ms": summ})
    rd.write_json("realtime.json", {"budget_ms": 33.3, "frames_sent": 3})


# The example of issue 14: one target; under every formulation 99 wrong boxes at 0.9 and
# the right box at 0.001 -> mAP.5 0.01, pcr50 1.0 (recall@100), pcr50_top1 0.0.
ONE_TARGET = {
    "images": [{"id": 1, "file_name": "a.png", "width": 1000, "height": 1000, "domain": "indoor"}],
    "categories": [
        {"id": 1, "name": "valve", "prompts": {"orig": "the red valve"}, "prompt_types": ["state"]}
    ],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [100, 100, 50, 50], "area": 2500, "iscrowd": 0}
    ],
}


def example_predictions() -> dict[str, list[dict]]:
    """99 wrong boxes at 0.9, then the right box at 0.001, per formulation."""
    wrong = [
        {"image_id": 1, "category_id": 1, "bbox": [500 + k, 500, 20, 20], "score": 0.9} for k in range(99)
    ]
    right = {"image_id": 1, "category_id": 1, "bbox": [100, 100, 50, 50], "score": 0.001}
    return {f: [*wrong, right] for f in ("orig", "cat", "tmpl")}
