"""The paper's Fig. 6 (qualitative grounding) and a failure gallery per run, drawn from the
runs' predictions on the dataset's images.

Fig. 6: rows are scenes, columns runs. A cell is the scene with the ground-truth box of
each target query (dashed) and, per target prompt, the run's top-confidence prediction for
it under one formulation (orig by default), labelled with the prompt text and its score.
Scenes are chosen deterministically: for each domain, then each prompt type not covered
yet, the image of lowest id that has a target of it (``scenes`` overrides).

The failure gallery: per run, the (image, query) pairs whose top-confidence prediction
fails, in four kinds, each most confident first, as crops around the target and the
prediction: *missed* (no prediction for the query there), *mislocalised* (IoU < 0.5 with
every target of the query, and not on another query's target), *wrong target*
(IoU >= 0.5 with a target of another query of the image, not with its own) and, for runs
replayed through ROS 2, *dropped* (the node never answered the frame: no prediction, but
not the model's miss). Fig. 6 says "frame dropped" for those, "no prediction" for a model
that found nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.data.dataset import Dataset
from probench.report.errors import ReportUsageError
from probench.report.figures import Plot, _figure
from probench.report.layout import wrap_title
from probench.report.load import Entry
from probench.vocabulary import PROMPT_TYPES

if TYPE_CHECKING:
    from matplotlib.axes import Axes

FAILURE_KINDS: tuple[str, ...] = ("missed", "mislocalised", "wrong target", "dropped")
PER_KIND = 4  # gallery examples per kind
MAX_PROMPTS = 4  # target prompts drawn per Fig. 6 cell
_COLOURS = ("tab:red", "tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:pink")


@dataclass
class Top:
    """A run's top-confidence prediction for one (image, query), or None."""

    box: tuple[float, float, float, float]  # xywh
    score: float


def top_predictions(entry: Entry, formulation: str) -> dict[tuple[int, int], Top]:
    """(image_id, query_id) -> the highest-scoring prediction of the run's ``formulation``
    (the first in the file on a tie); {} when the run has no such predictions file."""
    from probench.cache.run import RunDir

    if entry.path is None:
        return {}
    run = RunDir(entry.path)
    if formulation not in run.formulations():
        return {}
    out: dict[tuple[int, int], Top] = {}
    for r in run.predictions(formulation):
        try:
            key = (int(r["image_id"]), int(r["category_id"]))
            score = float(r["score"])
            box = tuple(float(v) for v in r["bbox"])
        except (KeyError, TypeError, ValueError):
            continue  # malformed: scoring names it
        if len(box) == 4 and (key not in out or score > out[key].score):
            out[key] = Top((box[0], box[1], box[2], box[3]), score)
    return out


def choose_scenes(dataset: Dataset, scenes: Sequence[int] | None = None) -> list[int]:
    """The Fig. 6 scenes: ``scenes`` (checked), else one image per domain, then one per prompt
    type not covered yet, each the lowest image id with a target of it."""
    if scenes:
        unknown = [s for s in scenes if s not in dataset.images]
        if unknown:
            raise ReportUsageError(
                f"--scenes: image id(s) {', '.join(map(str, unknown))} are not in the dataset"
            )
        return list(dict.fromkeys(scenes))
    by_image: dict[int, set[int]] = {}
    for a in dataset.annotations:
        if not a.iscrowd:
            by_image.setdefault(a.image_id, set()).add(a.query_id)
    chosen: list[int] = []
    domains = sorted({dataset.images[i].domain for i in by_image})
    for d in domains:
        first = next((i for i in sorted(by_image) if dataset.images[i].domain == d), None)
        if first is not None and first not in chosen:
            chosen.append(first)
    types_of = {q.id: q.prompt_types for q in dataset.queries.values()}
    covered = {t for i in chosen for q in by_image[i] for t in types_of[q]}
    types = [t for t in PROMPT_TYPES if any(t in q.prompt_types for q in dataset.queries.values())]
    for t in types:
        if t in covered:
            continue
        has_t = [i for i in sorted(by_image) if any(t in types_of[q] for q in by_image[i])]
        first = has_t[0] if has_t else None
        if first is not None and first not in chosen:
            chosen.append(first)
            covered |= {t2 for q in by_image[first] for t2 in dataset.queries[q].prompt_types}
    return chosen


def missing_images(dataset: Dataset, image_ids: Sequence[int]) -> list[Path]:
    """The image files of ``image_ids`` that are not on disk."""
    if dataset.root is None:
        return [Path(dataset.images[i].file_name) for i in image_ids]
    return [p for i in image_ids if not (p := dataset.image_path(i)).is_file()]


def _show(ax: Axes, dataset: Dataset, image_id: int) -> np.ndarray:
    from probench.data.images import read_rgb

    img = read_rgb(dataset.image_path(image_id))
    ax.imshow(img)
    ax.set_xticks([])
    ax.set_yticks([])
    return img


