"""Synthetic Pro-Bench datasets and runs of any size, deterministic from a seed.

``synthetic_coco`` builds an annotations dict (all three prompts, every prompt type,
several domains, label spaces with negative pairs, crowd instances, coref sets including
single-formulation ones); ``synthetic_predictions`` builds per-formulation COCO results with
controllable quality (jittered GT boxes, misses, false positives, tied scores);
``write_synthetic_dataset`` writes a dataset folder, optionally with small PNGs (noise with
the GT boxes drawn) so bags and inference can run on it. Vectorised with numpy: the
paper's scale (13k images, 74.5k instances, 515 queries) takes seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probench.vocabulary import FORMULATIONS, KNOWN_DOMAINS, PROMPT_TYPES, TEMPLATE_PREFIX, CocoResult

_NOUNS = ("valve", "pipe", "ladder", "door", "cable", "helmet", "drill", "box", "chair", "cart", "sign",
          "hose", "lamp", "pallet", "rock", "fence", "bucket", "tool", "panel", "vent")  # fmt: skip
_ATTRS = ("red", "rusty", "open", "closed", "small", "large", "yellow", "broken", "wet", "metal")
_CORefs = (None, None, None, None, ["orig", "tmpl"], ["orig"], ["orig", "cat"], ["cat", "tmpl"])

DEFAULT_RECALL: dict[str, float] = {"orig": 0.75, "cat": 0.65, "tmpl": 0.7}
SIZE_RANGE = (64, 640)  # image widths and heights, pixels
WRITTEN_SIZE_RANGE = (64, 256)  # when the images are written: small, so that inference stays fast


def _queries(n_queries: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    cats = []
    for k in range(n_queries):
        noun = _NOUNS[k % len(_NOUNS)] + ("" if k < len(_NOUNS) else f"-{k // len(_NOUNS)}")
        attr = _ATTRS[int(rng.integers(len(_ATTRS)))]
        orig = f"the {attr} {noun} next to the wall"
        types = {PROMPT_TYPES[k % len(PROMPT_TYPES)]}
        types |= {PROMPT_TYPES[int(i)] for i in rng.integers(0, len(PROMPT_TYPES), int(rng.integers(0, 3)))}
        cat: dict[str, Any] = {
            "id": k + 1,
            "name": noun,
            "prompts": {"orig": orig, "cat": noun, "tmpl": TEMPLATE_PREFIX + orig},
            "prompt_types": [t for t in PROMPT_TYPES if t in types],
        }
        if k % 7 == 3:  # some records rely on the derivation of cat/tmpl (docs/FORMATS.md)
            cat["prompts"] = {"orig": orig}
        coref = _CORefs[k % len(_CORefs)]
        if coref is not None:
            cat["coref"] = list(coref)
        cats.append(cat)
    return cats


def synthetic_coco(
    n_images: int = 50,
    n_queries: int = 20,
    n_instances: int | None = None,
    *,
    seed: int = 0,
    domains: Sequence[str] = KNOWN_DOMAINS,
    negatives_per_image: float = 1.0,
    crowd_fraction: float = 0.02,
    size_range: tuple[int, int] = SIZE_RANGE,
) -> dict[str, Any]:
    """A Pro-Bench annotations dict. ``n_instances`` defaults to ~5.7 per image (the paper's
    74.5k / 13k). Boxes span COCO's small, medium and large ranges."""
    rng = np.random.default_rng(seed)
    n_queries = max(1, int(n_queries))
    n_instances = round(5.73 * n_images) if n_instances is None else int(n_instances)
    cats = _queries(n_queries, rng)
    w = rng.integers(size_range[0], size_range[1] + 1, n_images)
    h = rng.integers(size_range[0], size_range[1] + 1, n_images)
    dom = rng.integers(0, len(domains), n_images)
    images = [
        {"id": i + 1, "file_name": f"images/{i + 1:06d}.png", "width": int(w[i]), "height": int(h[i]),
         "domain": domains[int(dom[i])]}
        for i in range(n_images)
    ]  # fmt: skip
    # instances: each image gets a few GT queries, each with one or more instances
    inst_img = np.sort(rng.integers(0, n_images, n_instances)) if n_images else np.zeros(0, np.int64)
    per_img = np.bincount(inst_img, minlength=n_images)
    n_gtq = np.minimum(np.maximum(1, rng.poisson(2.0, n_images)), n_queries)
    inst_q = np.empty(n_instances, np.int64)
    start = 0
    for i in range(n_images):  # per image: a few distinct queries (and some negatives)
        k = int(per_img[i])
        pool = rng.choice(n_queries, size=min(n_queries, int(n_gtq[i]) + 3), replace=False)
        gtq = pool[: n_gtq[i]]
        inst_q[start : start + k] = gtq[rng.integers(0, len(gtq), k)]
        present = sorted({int(q) for q in inst_q[start : start + k]})
        n_neg = int(rng.poisson(negatives_per_image)) if negatives_per_image > 0 else 0
        neg = [int(q) for q in pool[n_gtq[i] :] if int(q) not in present][:n_neg]
        if neg or i % 5 == 0:  # explicit label space (with negatives); else derived from GT
            images[i]["query_ids"] = sorted(q + 1 for q in present + neg)
        start += k
    iw, ih = w[inst_img].astype(float), h[inst_img].astype(float)
    frac = np.exp(rng.uniform(np.log(0.03), np.log(0.9), (n_instances, 2)))  # log-uniform sizes
    bw = np.maximum(1.0, np.round(frac[:, 0] * iw, 1))
    bh = np.maximum(1.0, np.round(frac[:, 1] * ih, 1))
    bx = np.round(rng.uniform(0, 1, n_instances) * (iw - bw), 1)
    by = np.round(rng.uniform(0, 1, n_instances) * (ih - bh), 1)
    crowd = rng.uniform(0, 1, n_instances) < crowd_fraction
    annotations = [
        {"id": j + 1, "image_id": int(inst_img[j]) + 1, "category_id": int(inst_q[j]) + 1,
         "bbox": [float(bx[j]), float(by[j]), float(bw[j]), float(bh[j])],
         "area": float(round(bw[j] * bh[j], 2)), "iscrowd": int(crowd[j])}
        for j in range(n_instances)
    ]  # fmt: skip
    return {
        "info": {"description": f"synthetic Pro-Bench dataset (seed {seed})"},
        "images": images,
        "categories": cats,
        "annotations": annotations,
    }


