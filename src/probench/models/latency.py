"""The paper's latency protocol (§IV-B), written to ``RUN/latency.json``.

Protocol, as implemented:
- a fixed subset: the first ``n_images`` (50) images by image id whose label space is not
  empty (an image with nothing to ask has no workload), all of them if fewer;
- the query workload held constant: each image's label space under ``orig``, identical
  prompt texts asked once (exactly what ``probench infer`` asks);
- images are decoded once before timing: **decoding is excluded** from the end-to-end
  figure (its time per image is reported beside it, ``decode_ms``), the model's own
  pre-processing (resize, normalise, tokenise) is included;
- ``warmup`` (3) warm-up inferences (the first images of the subset, in order) run and are
  excluded; then ``runs`` (10) timed passes over the whole subset, so
  ``runs x n_images`` timed inferences;
- one timed inference is end to end: ``set_prompts`` (re-encodes the text side only when
  the prompt set differs from the previous image's: the detector's text cache, timed as
  stage ``text``) plus ``detect`` (pre-processing + forward + post-processing);
- on CUDA, ``torch.cuda.synchronize()`` before and after each inference.

Reported: mean, std (population, ddof=0), p50/p95/p99 (linear interpolation) and max over
all timed inferences, plus per-stage means from each detection's ``timings_ms``; the text
stage split into ``cold`` (the text encoder ran) and ``warm`` (everything from the cache)
samples with the warm share of the frame; the text cache's hits, misses and evictions
during the timed runs; the preprocessing path (``device`` or ``reference``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probench import __version__
from probench.cache import lock
from probench.cache.identity import RunIdentity, check_folder, clear_run, library_versions, utc_now
from probench.cache.records import (
    LATENCY_FILE,
    Isolation,
    LatencyProtocol,
    LatencyRecord,
    Stats,
    TextCacheCounts,
    TextSplit,
)
from probench.cache.run import RunDir
from probench.data.dataset import Dataset
from probench.errors import ProbenchError, UsageError
from probench.models.base import Detector, TextCacheStats
from probench.models.errors import InferenceError
from probench.models.progress import bar_disabled
from probench.stats import summarize as summary_stats
from probench.vocabulary import unique_prompts

STAGE_KEYS = ("text", "preprocess", "forward", "postprocess")


def latency_subset(dataset: Dataset, n_images: int = 50) -> list[int]:
    """The fixed subset: the first ``n_images`` image ids (ascending) with a non-empty label space."""
    if n_images < 1:
        raise UsageError(f"--images must be >= 1, got {n_images}")
    out = []
    for image_id in sorted(dataset.images):
        if dataset.label_space(image_id):
            out.append(image_id)
            if len(out) == n_images:
                break
    if not out:
        raise UsageError("the dataset has no image with a non-empty label space: nothing to time")
    return out


def cuda_sync(device: str) -> Callable[[], None] | None:
    """``torch.cuda.synchronize`` for a CUDA device, else None (nothing to wait for)."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    synchronize: Callable[[], None] = torch.cuda.synchronize
    return synchronize


def summarize(samples_ms: Sequence[float]) -> dict[str, float]:
    """mean, std (ddof=0), p50, p95, p99, max of a list of times in ms."""
    if len(samples_ms) == 0:
        raise ValueError("no samples to summarize")
    # the statistics of one sample or more are all numbers (None only stands for no sample)
    return {k: v for k, v in summary_stats(samples_ms).items() if v is not None}


@dataclass(frozen=True)
class Measured:
    """One measurement (:func:`measure_latency`): ``samples_ms`` (one per timed inference,
    run-major order), per-stage sample lists in ``stages``, per sample whether the text encoder
    ran (``text_cold``), its calls and the text cache's counters during the timed runs."""

    samples_ms: list[float]
    stages: dict[str, list[float]]
    text_cold: list[bool]
    text_encoder_calls: int | None
    text_cache: TextCacheCounts