def _box(
    ax: Axes, box: Sequence[float], colour: str, *, dashed: bool = False, gid: str | None = None
) -> None:
    from matplotlib.patches import Rectangle

    x, y, w, h = box
    ax.add_patch(Rectangle((x, y), w, h, fill=False, ec=colour, lw=1.6 if not dashed else 1.2,
                           ls="--" if dashed else "-", gid=gid))  # fmt: skip


def fig_qualitative(
    entries: list[Entry], dataset: Dataset, formulation: str = "orig", scenes: Sequence[int] | None = None
) -> Plot:
    """Fig. 6 over the runs (not the published rows) that have ``formulation``'s predictions."""
    runs = [e for e in entries if not e.reference]
    tops = {e.label: top_predictions(e, formulation) for e in runs}
    notes = [
        f"{e.label}: left out of Fig. 6 (no predictions/{formulation}.json)"
        for e in runs
        if not tops[e.label]
    ]
    runs = [e for e in runs if tops[e.label]]
    chosen = choose_scenes(dataset, scenes)
    if not runs or not chosen:
        return Plot(None, notes)
    targets = {i: sorted({a.query_id for a in dataset.annotations if a.image_id == i and not a.iscrowd})
               for i in chosen}  # fmt: skip
    fig_width = 3.2 * len(runs) + 0.3
    fig = _figure(fig_width, 2.9 * len(chosen) + 0.5)
    axes = fig.subplots(len(chosen), len(runs), squeeze=False)
    dropped = {e.label: e.dropped_images(formulation) for e in runs}
    for r, image_id in enumerate(chosen):
        queries = targets[image_id][:MAX_PROMPTS]
        for c, e in enumerate(runs):
            ax = axes[r][c]
            _show(ax, dataset, image_id)
            for k, q in enumerate(queries):
                colour = _COLOURS[k % len(_COLOURS)]
                for a in dataset.annotations_by_image.get(image_id, []):
                    if a.query_id == q and not a.iscrowd:
                        _box(ax, a.bbox, colour, dashed=True, gid=f"gt:{image_id}:{q}")
                top = tops[e.label].get((image_id, q))
                prompt = dataset.queries[q].prompts.get(formulation, dataset.queries[q].name)
                # the box carries its number; the prompt text is written out under the image, one
                # line per prompt in its colour, so that no label covers another or the scene
                if top is not None:
                    _box(ax, top.box, colour, gid=f"pred:{e.label}:{image_id}:{q}")
                    ax.text(top.box[0], top.box[1], str(k + 1), fontsize=7, color="white", va="bottom",
                            fontweight="bold", gid=f"tag:{e.label}:{image_id}:{q}",
                            bbox={"fc": colour, "ec": "none", "alpha": 0.9, "pad": 0.8})  # fmt: skip
                said = (f"{prompt} {top.score:.2f}" if top is not None
                        else f"{prompt}: frame dropped (never answered)" if image_id in dropped[e.label]
                        else f"{prompt}: no prediction")  # fmt: skip
                ax.text(0.0, -0.03 - 0.085 * k, f"{k + 1}  {said}", transform=ax.transAxes,
                        fontsize=6.5, color=colour, va="top", ha="left",
                        gid=f"prompt:{e.label}:{image_id}:{q}")  # fmt: skip
            ax.set_xlabel("\n" * len(queries), fontsize=8.5)  # reserves the caption lines' room in the layout
            if r == 0:
                ax.set_title(e.label, fontsize=8)
            if c == 0:
                ax.set_ylabel(f"image {image_id} ({dataset.images[image_id].domain or '?'})", fontsize=7)
    fig.suptitle(wrap_title(  # wrapped to the canvas: with one run it once lost both its ends
        f"Fig. 6 - top-confidence prediction per target prompt ({formulation}); dashed: ground truth",
        fig_width - 0.2, 9), fontsize=9)
    return Plot(fig, notes)


def failures(entry: Entry, dataset: Dataset, formulation: str = "orig") -> dict[str, list[dict[str, Any]]]:
    """The run's failing (image, query) pairs by kind (:data:`FAILURE_KINDS`), most confident
    first (missed: by image then query id)."""
    from probench.scoring.match import box_iou_edges

    tops = top_predictions(entry, formulation)
    dropped = entry.dropped_images(formulation)
    gt: dict[tuple[int, int], list[tuple[float, float, float, float]]] = {}
    for a in dataset.annotations:
        if not a.iscrowd:
            gt.setdefault((a.image_id, a.query_id), []).append(a.bbox)
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in FAILURE_KINDS}
    for (image_id, q), boxes in sorted(gt.items()):
        top = tops.get((image_id, q))
        if top is None:
            out["dropped" if image_id in dropped else "missed"].append(
                {"image_id": image_id, "query_id": q, "gt": boxes[0], "score": None, "box": None}
            )
            continue
        own = _best_iou(box_iou_edges, top.box, boxes)
        if own >= 0.5:
            continue
        others = [(oq, b) for (i, oq), bs in gt.items() if i == image_id and oq != q for b in bs]
        wrong = [(oq, b) for oq, b in others if _best_iou(box_iou_edges, top.box, [b]) >= 0.5]
        kind = "wrong target" if wrong else "mislocalised"
        rec = {"image_id": image_id, "query_id": q, "gt": boxes[0], "score": top.score, "box": top.box}
        out[kind].append({**rec, "iou": own, "taken": wrong[0][0] if wrong else None})
    for kind in ("mislocalised", "wrong target"):
        out[kind].sort(key=lambda f: (-f["score"], f["image_id"], f["query_id"]))
    return out