def _label_pairs(coco: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(image id, query id) of every label-space pair (explicit query_ids, else GT queries)."""
    by_img: dict[int, set[int]] = {}
    for a in coco["annotations"]:
        by_img.setdefault(int(a["image_id"]), set()).add(int(a["category_id"]))
    img, q = [], []
    for im in coco["images"]:
        qs = im.get("query_ids")
        qs = sorted(by_img.get(int(im["id"]), ())) if qs is None else qs
        img += [int(im["id"])] * len(qs)
        q += [int(x) for x in qs]
    return np.array(img, np.int64), np.array(q, np.int64)


def synthetic_prediction_arrays(
    coco: Mapping[str, Any],
    formulation: str,
    *,
    seed: int = 0,
    recall: float | None = None,
    jitter: float = 0.08,
    fp_per_pair: float = 3.0,
    duplicates: float = 0.3,
    score_decimals: int | None = 2,
) -> dict[str, np.ndarray]:
    """One formulation's predictions as columns (``image_id``, ``category_id``, ``bbox``
    (n, 4), ``score``). A GT instance is detected when a per-instance uniform draw (shared by
    all formulations of the same ``seed``, so recoveries correlate as in real models) is
    below ``recall``; its box is the GT jittered by ``jitter`` of its size. Each label-space
    pair also gets Poisson(``fp_per_pair``) random boxes with lower scores. Scores rounded
    to ``score_decimals`` make ties."""
    if formulation not in FORMULATIONS:
        raise ValueError(f"unknown formulation {formulation!r}")
    recall = DEFAULT_RECALL[formulation] if recall is None else recall
    shared = np.random.default_rng(seed)  # same draws for every formulation
    rng = np.random.default_rng([seed, FORMULATIONS.index(formulation) + 1])
    anns = coco["annotations"]
    n = len(anns)
    g_img = np.fromiter((a["image_id"] for a in anns), np.int64, count=n)
    g_q = np.fromiter((a["category_id"] for a in anns), np.int64, count=n)
    g_box = np.array([a["bbox"] for a in anns], dtype=np.float64).reshape(n, 4)
    u = shared.uniform(0, 1, n)
    hit = u < recall
    n_dup = rng.poisson(duplicates, n) * hit
    reps = hit.astype(np.int64) + n_dup
    t_idx = np.repeat(np.arange(n), reps)
    tb = g_box[t_idx]
    noise = rng.normal(0, jitter, (len(t_idx), 4)) * np.concatenate([tb[:, 2:], tb[:, 2:]], axis=1)
    tb = tb + noise
    tb[:, 2:] = np.maximum(tb[:, 2:], 1.0)
    t_score = np.clip(rng.beta(5, 2, len(t_idx)), 0, 1)
    p_img, p_q = _label_pairs(coco)
    sizes = {int(im["id"]): (im["width"], im["height"]) for im in coco["images"]}
    n_fp = rng.poisson(fp_per_pair, len(p_img))
    f_img = np.repeat(p_img, n_fp)
    f_q = np.repeat(p_q, n_fp)
    wh = np.array([sizes[int(i)] for i in p_img], dtype=np.float64).reshape(-1, 2)
    wh = np.repeat(wh, n_fp, axis=0)
    fw = wh * rng.uniform(0.05, 0.6, (len(f_img), 2))
    fxy = rng.uniform(0, 1, (len(f_img), 2)) * (wh - fw)
    f_score = np.clip(rng.beta(2, 5, len(f_img)), 0, 1)
    box = np.concatenate([tb, np.concatenate([fxy, fw], axis=1)])
    score = np.concatenate([t_score, f_score])
    if score_decimals is not None:
        score = np.round(score, score_decimals)
    out = {
        "image_id": np.concatenate([g_img[t_idx], f_img]),
        "category_id": np.concatenate([g_q[t_idx], f_q]),
        "bbox": np.round(box, 2),
        "score": score,
    }
    perm = rng.permutation(len(score))  # results files need not be sorted
    return {k: v[perm] for k, v in out.items()}


def arrays_to_results(arrays: Mapping[str, np.ndarray]) -> list[CocoResult]:
    """Columns as COCO result dicts."""
    return [
        {"image_id": i, "category_id": c, "bbox": b, "score": s}
        for i, c, b, s in zip(
            arrays["image_id"].tolist(), arrays["category_id"].tolist(), arrays["bbox"].tolist(),
            arrays["score"].tolist(), strict=True,
        )
    ]  # fmt: skip


def synthetic_predictions(
    coco: Mapping[str, Any],
    formulations: Sequence[str] = FORMULATIONS,
    *,
    seed: int = 0,
    recall: Mapping[str, float] | None = None,
    jitter: float = 0.08,
    fp_per_pair: float = 3.0,
    duplicates: float = 0.3,
    score_decimals: int | None = 2,
) -> dict[str, list[CocoResult]]:
    """Per-formulation COCO results (see :func:`synthetic_prediction_arrays`)."""
    recall = dict(recall or {})
    return {
        f: arrays_to_results(synthetic_prediction_arrays(
            coco, f, seed=seed, recall=recall.get(f), jitter=jitter, fp_per_pair=fp_per_pair,
            duplicates=duplicates, score_decimals=score_decimals,
        ))
        for f in formulations
    }  # fmt: skip


def write_synthetic_dataset(
    folder: str | Path,
    n_images: int = 20,
    *,
    with_images: bool = True,
    seed: int = 0,
    n_queries: int = 20,
    n_instances: int | None = None,
    domains: Sequence[str] = KNOWN_DOMAINS,
    negatives_per_image: float = 1.0,
    crowd_fraction: float = 0.02,
    size_range: tuple[int, int] | None = None,
) -> Path:
    """Write ``folder/annotations.json`` (and ``folder/images/*.png`` when ``with_images``);
    returns the folder. Images are small when written (default sizes 64-256 px, else
    :func:`synthetic_coco`'s) so that inference on them stays fast; the other keyword
    arguments are :func:`synthetic_coco`'s."""
    from probench.cache.atomic import write_bytes_atomic, write_json_atomic

    folder = Path(folder)
    if size_range is None:
        size_range = WRITTEN_SIZE_RANGE if with_images else SIZE_RANGE
    coco = synthetic_coco(
        n_images, n_queries, n_instances, seed=seed, domains=domains, negatives_per_image=negatives_per_image,
        crowd_fraction=crowd_fraction, size_range=size_range,
    )  # fmt: skip
    if with_images:
        import cv2

        rng = np.random.default_rng([seed, 99])
        by_img: dict[int, list[list[float]]] = {}
        for a in coco["annotations"]:
            by_img.setdefault(a["image_id"], []).append(a["bbox"])
        for im in coco["images"]:
            pix = rng.integers(0, 256, (im["height"], im["width"], 3), dtype=np.uint8)
            for x, y, w, h in by_img.get(im["id"], []):
                color = tuple(int(c) for c in rng.integers(0, 256, 3))
                cv2.rectangle(pix, (int(x), int(y)), (int(x + w), int(y + h)), color, thickness=-1)
            ok, buf = cv2.imencode(".png", pix)
            if not ok:
                raise OSError(f"cannot encode image {im['id']}")
            write_bytes_atomic(folder / im["file_name"], buf.tobytes())
    write_json_atomic(folder / "annotations.json", coco, indent=None)
    return folder
