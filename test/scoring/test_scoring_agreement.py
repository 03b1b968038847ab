"""The suite agrees with pycocotools (label-space-filtered detections) to 1e-9, and with
hotcoco's plain API (the suite's AP is hotcoco's evaluation of its own tables: this checks
that wiring). The matching that probench does itself (PCR, PLC, curves, bootstrap) is
checked against pycocotools' per-detection records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.scoring_data import REFERENCES, cocoeval, hard_coco, hard_predictions, label_pairs, ref_map
from probench.data.dataset import Dataset
from probench.scoring import score
from probench.scoring.constants import COCO_IOUS, SWEEP_IOUS
from probench.scoring.match import match
from probench.scoring.tables import DetArrays, GroundTruth

TOL = 1e-9


def _close(a: float | None, b: float) -> bool:
    if math.isnan(b):
        return a is None
    return a is not None and abs(a - b) <= TOL


@pytest.mark.parametrize("engine", REFERENCES)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ap_matches_pycocotools(seed: int, engine: str) -> None:
    coco = hard_coco(seed)
    preds = {f: hard_predictions(coco, f, seed) for f in ("orig", "cat")}
    if seed == 3:  # some pairs beyond maxDets = 100
        preds["orig"] = hard_predictions(coco, "orig", seed, fp_per_pair=70.0)
    out = score(Dataset.from_dict(coco), preds).to_json()
    assert out["by_formulation"]["orig"]["n_beyond_max_dets"] > 0 or seed != 3
    for f, res in preds.items():
        mine = out["by_formulation"][f]
        ev = cocoeval(coco, res, SWEEP_IOUS, area=False, engine=engine)
        for t, thr in enumerate(SWEEP_IOUS):
            ref = ref_map(ev, t)
            assert _close(mine["ap_by_iou"][f"{thr:.2f}"], ref), (f, thr, mine["ap_by_iou"], ref)
        ev = cocoeval(coco, res, COCO_IOUS, area=True, engine=engine)
        per_t = [ref_map(ev, t) for t in range(len(COCO_IOUS))]
        assert _close(mine["map50"], per_t[0])
        assert _close(mine["map75"], per_t[5])
        precision = np.asarray(ev.eval["precision"])
        s = precision[:, :, :, 0, 0]
        assert _close(mine["map50_95"], float(np.mean(s[s > -1])))
        if f == "orig":
            for a, size in enumerate(("small", "medium", "large"), start=1):
                got = out["by_size"][size]
                assert _close(got["map50"], ref_map(ev, 0, a)), size
                assert _close(got["map75"], ref_map(ev, 5, a)), size
                s = precision[:, :, :, a, 0]
                ref = float(np.mean(s[s > -1])) if (s > -1).any() else float("nan")
                assert _close(got["map50_95"], ref), size
                assert got["n_queries"] == int((s[0, 0] > -1).sum())


@pytest.mark.parametrize("engine", REFERENCES)
@pytest.mark.parametrize("seed", [0, 1])
def test_by_domain_matches_the_references_on_each_domains_images(seed: int, engine: str) -> None:
    """by_domain: each domain scored as the reference scores that domain's images alone."""
    coco = hard_coco(seed, n_images=60)
    res = hard_predictions(coco, "orig", seed)
    out = score(Dataset.from_dict(coco), {"orig": res}).to_json()
    domains = sorted({im["domain"] for im in coco["images"]})
    assert len(domains) >= 3 and set(out["by_domain"]) == set(domains)
    for d in domains:
        ids = [im["id"] for im in coco["images"] if im["domain"] == d]
        ev = cocoeval(coco, res, COCO_IOUS, area=False, engine=engine, img_ids=ids)
        precision = np.asarray(ev.eval["precision"])[:, :, :, 0, 0]
        has = (precision[0] > -1).any(axis=0)  # (K,): queries with GT in the domain
        got = out["by_domain"][d]
        assert got["n_queries"] == int(has.sum()), d
        assert _close(got["map50"], ref_map(ev, 0)), (d, got, ref_map(ev, 0))
        s = precision
        assert _close(got["map50_95"], float(np.mean(s[s > -1]))), d


