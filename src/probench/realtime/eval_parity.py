"""Parity of the ROS path with the offline path (``probench eval --parity``).

A run replayed through the graph as fast as answered (every frame answered) is compared
with the same detector run offline, in this process, on the same frames as the dataset's
image files decode them. To say where a difference comes from, the detector also runs
offline on the frames as the bag decodes them:

- ROS = offline on the bag's frames, but != offline on the files: the *input* differs.
  The bag's pixels are the files' with the colour channels swapped: ``colour encoding``;
  else ``decode`` (e.g. a JPEG bag against PNG files: lossy compression).
- ROS != offline on the bag's frames: ``detector input`` (the node hands the detector
  something else than offline inference does with the same pixels: preprocessing,
  parameters).

``parity.json`` (docs/EVALUATION.md, "Parity"): the share of boxes that match (same image,
same query, IoU >= 0.99, score within 1e-3), the mAP.5 of each path and their difference,
per formulation too, the pixel comparison and the attributed cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.cache.records import BY_FORMULATION, MAP50
from probench.realtime.eval_plan import FramePlan, plan_formulation

if TYPE_CHECKING:
    from probench.data.dataset import Dataset
    from probench.models.base import Detector

PARITY_FILE = "parity.json"
IOU_MIN = 0.99
SCORE_TOL = 1e-3
CAUSES = ("none", "decode", "colour encoding", "detector input")


def _xyxy(bbox: Sequence[float]) -> np.ndarray:
    x, y, w, h = (float(v) for v in bbox)
    return np.array([x, y, x + w, y + h])


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else float(np.array_equal(a, b))


def match_boxes(a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Greedy one-to-one matching of two result lists (COCO results), highest scores first:
    a pair matches when image and query are the same, IoU >= 0.99 and the scores differ by
    at most 1e-3. ``share``: matched boxes of both sides over all boxes (1.0 when both are
    empty)."""
    groups: dict[tuple[int, int], list[Mapping[str, Any]]] = {}
    for r in b:
        groups.setdefault((int(r["image_id"]), int(r["category_id"])), []).append(r)
    a = list(a)
    n_b = sum(len(v) for v in groups.values())
    matched = 0
    for r in sorted(a, key=lambda r: -float(r["score"])):
        cands = groups.get((int(r["image_id"]), int(r["category_id"])), [])
        box = _xyxy(r["bbox"])
        for k, c in enumerate(cands):
            close = abs(float(c["score"]) - float(r["score"])) <= SCORE_TOL
            if close and _iou(box, _xyxy(c["bbox"])) >= IOU_MIN:
                matched += 1
                del cands[k]
                break
    total = len(a) + n_b
    share = 1.0 if total == 0 else 2 * matched / total
    return {"matched": matched, "n_a": len(a), "n_b": n_b, "share": share}


def offline_results(detector: Detector, frames: Sequence[FramePlan], images: Mapping[int, np.ndarray],
                    max_detections: int | None) -> list[dict[str, Any]]:
    """The detector's COCO results on ``images`` (image id -> RGB), each frame asked its own
    prompt set as the node is, kept to the node's ``max_detections`` (highest scores)."""
    from probench.msgs.wire import top_order
    from probench.vocabulary import detections_to_results

    out: list[dict[str, Any]] = []
    for fp in frames:
        dets = detector.detect(np.ascontiguousarray(images[fp.image_id]), list(fp.texts))
        dets = dets.filter(top_order(dets, max_detections))
        out.extend(dict(r) for r in detections_to_results(dets, fp.image_id, fp.groups))
    return out


def _map50(
    dataset: Dataset, predictions: Mapping[str, list[dict[str, Any]]]
) -> tuple[float | None, dict[str, float | None]]:
    """mAP.5 of orig, and of each formulation."""
    from probench.scoring import score

    m = score(dataset, predictions)
    return m.map50, {f: s.map50 for f, s in m.by_formulation.items()}


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(float(a) - float(b), 6)


def compare_pixels(bag_rgb: Mapping[int, np.ndarray], file_rgb: Mapping[int, np.ndarray]) -> dict[str, Any]:
    """How the bag's frames compare with the files' decode: identical, channel-swapped, or
    different (mean and max absolute difference)."""
    identical = swapped = 0
    diffs: list[float] = []
    for i, a in bag_rgb.items():
        b = file_rgb[i]
        if a.shape == b.shape and np.array_equal(a, b):
            identical += 1
        elif a.shape == b.shape and np.array_equal(a, b[..., ::-1]):
            swapped += 1
        elif a.shape == b.shape:
            diffs.append(float(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()))
        else:
            diffs.append(float("inf"))
    return {"images": len(bag_rgb), "identical": identical, "channels_swapped": swapped,
            "different": len(diffs), "max_abs_diff": max(diffs, default=0.0)}


