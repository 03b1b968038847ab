"""Offline inference into the prediction cache (``probench infer``; docs/FORMATS.md, "Run folders").

For each formulation and each image (in image-id order) the detector gets the prompts of
the image's label space (``Dataset.prompts_for``); identical prompt texts of different
queries are asked once and the boxes credited to each query (DESIGN.md, evaluation
protocol). Results go through :class:`probench.cache.run.PredictionWriter`: one log line per
finished image, then an atomic ``<formulation>.json``. So a killed run, rerun with the same
command, skips the images it already logged and ends with the same bytes as an
uninterrupted run (given a deterministic model).

The run folder's identity and status (``run.json``) are kept by
:mod:`probench.cache.identity`, the same module the latency protocol, the ROS evaluator
and the Ray driver use.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from probench.cache.crash import crash_point
from probench.cache.identity import RunIdentity, RunSession, open_run
from probench.cache.records import RunRecord
from probench.cache.run import RunDir
from probench.data.dataset import Dataset
from probench.data.negatives import NEGATIVES_SETTING, Negatives, with_negatives
from probench.detections import Detections
from probench.errors import ProbenchError, UsageError
from probench.models.base import Detector
from probench.models.errors import InferenceError
from probench.models.progress import bar_disabled
from probench.vocabulary import (
    FORMULATIONS,
    POLICY_FORMULATION,
    CocoResult,
    detections_to_results,
    parse_formulations,
    unique_prompts,
)


class PromptPlanLike(Protocol):
    """What a prompt policy's plan does for one prompt set (:class:`probench.prompting.policy.PromptPlan`)."""

    def detect(self, detector: Detector, image: np.ndarray) -> Detections: ...


class PromptPolicyLike(Protocol):
    """A prompt policy (:class:`probench.prompting.policy.PromptPolicy`; the models room does
    not import the prompting room, which sits above it): the ``policy`` formulation gives
    each image's orig prompts through it."""

    def plan(self, prompts: Sequence[str]) -> PromptPlanLike: ...

    def record(self) -> dict[str, Any]: ...


def offline_identity(
    model: Mapping[str, object], dataset: Dataset, *, device: str, precision: str,
    score_threshold: float = 0.0, limit: int | None = None,
    prompt_policy: Mapping[str, object] | None = None, negatives: Negatives | None = None,
) -> RunIdentity:
    """The identity of an offline inference run (``probench infer``, single process or Ray);
    ``prompt_policy``: the policy's record when the run has the ``policy`` formulation;
    ``negatives``: the absent queries added to the label spaces (data/negatives.py)."""
    settings: dict[str, Any] = {
        "score_threshold": float(score_threshold),
        "limit": limit,
        "identical_prompts": "asked once, credited to each query",
    }
    if prompt_policy is not None:
        settings["prompt_policy"] = dict(prompt_policy)
    if negatives is not None:  # only then: a run without is byte for byte what it was
        settings[NEGATIVES_SETTING] = negatives.record()
    return RunIdentity(
        source="offline", model=model, dataset=dataset.summary(), device=device, precision=precision,
        settings=settings,
    )


def run_formulations(formulations: str | Sequence[str], policy: PromptPolicyLike | None) -> list[str]:
    """The run's formulations: the paper's asked for, then ``policy`` when a policy is given
    (which may then be the only one)."""
    items = [f.strip() for f in (formulations.split(",") if isinstance(formulations, str) else formulations)]
    paper = [f for f in items if f and f != POLICY_FORMULATION]
    if policy is None:
        if POLICY_FORMULATION in items:
            raise UsageError("the policy formulation needs a prompt policy (--prompt-policy)")
        return parse_formulations(paper)
    return [*(parse_formulations(paper) if paper else []), POLICY_FORMULATION]


def select_images(dataset: Dataset, limit: int | None = None) -> list[int]:
    """The evaluated images: every image in id order, or the first ``limit`` of them."""
    ids = sorted(dataset.images)
    if limit is not None:
        if limit < 1:
            raise UsageError(f"--limit must be >= 1, got {limit}")
        ids = ids[:limit]
    return ids


def empty_label_spaces(dataset: Dataset, image_ids: Sequence[int]) -> list[int]:
    """The images with nothing to ask: no ``query_ids`` and no annotation to derive them from."""
    return [i for i in image_ids if not dataset.label_space(i)]


def check_something_to_ask(dataset: Dataset, image_ids: Sequence[int]) -> list[int]:
    """:class:`InferenceError` when no image has a label space (the run would write nothing);
    else the images that have none (they are recorded with no predictions)."""
    empty = empty_label_spaces(dataset, image_ids)
    if image_ids and len(empty) == len(image_ids):
        where = f" of {dataset.root}" if dataset.root is not None else ""
        raise InferenceError(
            f"none of the {len(image_ids)} image(s){where} has a label space (no query_ids and no "
            "annotations), so there is nothing to ask the model; give each image its query_ids "
            "(docs/FORMATS.md, \"Datasets\")"
        )
    return empty