def measure_latency(
    detector: Detector,
    workload: Sequence[tuple[int, np.ndarray, list[str]]],
    *,
    warmup: int = 3,
    runs: int = 10,
    sync: Callable[[], None] | None = None,
    progress: bool | None = False,
) -> Measured:
    """Time ``detector`` over ``workload`` ((image_id, decoded RGB image, prompts) triples)."""
    from tqdm import tqdm

    if warmup < 0:
        raise UsageError(f"--warmup must be >= 0, got {warmup}")
    if runs < 1:
        raise UsageError(f"--runs must be >= 1, got {runs}")
    if not workload:
        raise UsageError("no images to time")
    samples: list[float] = []
    stages: dict[str, list[float]] = {k: [] for k in STAGE_KEYS}
    cold: list[bool] = []  # per timed sample: did the text encoder run
    with tqdm(
        total=warmup + runs * len(workload), desc=f"latency {detector.name}",
        unit="inf", disable=bar_disabled(progress), dynamic_ncols=True,
    ) as bar:
        for i in range(warmup):
            image_id, image, prompts = workload[i % len(workload)]
            _timed_call(detector, image_id, image, prompts, sync)
            bar.update(1)
        calls0 = detector.text_encoder_calls
        cache0 = detector.text_cache_stats()
        for _ in range(runs):
            for image_id, image, prompts in workload:
                before = detector.text_encoder_calls
                total_ms, text_ms, timings = _timed_call(detector, image_id, image, prompts, sync)
                cold.append(detector.text_encoder_calls != before)
                samples.append(total_ms)
                stages["text"].append(text_ms)
                for k in STAGE_KEYS[1:]:
                    if k in timings:
                        stages[k].append(timings[k])
                bar.update(1)
    return Measured(samples_ms=samples, stages=stages, text_cold=cold,
                    text_encoder_calls=detector.text_encoder_calls - calls0,
                    text_cache=_cache_delta(cache0, detector.text_cache_stats()))


def _cache_delta(before: TextCacheStats, after: TextCacheStats) -> TextCacheCounts:
    """latency.json's ``text_cache``: the cache as it ends, with the hits, misses and
    evictions of the timed runs."""
    return TextCacheCounts(kind=after["kind"], capacity=after["capacity"], entries=after["entries"],
                           hits=after["hits"] - before["hits"], misses=after["misses"] - before["misses"],
                           evictions=after["evictions"] - before["evictions"])


def text_split(samples_ms: Sequence[float], text_ms: Sequence[float], cold: Sequence[bool]) -> TextSplit:
    """The text stage of cold samples (the encoder ran) and warm ones (all from the cache),
    and the warm samples' text share of their frames (sum of text / sum of end-to-end)."""

    def stage(want: bool) -> Stats | None:
        part = [t for t, c in zip(text_ms, cold, strict=True) if c is want]
        return Stats(**summarize(part)) if part else None

    warm_total = sum(s for s, c in zip(samples_ms, cold, strict=True) if not c)
    warm_text = sum(t for t, c in zip(text_ms, cold, strict=True) if not c)
    return TextSplit(n_cold=int(sum(cold)), n_warm=int(len(cold) - sum(cold)), cold=stage(True),
                     warm=stage(False),
                     warm_share_of_frame=round(warm_text / warm_total, 6) if warm_total > 0 else None)


def _timed_call(
    detector: Detector, image_id: int, image: np.ndarray, prompts: list[str],
    sync: Callable[[], None] | None,
) -> tuple[float, float, dict[str, float]]:
    try:
        if sync is not None:
            sync()
        t0 = time.perf_counter()
        detector.set_prompts(prompts)
        if sync is not None:
            sync()  # so the text stage holds its own kernels
        t1 = time.perf_counter()
        dets = detector.detect(image)
        if sync is not None:
            sync()
        t2 = time.perf_counter()
    except ProbenchError:
        raise
    except Exception as exc:  # any backend failure, reported with its context
        raise InferenceError(
            f"{detector.name} failed on image {image_id}: {type(exc).__name__}: {exc}"
        ) from exc
    return (t2 - t0) * 1000.0, (t1 - t0) * 1000.0, dict(dets.timings_ms)


