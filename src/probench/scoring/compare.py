"""Two runs on one dataset, side by side: did a change (model, policy, prompts) help?
(``probench compare``, docs/OFFLINE.md "Compare").

Both runs are scored on the same dataset; every metric's difference B - A gets a paired
bootstrap interval: each resample draws the images once and scores both runs on that
draw (scoring/bootstrap.py), so what the two runs share (the hard images) cancels. Per
query, the AP.5 difference of a formulation, sorted by its size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probench.cache.records import (
    ABSENCE_COMPARED,
    AP_KEYS,
    CONSISTENCY_KEYS,
    DELTA_MAX,
    DELTA_ORIG_CAT,
    DELTA_TMPL_ORIG,
    METRICS_FILE,
    RUN_FILE,
    MetricsRecord,
    sample_name,
)
from probench.data.dataset import Dataset
from probench.data.negatives import Negatives, negatives_of, with_negatives
from probench.scoring import bootstrap as bs
from probench.scoring.absence import absence_samples
from probench.scoring.cocoeval import CocoAP
from probench.scoring.errors import DatasetMismatch, ScoringError, ScoringUsageError
from probench.scoring.suite import _Formulation, unknown_predictions
from probench.scoring.tables import DetArrays, GroundTruth
from probench.vocabulary import FORMULATIONS

# the metrics compared, as the bootstrap names them, and how they are printed
METRICS: tuple[str, ...] = (
    *(sample_name(f, m) for f in FORMULATIONS for m in AP_KEYS),
    DELTA_ORIG_CAT, DELTA_TMPL_ORIG, DELTA_MAX, *CONSISTENCY_KEYS,
    *(sample_name(f, m) for f in FORMULATIONS for m in ABSENCE_COMPARED),  # scoring/absence.py
)  # fmt: skip


def run_hash(path: Path) -> str | None:
    """The dataset a run is of: run.json's ``dataset.hash``, else metrics.json's
    ``dataset_hash`` (the dataset it was scored on)."""
    from probench.cache.run import RunDir

    run = RunDir(path)
    h = run.info.dataset.hash
    if not h:
        metrics = run.read_record(METRICS_FILE, MetricsRecord)
        h = None if metrics is None else metrics.dataset_hash
    return h or None


MISS_RATE_GAP = 0.05  # miss rates further apart than this: part of a difference is dropped frames


def run_conditions(path: Path) -> dict[str, Any]:
    """What a run's numbers rest on besides its model: where it came from, the share of its
    frames the node dropped (metrics.json ``realtime.missed_share``; an offline run answers
    every image: 0) and its weights (run.json ``model``)."""
    from probench.cache.run import RunDir

    run = RunDir(path)
    info = run.info
    metrics = run.read_record(METRICS_FILE, MetricsRecord)
    rt = None if metrics is None else metrics.realtime
    if rt is not None:
        miss = rt.missed_share if rt.missed_share is not None else (
            rt.frames_missed / rt.frames_sent if rt.frames_sent else None)
    else:
        miss = 0.0 if info.source != "ros" else None  # a ROS run without its realtime figures: unknown
    return {"source": info.source, "miss_rate": miss, "weights_source": info.model.weights_source,
            "random_weights": info.model.random_weights is True}


def condition_warnings(paths: Sequence[Path], conditions: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per reason the two runs' difference is not the models' alone: miss rates more
    than :data:`MISS_RATE_GAP` apart, random weights."""
    out = []
    a, b = (c.get("miss_rate") for c in conditions)
    if a is not None and b is not None and abs(a - b) > MISS_RATE_GAP:
        out.append(f"the runs dropped different shares of their frames (A {a:.0%}, B {b:.0%}): part of every "
                   "accuracy difference is frames one node never answered")
    for name, path, c in zip("AB", paths, conditions, strict=True):
        if c.get("random_weights"):
            out.append(f"{name} ({path}) has random weights: it tests the pipeline, its accuracy ranks "
                       "no model")
    return out


def _evaluations(gt: GroundTruth, dataset: Dataset, path: Path) -> dict[str, _Formulation]:
    from probench.cache.run import RunDir

    run = RunDir(path)
    forms = [f for f in run.formulations() if f in FORMULATIONS]
    if not forms:
        raise ScoringError(f"{run.path}: no complete predictions/<formulation>.json to compare")
    preds: dict[str, list[dict[str, Any]] | DetArrays] = {}
    for f in forms:
        records, columns = run.predictions_and_columns(f)
        preds[f] = records if columns is None else DetArrays.from_columns(*columns, where=f"{f} predictions")
    n_unknown, first = unknown_predictions(dataset, preds)
    if n_unknown:
        raise ScoringError(f"{run.path}: {n_unknown} prediction(s) are for images or queries this dataset "
                           f"does not have, the first {first}; compare runs of the dataset given")
    engine = CocoAP(gt)
    return {f: _Formulation(gt, DetArrays.from_results(p, where=f"{f} predictions"), ("all",), engine=engine,
                            bootstrap=True) for f, p in preds.items()}  # fmt: skip