def attribute(ros_vs_files: float, ros_vs_bag: float, pixels: Mapping[str, Any], bag_format: str,
              file_formats: Sequence[str]) -> tuple[str, str]:
    """``(cause, text)``: where a difference between the paths comes from (module doc)."""
    if ros_vs_files == 1.0:
        return "none", "the ROS path and the offline path agree box for box"
    if ros_vs_bag < 1.0:
        return "detector input", ("the node's detections differ from offline inference on the very pixels "
                                  "the bag decodes to: the detector gets another input (preprocessing, "
                                  "parameters)")
    if pixels["channels_swapped"] and not pixels["different"]:
        return "colour encoding", "the bag's frames are the files' with the colour channels swapped (RGB/BGR)"
    files = "/".join(sorted(set(file_formats)))
    return "decode", (f"the bag's frames ({bag_format}) decode to other pixels than the dataset's {files} "
                      "files "
                      f"({pixels['different']} of {pixels['images']} images differ, up to "
                      f"{pixels['max_abs_diff']:g} levels); offline inference on the bag's pixels agrees "
                      "with ROS")


def parity_check(run_dir: str | Path, bag_path: str | Path, dataset_path: str | Path,
                 grounding: Mapping[str, Any]) -> dict[str, Any]:
    """Compare the run at ``run_dir`` (predictions of the ROS path) with offline inference
    (module doc); writes ``parity.json`` into the run folder and returns it. ``grounding``:
    the node's model settings (run.json's model, device, precision, ...)."""
    from probench.bags.reader import ProbenchBag
    from probench.cache.atomic import write_json_atomic
    from probench.cache.run import RunDir
    from probench.data.dataset import load_dataset
    from probench.errors import CheckFailed
    from probench.models.zoo import load_detector

    run = RunDir(run_dir)
    dataset = load_dataset(dataset_path)
    with ProbenchBag(bag_path) as bag:
        if bag.dataset_hash != dataset.content_hash:
            raise CheckFailed(f"{dataset_path}: not the dataset the bag was made from (content hash "
                              f"{dataset.content_hash} != {bag.dataset_hash})")
        infos = bag.frame_infos()
        bag_rgb = {f.image_id: f.rgb() for f in bag.frames()}
        bag_format = "JPEG/PNG (CompressedImage)" if bag.compressed else "raw rgb8 (Image)"
    file_rgb = {i: dataset.read_image(i) for i in bag_rgb}
    file_formats = [dataset.image_path(i).suffix.lstrip(".").upper() for i in bag_rgb]
    detector = load_detector(str(grounding["model"]), device=str(grounding.get("device") or "cpu"),
                             precision=str(grounding.get("precision") or "fp32"),
                             score_threshold=float(grounding.get("score_threshold") or 0.0),
                             weights=str(grounding.get("weights") or "") or None,
                             preprocess=str(grounding.get("preprocess") or "device"))
    max_det = grounding.get("max_detections")
    ros: dict[str, list[dict[str, Any]]] = {}
    off_files: dict[str, list[dict[str, Any]]] = {}
    off_bag: dict[str, list[dict[str, Any]]] = {}
    for f in run.formulations():  # whatever the run holds, in its order
        frames = plan_formulation(infos, f).frames
        ros[f] = list(run.read_json(f"predictions/{f}.json"))
        off_files[f] = offline_results(detector, frames, file_rgb, max_det)
        off_bag[f] = offline_results(detector, frames, bag_rgb, max_det)
    everything = [r for v in ros.values() for r in v]
    vs_files = match_boxes(everything, [r for v in off_files.values() for r in v])
    vs_bag = match_boxes(everything, [r for v in off_bag.values() for r in v])
    pixels = compare_pixels(bag_rgb, file_rgb)
    cause, why = attribute(vs_files["share"], vs_bag["share"], pixels, bag_format, file_formats)
    (m_ros, by_ros), (m_off, by_off) = _map50(dataset, ros), _map50(dataset, off_files)
    out = {
        "criteria": {"iou_min": IOU_MIN, "score_tolerance": SCORE_TOL, "same": "image and query"},
        "match_share": round(vs_files["share"], 6),
        "boxes": {"ros": vs_files["n_a"], "offline": vs_files["n_b"], "matched": vs_files["matched"]},
        "match_share_with_bag_pixels": round(vs_bag["share"], 6),
        MAP50: {"ros": m_ros, "offline": m_off, "difference": _diff(m_ros, m_off)},
        BY_FORMULATION: {f: {"match_share": round(match_boxes(ros[f], off_files[f])["share"], 6),
                             "map50_ros": by_ros.get(f), "map50_offline": by_off.get(f),
                             "difference": _diff(by_ros.get(f), by_off.get(f))} for f in ros},
        "pixels": {**pixels, "bag_format": bag_format, "file_formats": sorted(set(file_formats))},
        "agree_exactly": vs_files["share"] == 1.0,
        "cause": cause,
        "cause_text": why,
        "model": dict(grounding),
    }
    write_json_atomic(run.path / PARITY_FILE, out)
    return out


def parity_lines(p: Mapping[str, Any]) -> list[str]:
    """``parity.json`` as printed."""
    m = p.get(MAP50) or {}
    b = p.get("boxes") or {}
    return [f"parity with the offline path: {100 * float(p['match_share']):.1f}% of boxes match "
            f"({b.get('matched')} pairs; ROS {b.get('ros')} boxes, offline {b.get('offline')}); mAP.5 ROS "
            f"{m.get('ros')} offline {m.get('offline')} (difference {m.get('difference')})",
            f"cause: {p.get('cause')}: {p.get('cause_text')}"]