def load_workload(
    dataset: Dataset, image_ids: Sequence[int], decode_ms: list[float] | None = None
) -> list[tuple[int, np.ndarray, list[str]]]:
    """Decode the subset once (decoding is not part of the measured latency; its time per
    image is appended to ``decode_ms`` when given)."""
    workload = []
    for image_id in image_ids:
        qids, prompts = dataset.prompts_for(image_id, "orig")
        texts, _groups = unique_prompts(qids, prompts)
        t0 = time.perf_counter()
        image = dataset.read_image(image_id)
        if decode_ms is not None:
            decode_ms.append((time.perf_counter() - t0) * 1000.0)
        workload.append((image_id, image, texts))
    return workload


def latency_identity(
    model: Mapping[str, object], dataset: Dataset, *, device: str, precision: str
) -> RunIdentity:
    """What a latency measurement is of (checked against the folder on the shared fields)."""
    return RunIdentity(source="offline", model=model, dataset=dataset.summary(), device=device,
                       precision=precision)


def warm_graphs(detector: Detector, workload: Sequence[tuple[int, np.ndarray, list[str]]]) -> None:
    """The compiled runtime: its graph for every (frame size, prompt count) of ``workload``
    made before anything is timed, as the grounding node makes its graphs at configure
    (``warmup_size``); the protocol's warm-up runs alone see only a few frames."""
    from probench.models.base import BaseDetector

    if not isinstance(detector, BaseDetector) or detector.model_info is None:
        return
    if detector.model_info["runtime"] != "compiled":
        return
    for size, n in sorted({(im.shape[:2], len(p)) for _, im, p in workload if p}):
        detector.warmup(size, n, every_bucket=False)


def run_latency(
    detector: Detector,
    dataset: Dataset,
    run_dir: RunDir | str | Path,
    *,
    n_images: int = 50,
    warmup: int = 3,
    runs: int = 10,
    device: str | None = None,
    precision: str = "fp32",
    overwrite: bool = False,
    progress: bool | None = None,
    isolation: Isolation | None = None,
    cpu_threads: int | None = None,
) -> LatencyRecord:
    """Run the protocol and write ``run_dir/latency.json`` (atomically); returns its record.
    ``isolation``: how the measurement was kept alone on its device (``probench sweep``);
    ``cpu_threads``: the threads the command set for the model work (``--threads``), recorded.

    A run folder whose run.json or latency.json names another model, device, precision or
    dataset is refused unless ``overwrite`` (which clears the folder's probench files)."""
    run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    device = device or str(detector.device)
    identity = latency_identity(_model_info(detector), dataset, device=device, precision=precision)
    lock.check_free(run_dir.path)  # before anything is created or cleared
    with lock.locked(run_dir.path):  # no second writer, and nothing of ours timed beside it
        if overwrite:
            clear_run(run_dir)
        check_folder(run_dir.path, identity, shared_only=True)
        record = measure_record(detector, dataset, n_images=n_images, warmup=warmup, runs=runs, device=device,
                                precision=precision, progress=progress, cpu_threads=cpu_threads)
        if isolation is not None:
            record = record.updated(isolation=isolation)
        write_latency(run_dir, record)
        return record


def _model_info(detector: Detector) -> dict[str, object]:
    if not detector.model_info:
        raise UsageError(f"{detector.name}: no model record (build it with load_detector)")
    return dict(detector.model_info)


def write_latency(run_dir: RunDir, record: LatencyRecord) -> None:
    """THE writer of ``latency.json`` (``probench latency``, ``probench sweep``): atomically."""
    run_dir.path.mkdir(parents=True, exist_ok=True)
    run_dir.write_record(LATENCY_FILE, record)