def compare_runs(
    dataset: Dataset, run_a: str | Path, run_b: str | Path, *, n_resamples: int = bs.DEFAULT_RESAMPLES,
    seed: int = bs.DEFAULT_SEED, formulation: str = "orig",
) -> dict[str, Any]:
    """Every metric of both runs, B - A with its paired bootstrap interval, and the per-query
    AP.5 changes of ``formulation`` sorted by size (largest first). Runs made on another
    dataset than ``dataset`` (their hash differs) are refused: :class:`DatasetMismatch`."""
    if formulation not in FORMULATIONS:
        raise ScoringUsageError(f"formulation {formulation!r} is not one of {', '.join(FORMULATIONS)}")
    paths = [Path(run_a), Path(run_b)]
    for p in paths:
        if not p.is_dir():
            raise ScoringUsageError(f"{p}: no such run folder")
    hashes = [run_hash(p) for p in paths]
    known = {h for h in hashes if h}
    if len(known) > 1:
        raise DatasetMismatch(
            f"{paths[0]} and {paths[1]} were made on different datasets ({hashes[0]} and {hashes[1]}): "
            "their metrics are not comparable"
        )
    if known and dataset.content_hash not in known:
        raise DatasetMismatch(
            f"the runs were made on dataset {known.pop()}, not on the one given ({dataset.content_hash}); "
            "compare with the dataset the runs were made on"
        )
    dataset = with_negatives(dataset, _same_negatives(paths))
    gt = GroundTruth.from_dataset(dataset)
    evals = [_evaluations(gt, dataset, p) for p in paths]
    missing = _missing_formulations(paths, evals, formulation)
    w = np.vstack([np.ones((1, len(gt.image_ids))), bs.weights(len(gt.image_ids), n_resamples, seed)])
    samples = []
    for ev in evals:
        tgt = bs.targets_of(gt, {f: e.recovered() for f, e in ev.items()})
        samples.append(bs.resample(bs.tables_of(gt, ev), tgt, w))  # row 0: unit weights, the point values
        samples[-1].update(absence_samples(gt, ev, w, ABSENCE_COMPARED))  # on the same resamples
    metrics: dict[str, Any] = {}
    for key in METRICS:
        if key not in samples[0] or key not in samples[1]:
            continue
        a, b = samples[0][key], samples[1][key]
        diff = b[1:] - a[1:]
        iv = bs.interval(diff) if n_resamples else None
        metrics[key] = {"a": _f(a[0]), "b": _f(b[0]), "delta": _f(b[0] - a[0]), "interval": iv,
                        "significant": None if iv is None else not bs.holds_zero(iv)}  # fmt: skip
    conditions = [run_conditions(p) for p in paths]
    return {
        "dataset_hash": dataset.content_hash,
        "runs": [str(p) for p in paths],
        "conditions": conditions,
        "warnings": condition_warnings(paths, conditions),
        "resamples": n_resamples,
        "seed": seed,
        "metrics": metrics,
        "formulation": formulation,
        "not_compared": missing,
        "queries": _query_deltas(dataset, gt, evals, formulation),
    }


def _same_negatives(paths: Sequence[Path]) -> Negatives | None:
    """The absent queries both runs added to the label spaces (data/negatives.py): runs with
    different ones were scored on different pairs, so they are refused."""
    from probench.cache.run import RunDir

    found = [negatives_of(RunDir(p).info.settings, where=str(p / RUN_FILE)) for p in paths]
    if found[0] != found[1]:
        said = ["none" if n is None else f"K={n.k}, seed {n.seed}" for n in found]
        raise DatasetMismatch(f"{paths[0]} and {paths[1]} asked different absent queries (--negatives: "
                              f"{said[0]} and {said[1]}): their label spaces differ, so their metrics are "
                              "not comparable")
    return found[0]


def _missing_formulations(paths: Sequence[Path], evals: Sequence[Mapping[str, _Formulation]],
                          formulation: str) -> dict[str, str]:
    """The formulations only one run has, each with the run it lacks (their metrics, and the
    Δs and PCR that need them, are not compared: said, never silently dropped). The per-query
    ``formulation`` must be in both: a :class:`ScoringUsageError` naming the run without it."""
    for path, ev in zip(paths, evals, strict=True):
        if formulation not in ev:
            both = ", ".join(f for f in FORMULATIONS if all(f in e for e in evals)) or "none"
            raise ScoringUsageError(f"{path} has no complete predictions/{formulation}.json, so its "
                                    f"per-query AP cannot be compared; --formulation one both runs have "
                                    f"({both})")
    runs = ("A", "B")
    return {f: f"no predictions in {runs[i]}" for i, ev in enumerate(evals) for f in FORMULATIONS
            if f in evals[1 - i] and f not in ev}


def _query_deltas(
    dataset: Dataset, gt: GroundTruth, evals: Sequence[Mapping[str, _Formulation]], formulation: str
) -> list[dict[str, Any]]:
    """Per query with ground truth, AP.5 in A and B and B - A, largest |change| first."""
    aps = []
    for ev in evals:
        e = ev[formulation]
        aps.append(e.ap[:, e.areas.index("all"), int(np.searchsorted(e.thr, 0.5))])
    out = []
    for qi, qid in enumerate(gt.query_ids.tolist()):
        a, b = float(aps[0][qi]), float(aps[1][qi])
        if a < 0 or b < 0:  # no ground truth (pycocotools' -1)
            continue
        out.append({"query_id": qid, "name": dataset.queries[qid].name, "a": a, "b": b, "delta": b - a})
    out.sort(key=lambda r: (-abs(r["delta"]), r["query_id"]))
    return out


def _f(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)