def _best_iou(iou_fn: Callable[[np.ndarray, np.ndarray], np.ndarray], box: Sequence[float],
              boxes: Sequence[Sequence[float]]) -> float:
    d = np.array([box] * len(boxes), dtype=np.float64).reshape(-1, 4)
    return float(iou_fn(d, np.array(boxes, dtype=np.float64).reshape(-1, 4)).max()) if len(boxes) else 0.0


def fig_failures(entry: Entry, dataset: Dataset, formulation: str = "orig") -> Plot:
    """One run's failure gallery: a row per kind, up to :data:`PER_KIND` crops each."""
    found = failures(entry, dataset, formulation)
    kinds = [k for k in FAILURE_KINDS if found[k]]
    if not kinds:
        return Plot(None, [f"{entry.label}: no failure of the top-confidence predictions ({formulation})"])
    fig_width = 2.3 * PER_KIND + 0.4
    fig = _figure(fig_width, 2.4 * len(kinds) + 0.5)
    axes = fig.subplots(len(kinds), PER_KIND, squeeze=False)
    for r, kind in enumerate(kinds):
        for c in range(PER_KIND):
            ax = axes[r][c]
            if c >= len(found[kind]):
                ax.set_visible(False)
                continue
            f = found[kind][c]
            img = _show(ax, dataset, f["image_id"])
            boxes = [f["gt"]] + ([f["box"]] if f["box"] is not None else [])
            x0 = min(b[0] for b in boxes)
            y0 = min(b[1] for b in boxes)
            x1 = max(b[0] + b[2] for b in boxes)
            y1 = max(b[1] + b[3] for b in boxes)
            pad = 0.25 * max(x1 - x0, y1 - y0, 16.0)
            h, w = img.shape[:2]
            ax.set_xlim(max(0.0, x0 - pad), min(float(w), x1 + pad))
            ax.set_ylim(min(float(h), y1 + pad), max(0.0, y0 - pad))  # image rows grow downwards
            _box(ax, f["gt"], "tab:green", dashed=True, gid=f"gt:{kind}:{c}")
            if f["box"] is not None:
                _box(ax, f["box"], "tab:red", gid=f"pred:{kind}:{c}")
            prompt = dataset.queries[f["query_id"]].prompts.get(formulation, "")
            detail = "" if f["score"] is None else f" {f['score']:.2f}"
            if kind == "mislocalised":
                detail += f", IoU {f['iou']:.2f}"
            if kind == "wrong target":
                detail += f", on '{dataset.queries[f['taken']].name}'"
            ax.set_title(wrap_title(f"{prompt}{detail}", 2.2, 6.5), fontsize=6.5)  # wrapped: never meet
            if c == 0:
                ax.set_ylabel(f"{kind} ({len(found[kind])})", fontsize=8)
    fig.suptitle(wrap_title(f"{entry.label}: failures of the top-confidence prediction ({formulation}); "
                            "dashed green: target, red: prediction", fig_width - 0.2, 8), fontsize=8)
    return Plot(fig, [])


def dataset_for_figures(
    entries: list[Entry], dataset: str | Path | None
) -> tuple[Dataset | None, str | None]:
    """The dataset whose images Fig. 6 and the galleries draw on: ``dataset`` (--dataset), else
    the folder the runs' run.json records, while it exists and its annotations still have the
    runs' hash (:func:`probench.report.load.recorded_dataset`; for a bag run, the folder the bag
    was made from). (None, why) when there is none."""
    from probench.data import load_dataset
    from probench.errors import ProbenchError
    from probench.report.load import recorded_dataset

    runs = [e for e in entries if not e.reference]
    if dataset is None:
        found, why = recorded_dataset([(e.label, e.info) for e in runs])
        if found is None:
            return None, (f"Fig. 6 and the failure galleries need the dataset's images: {why}; pass "
                          "--dataset D, the dataset folder with its images (for a bag run, the one the bag "
                          "was made from)")
        return found, None
    try:
        ds = load_dataset(dataset, check_files=False)
    except ProbenchError as exc:
        return None, f"Fig. 6 and the failure galleries need the dataset's images: {str(exc).splitlines()[0]}"
    return ds, None
