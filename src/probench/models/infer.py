"""Offline inference into the prediction cache (``probench infer``, CONTRACTS.md §2).

For each formulation and each image (in image-id order) the detector gets the prompts of
the image's label space (``Dataset.prompts_for``); identical prompt texts of different
queries are asked once and the boxes credited to each query (DESIGN.md, evaluation
protocol). Results go through :class:`probench.cache.run.PredictionWriter`: one fsynced
log line per finished image, then an atomic ``<formulation>.json``. So a killed run,
rerun with the same command, skips the images it already logged and ends with the same
bytes as an uninterrupted run (given a deterministic model).

``run.json`` is written atomically at the start (``status: "running"``) and updated at the
end (``"complete"``; ``"incomplete"`` when an earlier session asked for formulations this
one did not finish; ``"interrupted"``/``"failed"`` with the error). Resuming into a run
folder whose ``run.json`` names a different model, dataset, device, precision or settings
is refused (:class:`RunMismatchError`) unless ``overwrite=True``, which first removes the
run's probench files.

This module also holds the run-description helpers ``probench latency`` shares
(:func:`model_info`, :func:`library_versions`, :func:`check_compatible`).
"""

from __future__ import annotations

import platform
import shutil
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from probench import __version__
from probench.cache.run import RunDir
from probench.data.dataset import FORMULATIONS, Dataset
from probench.detections import Detections
from probench.errors import ProbenchError, UsageError
from probench.models.errors import InferenceError, RunMismatchError

# Libraries whose versions can change predictions; looked up without importing them.
_VERSIONED = (
    "torch", "torchvision", "transformers", "ultralytics", "timm", "numpy",
    "opencv-python-headless", "opencv-python", "onnxruntime", "onnxruntime-gpu", "tensorrt",
)
# What makes two runs the same experiment: resuming across a difference is refused.
_IDENTITY_KEYS: tuple[tuple[str, ...], ...] = (
    ("source",),
    ("model", "name"),
    ("model", "checkpoint"),
    ("model", "random_weights"),
    ("model", "weights_source"),
    ("model", "runtime"),
    ("dataset", "hash"),
    ("device",),
    ("precision",),
    ("settings",),
)
# Files a probench producer owns in a run folder; ``overwrite`` removes only these.
_RUN_FILES = ("run.json", "latency.json", "metrics.json", "realtime.json")


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def library_versions() -> dict[str, str]:
    """Python, probench and every installed library that can change predictions."""
    out = {"python": platform.python_version(), "probench": __version__}
    for dist in _VERSIONED:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def model_info(
    name: str,
    detector: object | None = None,
    *,
    random_weights: bool = False,
    weights: str | None = None,
) -> dict[str, Any]:
    """run.json's ``model`` record: the detector's ``model_info`` (set by ``load_detector``),
    else built from the zoo spec (or the detector's own ``spec``).

    Scripted ``test-*`` detectors have no spec: they are recorded as backend "scripted".
    Without a detector (an early resume check before the model loads) the fields only
    the detector knows are left out and :func:`check_compatible` skips them.
    """
    from probench.models.zoo import ZOO

    given = getattr(detector, "model_info", None)
    if isinstance(given, dict) and given:
        return dict(given)  # load_detector's own record (DESIGN.md): the authority
    spec = getattr(detector, "spec", None) or ZOO.get(name)
    info: dict[str, Any] = {"name": name}
    if spec is not None:
        info.update(
            paper_name=spec.paper_name, family=spec.family, backend=spec.backend, checkpoint=spec.checkpoint
        )
    else:
        info.update(paper_name=name, family="scripted", backend="scripted", checkpoint="")
    if detector is None:
        return info
    info["checkpoint"] = str(getattr(detector, "checkpoint", None) or info["checkpoint"])
    info["random_weights"] = bool(getattr(detector, "random_weights", random_weights))
    source = getattr(detector, "weights_source", None)
    if source is None:
        if weights:
            source = str(Path(weights).resolve())
        elif info["random_weights"]:
            source = "random"
        else:
            source = info["checkpoint"] or info["backend"]
    info["weights_source"] = str(source)
    return info