def measure_record(
    detector: Detector, dataset: Dataset, *, n_images: int, warmup: int, runs: int, device: str | None = None,
    precision: str = "fp32", progress: bool | None = None, cpu_threads: int | None = None,
) -> LatencyRecord:
    """The protocol's measurement as latency.json's record, written nowhere (a Ray worker
    measures, the driver writes: :func:`write_latency`)."""
    device = device or str(detector.device)
    identity = latency_identity(_model_info(detector), dataset, device=device, precision=precision)
    image_ids = latency_subset(dataset, n_images)
    decode_ms: list[float] = []
    workload = load_workload(dataset, image_ids, decode_ms)
    sync = cuda_sync(device)
    warm_graphs(detector, workload)
    measured = measure_latency(detector, workload, warmup=warmup, runs=runs, sync=sync, progress=progress)
    samples = measured.samples_ms
    stages_ms = {k: Stats(**summarize(v)) for k, v in measured.stages.items() if len(v) == len(samples)}
    frame_sizes = sorted({f"{im.shape[1]}x{im.shape[0]}" for _, im, _ in workload})
    protocol = LatencyProtocol(
        warmup=warmup,
        runs=runs,
        n_images=len(image_ids),
        n_images_requested=n_images,
        n_samples=len(samples),
        cuda_synchronized=sync is not None,
        end_to_end=True,
        decode_included=False,
        prompts_per_image="label space of each image (orig)",
        text_encoding="included when the prompt set differs from the previous image's "
                      "(the detector's text cache); stage 'text'",
        decode="timed once per image while loading (file -> RGB), reported in decode_ms, "
               "not part of samples_ms",
        std="population (ddof=0)",
    )  # fmt: skip
    if cpu_threads is not None:  # set by the command (--threads): recorded, else no key
        protocol = protocol.updated(cpu_threads=cpu_threads)
    return LatencyRecord.model_validate(identity.record()).updated(
        protocol=protocol,
        random_weights=bool(identity.model.get("random_weights", False)),
        image_ids=image_ids,
        summary_ms=Stats(**summarize(samples)),
        stages_ms=stages_ms,
        preprocess=detector.preprocess,
        frame_sizes=frame_sizes,
        decode_ms=Stats(**summarize(decode_ms)),
        text_ms=text_split(samples, measured.stages["text"], measured.text_cold),
        text_cache=measured.text_cache,
        text_encoder_calls=measured.text_encoder_calls,
        samples_ms=[round(s, 4) for s in samples],
        created=utc_now(),
        probench_version=__version__,
        versions=library_versions(),
    )


def _ms(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def format_summary(result: LatencyRecord) -> str:
    s, p = result.summary_ms, result.protocol
    stages = ", ".join(f"{k} {_ms(v.mean)}" for k, v in result.stages_ms.items())
    text, cache = result.text_ms or TextSplit(), result.text_cache
    warm, cold = text.warm, text.cold
    text_line = (
        f"; text cold {_ms(cold.mean)} ms x{text.n_cold}" if cold else "; text cold -"
    ) + (f", warm {_ms(warm.mean, 3)} ms x{text.n_warm} ({100 * text.warm_share_of_frame:.2f}% of "
         "the frame)" if warm and text.warm_share_of_frame is not None else ", warm -")
    if cache:
        text_line += f"; text cache {cache.kind}: {cache.hits} hits, {cache.misses} misses, " \
                     f"{cache.evictions} evictions"
    return (
        f"{result.model.name} on {result.device} ({result.precision}"
        f"{', random weights' if result.random_weights else ''}): "
        f"{_ms(s.mean)} ± {_ms(s.std)} ms (p50 {_ms(s.p50)}, p95 {_ms(s.p95)}, "
        f"p99 {_ms(s.p99)}, max {_ms(s.max)}) over {p.n_samples} timed inferences "
        f"({p.n_images} images x {p.runs} runs, {p.warmup} warm-up excluded"
        f"{'' if p.cpu_threads is None else f', {p.cpu_threads} CPU thread(s)'}"
        f"{', CUDA-synchronised' if p.cuda_synchronized else ''}); stage means ms: {stages}; "
        f"preprocess path {result.preprocess or '?'}{text_line}"
    )
