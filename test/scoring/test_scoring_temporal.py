"""Temporal metrics (scoring/temporal.py): continuity, flicker, identity, HOTA, temporal PCR,
prompt-change latency; checked against a TrackEval port computed independently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from probench.data.dataset import Dataset, load_dataset
from probench.data.synthetic_sequences import sequence_scene
from probench.scoring.temporal import flicker_count, temporal_metrics


def _static_video(n: int, *, change_at: int | None = None) -> Dataset:
    """One video of ``n`` frames, query 1 always visible at a fixed box; with ``change_at``
    the prompt changes there to query 2 (visible at another box)."""
    images, anns = [], []
    for k in range(n):
        q = 2 if change_at is not None and k >= change_at else 1
        images.append(
            {
                "id": 100 + k,
                "file_name": f"{k}.jpg",
                "width": 100,
                "height": 100,
                "video_id": 1,
                "frame_index": k,
                "timestamp": k * 0.1,
                "query_ids": [q],
            }
        )
        box = [10, 10, 30, 30] if q == 1 else [50, 50, 30, 30]
        anns.append({"id": 1 + k, "image_id": 100 + k, "category_id": q, "bbox": box, "track_id": q})
    videos = (
        [{"id": 1}]
        if change_at is None
        else [{"id": 1, "prompt_changes": [{"frame_index": change_at, "query_ids": [2]}]}]
    )
    cats = [
        {"id": 1, "name": "cup", "prompts": {"orig": "the red cup"}},
        {"id": 2, "name": "box", "prompts": {"orig": "the box"}, "coref": ["orig", "tmpl"]},
    ]
    return Dataset.from_dict({"images": images, "categories": cats, "annotations": anns, "videos": videos})


def _gt_predictions(ds: Dataset, keep: Any = lambda im, a: True) -> list[dict[str, Any]]:
    return [
        {"image_id": a.image_id, "category_id": a.query_id, "bbox": list(a.bbox), "score": 0.9}
        for a in ds.annotations
        if keep(ds.images[a.image_id], a)
    ]


def test_a_detector_that_drops_every_fifth_frame() -> None:
    ds = _static_video(50)
    preds = _gt_predictions(ds, lambda im, a: im.frame_index % 5 != 4)
    t = temporal_metrics(ds, {"orig": preds}).to_json()
    assert t is not None
    s = t["by_formulation"]["orig"]
    assert s["continuity"] == pytest.approx(0.8)
    # lost at frames 4, 9, ..., 49: each but the last lies between found frames
    assert s["n_flicker"] == 9 and s["flicker_per_100_frames"] == pytest.approx(18.0)
    assert s["mota"] == pytest.approx(0.8) and s["id_switches"] == 0 and s["misses"] == 10
    assert s["idf1"] == pytest.approx(2 * 40 / (50 + 40), abs=1e-6)
    assert s["identity"] == "query"
    assert t["timelines"]["orig"]["1:1"] == "11110" * 10


def test_perfect_predictions_and_a_wrong_box() -> None:
    ds = _static_video(20)
    perfect = _gt_predictions(ds)
    wrong = [dict(p, bbox=[60.0, 60.0, 30.0, 30.0]) if i == 7 else p for i, p in enumerate(perfect)]
    t = temporal_metrics(ds, {"orig": perfect, "cat": wrong, "tmpl": []}).to_json()
    assert t is not None
    s = t["by_formulation"]
    assert s["orig"]["continuity"] == 1.0 and s["orig"]["hota"] == pytest.approx(1.0)
    assert s["orig"]["flicker_per_100_frames"] == 0.0 and s["orig"]["mota"] == 1.0
    assert s["cat"]["continuity"] == pytest.approx(19 / 20) and s["cat"]["n_flicker"] == 1
    assert s["cat"]["false_positives"] == 1 and s["cat"]["misses"] == 1  # a wrong box: both
    assert s["tmpl"]["continuity"] == 0.0 and s["tmpl"]["mota"] == 0.0
    assert t["temporal_pcr"] == 0.0  # query 1's coref set is all three: tmpl never finds it


def test_an_unconfirmed_detection_is_no_identity() -> None:
    """A track's first frame without a track id (the tracker has not confirmed it), then its
    id: no ID switch, no false positive; the frame is a miss for the identity metrics, and
    found for continuity. A query answered with ids throughout scores the same otherwise."""
    ds = _static_video(10)
    tracked = [dict(p, track_id=5) for p in _gt_predictions(ds)]
    unconfirmed = [p if p["image_id"] != 100 else {k: v for k, v in p.items() if k != "track_id"}
                   for p in tracked]
    t = temporal_metrics(ds, {"orig": unconfirmed, "cat": tracked}).to_json()
    assert t is not None
    s, ref = t["by_formulation"]["orig"], t["by_formulation"]["cat"]
    assert s["identity"] == "track_id" and s["id_switches"] == 0 and s["false_positives"] == 0
    assert s["misses"] == 1 and s["mota"] == pytest.approx(0.9) and s["continuity"] == 1.0
    assert ref["misses"] == 0 and ref["mota"] == 1.0 and ref["id_switches"] == 0
    assert s["hota"] < ref["hota"] == pytest.approx(1.0)  # HOTA leaves it out too: detection lower
    # two ids for one target are still a switch: the rule is about no identity, not any change
    switched = [dict(p, track_id=6) if p["image_id"] >= 105 else p for p in tracked]
    assert temporal_metrics(ds, {"orig": switched}).to_json()["by_formulation"]["orig"]["id_switches"] == 1


def test_flicker_skips_frames_where_the_target_is_not_visible() -> None:
    assert flicker_count("11--11") == 0  # an occlusion is no loss
    assert flicker_count("1-0-1") == 1
    assert flicker_count("0011000") == 0  # losses at the ends are not bounded by finds
    assert flicker_count("1010 01") == 2


def test_temporal_pcr_needs_every_coref_formulation() -> None:
    ds = _static_video(10, change_at=5)  # query 2's coref set: orig, tmpl
    preds = _gt_predictions(ds)
    t = temporal_metrics(ds, {"orig": preds}).to_json()
    assert t is not None and t["temporal_pcr"] is None
    assert "cat, tmpl" in t["temporal_pcr_null_reason"]
    drop_q1 = _gt_predictions(ds, lambda im, a: a.query_id != 1 or im.frame_index < 3)  # q1 found 3 of 5
    t = temporal_metrics(ds, {"orig": preds, "cat": drop_q1, "tmpl": preds}).to_json()
    assert t is not None and t["temporal_pcr"] == 0.5  # q2 kept (cat not in its coref set), q1 below 0.8
    assert t["by_prompt_type"] == {}


def test_prompt_change_latency() -> None:
    ds = _static_video(10, change_at=4)
    preds = _gt_predictions(ds, lambda im, a: a.query_id == 1 or im.frame_index >= 7)
    times = {
        100 + k: {
            "stamp_ns": k * 100_000_000,
            "sent_ns": 5_000 + k * 100_000_000,
            "received_ns": 5_000 + k * 100_000_000 + 40_000_000,
        }
        for k in range(10)
    }
    t = temporal_metrics(ds, {"orig": preds}, {"orig": times}).to_json()
    assert t is not None
    s = t["by_formulation"]["orig"]
    (change,) = s["prompt_change"]
    assert change["query_id"] == 2 and change["found_frame"] == 7 and change["latency_frames"] == 3
    assert change["latency_ms_data"] == pytest.approx(300.0)
    assert change["latency_ms_ros"] == pytest.approx(340.0)  # 3 periods + the answer's own 40 ms
    assert s["prompt_change_latency_frames"] == 3.0 and s["prompt_changes_never_found"] == 0
    never = temporal_metrics(ds, {"orig": _gt_predictions(ds, lambda im, a: a.query_id == 1)}).to_json()
    assert never is not None and never["by_formulation"]["orig"]["prompt_changes_never_found"] == 1


def test_a_plain_dataset_has_no_temporal_metrics(repo_root: Path) -> None:
    assert temporal_metrics(load_dataset(repo_root / "datasets" / "probench-sample"), {"orig": []}) is None


# -- agreement with TrackEval's CLEAR and Identity metrics (the trackers library's port) --------
def _scripted_sample_predictions(ds: Dataset) -> list[dict[str, Any]]:
    """Top-1 answers with what a tracker gets wrong: jitter, misses, the distractor instead
    of the target, new track ids after a loss, and answers while the target is hidden."""
    rng = np.random.default_rng(3)
    out: list[dict[str, Any]] = []
    for vid, video in ds.videos.items():
        scene = sequence_scene(vid - 1, n_frames=len(video))
        for k, iid in enumerate(video.image_ids):
            for q in ds.label_space(iid):
                gt = [a for a in ds.annotations_by_image[iid] if a.query_id == q]
                r = rng.uniform()
                epoch = k // 17  # the tracker renumbers now and then
                if gt and r < 0.75:
                    x, y, w, h = gt[0].bbox
                    j = rng.normal(0, 2.0, 4)
                    box = [x + j[0], y + j[1], max(1.0, w + j[2]), max(1.0, h + j[3])]
                    out.append(
                        {
                            "image_id": iid,
                            "category_id": q,
                            "bbox": box,
                            "score": 0.8,
                            "track_id": 10 * q + epoch,
                        }
                    )
                elif r < 0.88:  # the distractor (same shape as target 0)
                    dx, dy = scene.objects[2].corner(k)
                    s = scene.objects[2].size
                    out.append(
                        {
                            "image_id": iid,
                            "category_id": q,
                            "bbox": [dx, dy, s, s],
                            "score": 0.6,
                            "track_id": 999,
                        }
                    )
                # else: nothing
            # a lower-scoring second box never counts (top-1 only)
            out.append(
                {
                    "image_id": iid,
                    "category_id": ds.label_space(iid)[0],
                    "bbox": [0, 0, 5, 5],
                    "score": 0.01,
                    "track_id": 5,
                }
            )
    return out


def _trackeval_reference(ds: Dataset, preds: list[dict[str, Any]]) -> dict[str, float]:
    from trackers.eval import (
        aggregate_clear_metrics,
        aggregate_identity_metrics,
        box_iou,
        compute_clear_metrics,
        compute_identity_metrics,
    )

    top: dict[tuple[int, int], dict[str, Any]] = {}
    for p in preds:
        key = (p["image_id"], p["category_id"])
        if key not in top or p["score"] > top[key]["score"]:
            top[key] = p
    clear, ident = [], []
    for video in ds.videos.values():
        for q in sorted({q for iid in video.image_ids for q in ds.label_space(iid)}):
            gt_ids, hyp_ids, sims = [], [], []
            for iid in video.image_ids:
                if q not in ds.label_space(iid):
                    continue
                gt = [a for a in ds.annotations_by_image[iid] if a.query_id == q]
                hyp = [top[(iid, q)]] if (iid, q) in top else []
                gt_ids.append(np.array([a.track_id for a in gt], dtype=np.int64))
                hyp_ids.append(np.array([h["track_id"] for h in hyp], dtype=np.int64))
                g = np.array([a.bbox for a in gt], float).reshape(-1, 4)
                h = np.array([x["bbox"] for x in hyp], float).reshape(-1, 4)
                sims.append(
                    box_iou(g, h, box_format="xywh") if len(g) and len(h) else np.zeros((len(g), len(h)))
                )
            clear.append(compute_clear_metrics(gt_ids, hyp_ids, sims, threshold=0.5))
            ident.append(compute_identity_metrics(gt_ids, hyp_ids, sims, threshold=0.5))
    c, i = aggregate_clear_metrics(clear), aggregate_identity_metrics(ident)
    return {
        "mota": c["MOTA"],
        "id_switches": c["IDSW"],
        "misses": c["CLR_FN"],
        "false_positives": c["CLR_FP"],
        "idf1": i["IDF1"],
    }


def test_agrees_with_trackeval_on_the_sample(repo_root: Path) -> None:
    ds = load_dataset(repo_root / "datasets" / "probench-sequences")
    preds = _scripted_sample_predictions(ds)
    t = temporal_metrics(ds, {"orig": preds}).to_json()
    assert t is not None
    s = t["by_formulation"]["orig"]
    ref = _trackeval_reference(ds, preds)
    assert s["identity"] == "track_id"
    assert s["id_switches"] == ref["id_switches"] > 0
    assert s["misses"] == ref["misses"] and s["false_positives"] == ref["false_positives"]
    assert s["mota"] == pytest.approx(ref["mota"], abs=1e-6)
    assert s["idf1"] == pytest.approx(ref["idf1"], abs=1e-6)
    # continuity, counted here from the annotations directly
    visible = found = 0
    top = {}
    for p in preds:
        key = (p["image_id"], p["category_id"])
        if key not in top or p["score"] > top[key]["score"]:
            top[key] = p
    for a in ds.annotations:
        visible += 1
        p = top.get((a.image_id, a.query_id))
        if p is not None:
            from trackers.eval import box_iou

            iou = box_iou(np.array([a.bbox]), np.array([p["bbox"]]), box_format="xywh")[0, 0]
            found += iou >= 0.5
    assert s["n_visible_frames"] == visible and s["continuity"] == pytest.approx(found / visible, abs=1e-6)