def test_iou_tie_goes_to_the_later_gt_as_pycocotools() -> None:
    """det1 overlaps GT A and B equally (IoU 1/3): pycocotools gives it the later GT (B),
    which leaves A for det2 (IoU 1); giving it A instead would leave det2 unmatched."""
    coco = {
        "images": [{"id": 1, "file_name": "a.png", "width": 100, "height": 100, "domain": "indoor"}],
        "categories": [{"id": 1, "name": "box", "prompts": {"orig": "the box"}}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100, "iscrowd": 0},
            {"id": 2, "image_id": 1, "category_id": 1, "bbox": [10, 0, 10, 10], "area": 100, "iscrowd": 0},
        ],
    }
    res = [
        {"image_id": 1, "category_id": 1, "bbox": [5, 0, 10, 10], "score": 0.9},
        {"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.8},
    ]
    out = score(Dataset.from_dict(coco), {"orig": res}).to_json()
    ev = cocoeval(coco, res, SWEEP_IOUS, area=False)
    assert ref_map(ev, 2) == pytest.approx(1.0)  # both GT found at 0.30
    assert out["by_formulation"]["orig"]["ap_by_iou"]["0.30"] == pytest.approx(1.0, abs=TOL)
    assert out["by_formulation"]["orig"]["ap_by_iou"]["0.50"] == pytest.approx(ref_map(ev, 4), abs=TOL)


def _degrade(results: list[dict], seed: int) -> list[dict]:
    """Every 7th box gets a negative width, zero height or both sides negative."""
    rng = np.random.default_rng(seed)
    out = [dict(r, bbox=list(r["bbox"])) for r in results]
    for k, r in enumerate(out[::7]):
        x, y, w, h = r["bbox"]
        r["bbox"] = [[x, y, -w, h], [x, y, w, 0.0], [x, y, -w, -h]][int(rng.integers(3)) if k else 0]
    return out


def _iou(a: list[float], b: list[float]) -> float:
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    return w * h / (a[2] * a[3] + b[2] * b[3] - w * h)


def reference_pcr(
    coco: dict, preds: dict[str, list[dict]], threshold: float, engine: str = "pycocotools"
) -> dict[str, float | None]:
    """PCR/PLC from the reference engine's own matches (evalImgs at IoU 0.5, area "all", maxDets 100):
    per target and formulation, the matched detection (``gtMatches``), whether it is the first
    of the pair's ``dtIds`` (top-1) and its score."""
    match: dict[str, dict[int, dict]] = {}  # formulation -> GT id -> matched detection
    top1: dict[str, dict[int, bool]] = {}
    for f, res in preds.items():
        ev = cocoeval(coco, res, np.array([0.5]), area=False, engine=engine)
        dts = ev.cocoDt.anns
        match[f], top1[f] = {}, {}
        for e in ev.evalImgs:
            if e is None:
                continue
            for g, m in zip(e["gtIds"], e["gtMatches"][0], strict=True):
                if m > 0:
                    match[f][g] = dts[int(m)]
                    top1[f][g] = int(m) == e["dtIds"][0]
    coref = {c["id"]: c.get("coref") or ["orig", "cat", "tmpl"] for c in coco["categories"]}
    targets = [a for a in coco["annotations"] if not a.get("iscrowd")]
    rules = {
        "": lambda f, g: g in match[f],
        "_top1": lambda f, g: top1[f].get(g, False),
        "_at": lambda f, g: g in match[f] and match[f][g]["score"] >= threshold,
    }
    out: dict[str, float | None] = {}
    for suffix, rule in rules.items():
        rec, multi, plc = [], [], []
        for a in targets:
            ks = coref[a["category_id"]]
            ok = all(rule(f, a["id"]) for f in ks)
            rec.append(ok)
            if len(ks) >= 2:
                multi.append(ok)
                if ok:
                    boxes = [match[f][a["id"]]["bbox"] for f in ks]
                    pairs = [_iou(boxes[i], boxes[j]) for i in range(len(ks)) for j in range(i + 1, len(ks))]
                    plc.append(sum(pairs) / len(pairs))
        out[f"pcr50{suffix}"] = sum(rec) / len(rec)
        out[f"pcr50{suffix}_multi"] = sum(multi) / len(multi)
        out[f"plc{suffix}"] = sum(plc) / len(plc) if plc else None
    return out


@pytest.mark.parametrize("engine", REFERENCES)
@pytest.mark.parametrize(("seed", "degenerate"), [(0, False), (1, True), (2, True)])
def test_pcr_variants_match_a_reference_on_the_references_matches(
    seed: int, degenerate: bool, engine: str
) -> None:
    coco = hard_coco(seed)
    preds = {f: hard_predictions(coco, f, seed) for f in ("orig", "cat", "tmpl")}
    if degenerate:
        preds = {f: _degrade(res, seed) for f, res in preds.items()}
    out = score(Dataset.from_dict(coco), preds, pcr_score_threshold=0.5).to_json()
    ref = reference_pcr(coco, preds, 0.5, engine)
    assert out["pcr_null_reason"] is None
    assert out["pcr50"] > out["pcr50_top1"] > 0 and out["pcr50"] > out["pcr50_at"] > 0  # the cases differ
    for key, want in ref.items():
        assert _close(out[key], math.nan if want is None else want), (key, out[key], want)


@pytest.mark.parametrize("engine", REFERENCES)
@pytest.mark.parametrize("seed", [1, 2])
def test_boxes_without_area_score_as_in_pycocotools(seed: int, engine: str) -> None:
    coco = hard_coco(seed)
    res = _degrade(hard_predictions(coco, "orig", seed), seed)
    out = score(Dataset.from_dict(coco), {"orig": res}).to_json()
    stats = out["by_formulation"]["orig"]
    assert stats["n_degenerate_boxes"] == len(res[::7]) and 0 < stats["n_degenerate_ignored"] < len(res[::7])
    ev = cocoeval(coco, res, SWEEP_IOUS, area=False, engine=engine)
    for t, thr in enumerate(SWEEP_IOUS):
        assert _close(stats["ap_by_iou"][f"{thr:.2f}"], ref_map(ev, t)), thr
    ev = cocoeval(coco, res, COCO_IOUS, area=True, engine=engine)
    for a, size in enumerate(("small", "medium", "large"), start=1):
        assert _close(out["by_size"][size]["map50"], ref_map(ev, 0, a)), size


@pytest.mark.parametrize(("seed", "degenerate"), [(0, False), (1, True), (3, False)])
def test_matching_is_pycocotools_per_detection_and_per_gt(seed: int, degenerate: bool) -> None:
    """The matching PCR, PLC, the curves and the bootstrap read (area "all", the COCO
    thresholds) is pycocotools' ``evalImgs``: each kept detection's true positive / ignored
    fate and each GT's matched detection, at every threshold (crowd, IoU and score ties,
    degenerate boxes and pairs beyond maxDets included)."""
    coco = hard_coco(seed)
    res = hard_predictions(coco, "orig", seed, fp_per_pair=70.0 if seed == 3 else 4.0)
    res = _degrade(res, seed) if degenerate else res
    pairs = label_pairs(coco)
    res = [r for r in res if (r["image_id"], r["category_id"]) in pairs]  # loadRes ids: index + 1
    gt = GroundTruth.from_dataset(Dataset.from_dict(coco))
    m = match(gt, DetArrays.from_results(res), ("all",), COCO_IOUS)
    assert m.n_beyond_max > 0 or seed != 3
    ev = cocoeval(coco, res, COCO_IOUS, area=False)
    want_tp, want_ig, want_gt = {}, {}, {}
    for e in ev.evalImgs:
        if e is None:
            continue
        for j, d in enumerate(e["dtIds"]):
            matched = np.asarray(e["dtMatches"])[:, j] > 0
            ignored = np.asarray(e["dtIgnore"])[:, j].astype(bool)
            want_tp[d], want_ig[d] = matched & ~ignored, ignored
        for j, g in enumerate(e["gtIds"]):
            want_gt[g] = np.asarray(e["gtMatches"])[:, j].astype(np.int64)  # detection id, 0: none
    got_ids = m.det_order + 1
    assert sorted(got_ids.tolist()) == sorted(want_tp)  # the same detections kept
    for k, d in enumerate(got_ids.tolist()):
        assert np.array_equal(m.tp[k, 0], want_tp[d]), d
        assert np.array_equal(m.ignored[k, 0], want_ig[d]), d
    ann_ids = gt.gt_id.tolist()
    for row, g in enumerate(ann_ids):
        det = m.gt_match[row, 0]
        got = np.where(det >= 0, got_ids[np.maximum(det, 0)], 0)
        assert np.array_equal(got, want_gt[g]), g