def _get(d: dict, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return _MISSING
        d = d[key]
    return d


_MISSING = object()


def check_compatible(existing: dict, new: dict, run_path: Path | str) -> None:
    """Raise :class:`RunMismatchError` naming the first field where a run folder's
    ``run.json`` (or latency.json, at ``run_path``) and the run about to start disagree
    (fields absent on either side are not compared)."""
    for path in _IDENTITY_KEYS:
        old, cur = _get(existing, path), _get(new, path)
        if old is _MISSING or cur is _MISSING or old == cur:
            continue
        raise RunMismatchError(
            f"{run_path} has {'.'.join(path)}={old!r} but this run has {cur!r}; "
            "use another --out folder or pass --overwrite to replace it"
        )


def clear_run(run_dir: RunDir) -> None:
    """Remove the probench files of a run folder (not anything else a user keeps there)."""
    for name in _RUN_FILES:
        (run_dir.path / name).unlink(missing_ok=True)
    if run_dir.predictions_dir.is_dir():
        shutil.rmtree(run_dir.predictions_dir)


def unique_prompts(query_ids: Sequence[int], prompts: Sequence[str]) -> tuple[list[str], list[list[int]]]:
    """Identical prompt texts (after the detector's own stripping) asked once:
    the distinct prompts in first-seen order and, per prompt, the query ids it answers."""
    index: dict[str, int] = {}
    texts: list[str] = []
    groups: list[list[int]] = []
    for qid, text in zip(query_ids, prompts, strict=True):
        key = text.strip()
        if key not in index:
            index[key] = len(texts)
            texts.append(key)
            groups.append([])
        groups[index[key]].append(int(qid))
    return texts, groups


def detections_to_results(dets: Detections, image_id: int, groups: list[list[int]]) -> list[dict]:
    """COCO results of one image; a box answering a shared prompt is credited to each query."""
    if len(dets) and int(dets.prompt_index.max()) >= len(groups):
        raise InferenceError(
            f"image {image_id}: detector returned prompt index {int(dets.prompt_index.max())} "
            f"for {len(groups)} prompts"
        )
    out = []
    for rec in dets.to_coco(image_id, list(range(len(groups)))):
        for qid in groups[rec["category_id"]]:
            out.append({**rec, "category_id": qid})
    return out


def select_images(dataset: Dataset, limit: int | None = None) -> list[int]:
    """The evaluated images: every image in id order, or the first ``limit`` of them."""
    ids = sorted(dataset.images)
    if limit is not None:
        if limit < 1:
            raise UsageError(f"--limit must be >= 1, got {limit}")
        ids = ids[:limit]
    return ids


def check_formulations(formulations: Sequence[str]) -> list[str]:
    """Validate and put formulations in canonical order (orig, cat, tmpl), no repeats."""
    bad = [f for f in formulations if f not in FORMULATIONS]
    if bad:
        names = ", ".join(map(repr, bad))
        raise UsageError(f"unknown formulation(s) {names}; expected some of {FORMULATIONS}")
    if not formulations:
        raise UsageError("no formulations given")
    return [f for f in FORMULATIONS if f in formulations]


def dataset_info(dataset: Dataset) -> dict[str, Any]:
    return {
        "path": str(dataset.root.resolve()) if dataset.root is not None else None,
        "hash": dataset.content_hash,
        "n_images": len(dataset.images),
        "n_queries": len(dataset.queries),
    }


def run_inference(
    detector: object,
    dataset: Dataset,
    run_dir: RunDir | str | Path,
    formulations: Sequence[str] = FORMULATIONS,
    progress: bool = True,
    *,
    model: dict[str, Any] | None = None,
    device: str | None = None,
    precision: str = "fp32",
    settings: dict[str, Any] | None = None,
    limit: int | None = None,
    overwrite: bool = False,
    model_load_s: float | None = None,
    prefetch: bool = True,
) -> dict[str, Any]:
    """Fill ``run_dir`` with the predictions of ``detector`` on ``dataset``; returns run.json.

    ``model`` defaults to :func:`model_info` of the detector's name; ``settings`` are
    recorded (with ``limit``) and must match on resume. ``prefetch`` decodes the next image
    in a thread while the model runs (results are the same either way).
    """
    run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    formulations = check_formulations(formulations)
    image_ids = select_images(dataset, limit)
    name = str(getattr(detector, "name", "unknown"))
    info: dict[str, Any] = {
        "probench_version": __version__,
        "created": utc_now(),
        "source": "offline",
        "status": "running",
        "model": model or model_info(name, detector),
        "device": device or str(getattr(detector, "device", "cpu")),
        "precision": precision,
        "dataset": dataset_info(dataset),
        "formulations": formulations,
        "settings": {
            "score_threshold": float(getattr(detector, "score_threshold", 0.0)),
            "limit": limit,
            "n_images_evaluated": len(image_ids),
            "identical_prompts": "asked once, credited to each query",
            **(settings or {}),
        },
        "versions": library_versions(),
        "timings": {"infer_s": 0.0, "by_formulation_s": {}},
    }
    existing = run_dir.info if run_dir.exists() else {}
    if overwrite:
        clear_run(run_dir)
        existing = {}
    elif existing:
        check_compatible(existing, info, run_dir.path / "run.json")
    elif run_dir.predictions_dir.is_dir() and any(run_dir.predictions_dir.iterdir()):
        raise RunMismatchError(
            f"{run_dir.path}: holds predictions but no run.json; pass --overwrite to replace them"
        )
    if not overwrite:
        latency = run_dir.read_json("latency.json", default=None)  # `probench latency` came first
        if latency:
            check_compatible(latency, info, run_dir.path / "latency.json")
    if existing:
        # A resumed run keeps its creation time and accumulates time spent.
        info["created"] = existing.get("created", info["created"])
        old_t = existing.get("timings") or {}
        info["timings"]["infer_s"] = float(old_t.get("infer_s", 0.0))
        info["timings"]["by_formulation_s"] = dict(old_t.get("by_formulation_s") or {})
        info["formulations"] = [
            f for f in FORMULATIONS if f in formulations or f in (existing.get("formulations") or [])
        ]
        info["resumed"] = int(existing.get("resumed", 0)) + 1
    if model_load_s is not None:
        info["timings"]["model_load_s"] = round(model_load_s, 3)
    run_dir.create()
    run_dir.write_info(info)

    t_start = time.perf_counter()
    try:
        _infer_all(detector, dataset, run_dir, formulations, image_ids, info, progress, prefetch)
    except BaseException as exc:
        info["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        info["error"] = str(exc) or type(exc).__name__
        info["timings"]["infer_s"] = round(info["timings"]["infer_s"] + time.perf_counter() - t_start, 3)
        run_dir.write_info(info)
        raise
    # "complete" only when every formulation this run folder was asked for is done
    # (an earlier session may have asked for more than this one did).
    missing = [f for f in info["formulations"] if not (run_dir.predictions_dir / f"{f}.json").exists()]
    info["status"] = "incomplete" if missing else "complete"
    info.pop("error", None)
    info.pop("incomplete_formulations", None)
    if missing:
        info["incomplete_formulations"] = missing
    info["timings"]["infer_s"] = round(info["timings"]["infer_s"] + time.perf_counter() - t_start, 3)
    info["finished"] = utc_now()
    run_dir.write_info(info)
    return info


def _infer_all(
    detector: object,
    dataset: Dataset,
    run_dir: RunDir,
    formulations: list[str],
    image_ids: list[int],
    info: dict[str, Any],
    progress: bool,
    prefetch: bool = True,
) -> None:
    from tqdm import tqdm

    writers = {}
    for f in formulations:
        if not (run_dir.predictions_dir / f"{f}.json").exists():
            writers[f] = run_dir.writer(f)
    total = len(writers) * len(image_ids)
    done = sum(len(w.done_images & set(image_ids)) for w in writers.values())
    try:
        with tqdm(
            total=total, initial=done, desc=f"infer {info['model']['name']}", unit="img",
            disable=not progress, dynamic_ncols=True,
        ) as bar:
            for f, writer in writers.items():
                t0 = time.perf_counter()
                bar.set_postfix_str(f)
                todo = [i for i in image_ids if i not in writer.done_images]
                asked = [i for i in todo if dataset.label_space(i)]
                images = _decoded(dataset, asked, prefetch)
                for image_id in todo:
                    results = []
                    if dataset.label_space(image_id):  # else nothing is asked, nothing predicted
                        got_id, image = next(images)
                        results = _infer_image(detector, dataset, image_id, got_id, image, f)
                    writer.add_image(image_id, results)
                    bar.update(1)
                images.close()
                writer.finalize()
                spent = info["timings"]["by_formulation_s"].get(f, 0.0) + time.perf_counter() - t0
                info["timings"]["by_formulation_s"][f] = round(spent, 3)
                run_dir.write_info(info)  # progress visible to anyone reading run.json
    finally:
        for w in writers.values():
            w.close()


def _decoded(dataset: Dataset, image_ids: list[int], prefetch: bool) -> Iterator[tuple[int, np.ndarray]]:
    """The images decoded in order; with ``prefetch`` the next one is decoded in a thread
    while the model works on the current one (cv2 releases the GIL while decoding).
    A decode error surfaces at its image's turn, naming the file: the run stops there."""
    if not prefetch:
        for image_id in image_ids:
            yield image_id, dataset.read_image(image_id)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="probench-decode") as pool:
        pending = pool.submit(dataset.read_image, image_ids[0]) if image_ids else None
        for k, image_id in enumerate(image_ids):
            image = pending.result()
            pending = pool.submit(dataset.read_image, image_ids[k + 1]) if k + 1 < len(image_ids) else None
            yield image_id, image


def _infer_image(
    detector: object, dataset: Dataset, image_id: int, got_id: int, image: np.ndarray, formulation: str
) -> list[dict]:
    if got_id != image_id:  # the decode queue and the loop must walk the same ids
        raise InferenceError(f"internal: decoded image {got_id} where {image_id} was due")
    query_ids, prompts = dataset.prompts_for(image_id, formulation)
    texts, groups = unique_prompts(query_ids, prompts)
    try:
        dets = detector.detect(image, texts)
    except ProbenchError:
        raise
    except Exception as exc:  # any backend failure, reported with its context
        raise InferenceError(
            f"{getattr(detector, 'name', 'model')} failed on image {image_id} "
            f"({dataset.images[image_id].file_name}, {formulation}): {type(exc).__name__}: {exc}"
        ) from exc
    return detections_to_results(dets, image_id, groups)