def run_inference(
    detector: Detector,
    dataset: Dataset,
    run_dir: RunDir | str | Path,
    formulations: Sequence[str] = FORMULATIONS,
    progress: bool | None = None,
    *,
    device: str | None = None,
    precision: str = "fp32",
    limit: int | None = None,
    overwrite: bool = False,
    model_load_s: float | None = None,
    prefetch: bool = True,
    policy: PromptPolicyLike | None = None,
    negatives: Negatives | None = None,
) -> RunRecord:
    """Fill ``run_dir`` with the predictions of ``detector`` on ``dataset``; returns run.json.

    The run's model record is the detector's ``model_info`` (set by the registry).
    ``prefetch`` decodes the next image in a thread while the model runs (results are the
    same either way). ``policy`` adds the ``policy`` formulation (docs/PROMPTING.md).
    ``negatives`` adds absent queries to every label space (:mod:`probench.data.negatives`).
    """
    path = run_dir.path if isinstance(run_dir, RunDir) else Path(run_dir)
    formulations = run_formulations(formulations, policy)
    image_ids = select_images(dataset, limit)
    model = detector.model_info
    if not model:
        raise UsageError(f"{detector.name}: no model record (build it with load_detector)")
    identity = offline_identity(
        dict(model), dataset, device=device or str(detector.device), precision=precision,
        score_threshold=float(detector.score_threshold), limit=limit,
        prompt_policy=None if policy is None else policy.record(), negatives=negatives,
    )
    dataset = with_negatives(dataset, negatives)  # the label spaces asked (the same dataset for K = 0)
    extra: dict[str, Any] = {"n_images_evaluated": len(image_ids)}
    if model_load_s is not None:
        extra["timings"] = {"model_load_s": round(model_load_s, 3)}
    session = open_run(path, identity, formulations=formulations, overwrite=overwrite, timing_key="infer_s",
                       extra=extra)
    with session.recording():
        crash_point("infer.started")
        _infer_all(detector, dataset, session, formulations, image_ids, progress, prefetch, policy)
    crash_point("infer.finishing")
    return session.finish()


def _infer_all(
    detector: Detector,
    dataset: Dataset,
    session: RunSession,
    formulations: list[str],
    image_ids: list[int],
    progress: bool | None,
    prefetch: bool = True,
    policy: PromptPolicyLike | None = None,
) -> None:
    from tqdm import tqdm

    run_dir = session.run
    timings = session.info.timings  # by_formulation_s is in run.json from the first save on
    session.update(timings=timings.updated(by_formulation_s=dict(timings.by_formulation_s)))
    writers = run_dir.open_writers(formulations)
    total = len(writers) * len(image_ids)
    done = sum(len(w.done_images & set(image_ids)) for w in writers.values())
    try:
        with tqdm(
            total=total, initial=done, desc=f"infer {session.info.model.name}", unit="img",
            disable=bar_disabled(progress), dynamic_ncols=True,
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
                        results = _infer_image(detector, dataset, image_id, got_id, image, f, policy)
                    writer.add_image(image_id, results)
                    crash_point("infer.record")
                    bar.update(1)
                images.close()
                writer.finalize()
                session.add_timing("by_formulation_s", time.perf_counter() - t0, formulation=f)
                session.save()  # progress visible to anyone reading run.json
                crash_point("infer.formulation_done")
    finally:
        for w in writers.values():
            w.close()


def _decoded(dataset: Dataset, image_ids: list[int], prefetch: bool) -> Generator[tuple[int, np.ndarray]]:
    """The images decoded in order; with ``prefetch`` the next one is decoded in a thread
    while the model works on the current one (cv2 releases the GIL while decoding).
    A decode error surfaces at its image's turn, naming the file: the run stops there."""
    if not prefetch:
        for image_id in image_ids:
            yield image_id, dataset.read_image(image_id)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="probench-decode") as pool:
        pending = [pool.submit(dataset.read_image, i) for i in image_ids[:1]]
        for k, image_id in enumerate(image_ids):
            image = pending.pop().result()
            pending += [pool.submit(dataset.read_image, i) for i in image_ids[k + 1 : k + 2]]
            yield image_id, image


def _infer_image(
    detector: Detector, dataset: Dataset, image_id: int, got_id: int, image: np.ndarray, formulation: str,
    policy: PromptPolicyLike | None = None,
) -> list[CocoResult]:
    if got_id != image_id:  # the decode queue and the loop must walk the same ids
        raise InferenceError(f"internal: decoded image {got_id} where {image_id} was due")
    return infer_image(detector, dataset, image_id, image, formulation, policy)


def infer_image(
    detector: Detector, dataset: Dataset, image_id: int, image: np.ndarray, formulation: str,
    policy: PromptPolicyLike | None = None,
) -> list[CocoResult]:
    """The COCO results of one decoded image under one formulation (the unit of work a
    single process and a Ray worker both do). ``policy``: the image's orig prompts go
    through it (the ``policy`` formulation); boxes come back under the orig prompts."""
    if formulation == POLICY_FORMULATION:
        if policy is None:
            raise UsageError("the policy formulation needs a prompt policy (--prompt-policy)")
        query_ids, prompts = dataset.prompts_for(image_id, "orig")
    else:
        query_ids, prompts = dataset.prompts_for(image_id, formulation)
    texts, groups = unique_prompts(query_ids, prompts)
    try:
        if formulation == POLICY_FORMULATION and policy is not None:
            dets = policy.plan(texts).detect(detector, image)
        else:
            dets = detector.detect(image, texts)
    except ProbenchError:
        raise
    except Exception as exc:  # any backend failure, reported with its context
        raise InferenceError(
            f"{detector.name} failed on image {image_id} "
            f"({dataset.images[image_id].file_name}, {formulation}): {type(exc).__name__}: {exc}"
        ) from exc
    return detections_to_results(dets, image_id, groups)
