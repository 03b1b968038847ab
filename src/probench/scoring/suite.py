"""The full metric suite (docs/METRICS.md): ``score`` on in-memory predictions, ``score_run``
on a run folder. Definitions and edge cases: docs/METRICS.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from probench.cache.records import (
    LATENCY_FILE,
    REALTIME_FILE,
    RUN_FILE,
    FormulationScores,
    GroupScores,
    LatencyRecord,
    MetricsRecord,
    RealtimeRecord,
    Stats,
)
from probench.data.dataset import Dataset
from probench.jsonio import gc_paused
from probench.scoring.cocoeval import CocoAP, mean_ap
from probench.scoring.consistency import Recovery, pcr_plc
from probench.scoring.constants import COCO_IOUS, PCR_IOU, SIZES, SWEEP_IOUS, all_thresholds, sweep_key
from probench.scoring.errors import DatasetMismatch, ScoringError, ScoringUsageError
from probench.scoring.match import Matched, det_pairs, match, n_positive
from probench.scoring.tables import DetArrays, GroundTruth
from probench.vocabulary import FORMULATIONS, POLICY_FORMULATION, PROMPT_TYPES, RUN_FORMULATIONS

ORIG_AREAS = ("all", *SIZES)  # the size breakdown is reported under orig only


def _f(x: float) -> float | None:
    """A metric as JSON: NaN (nothing to average) becomes None."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


class _Formulation:
    """One formulation: its per-query APs on (area, threshold) columns (hotcoco's
    evaluation, :mod:`probench.scoring.cocoeval`) and the matching, area "all", that PCR,
    PLC and the curves read (IoU 0.5), and the bootstrap (every COCO threshold)."""

    def __init__(
        self, gt: GroundTruth, dets: DetArrays, areas: tuple[str, ...], *, engine: CocoAP | None = None,
        bootstrap: bool = False,
    ) -> None:  # fmt: skip
        self.areas = areas
        self.thr = all_thresholds()
        self.engine = engine or CocoAP(gt)
        self.dets = dets
        self.pair = det_pairs(gt, dets)
        self.ap = self.engine.average_precision(dets, self.pair, areas, self.thr)  # (Q, A, T)
        match_thr = COCO_IOUS if bootstrap else np.array([PCR_IOU])
        self.m: Matched = match(gt, dets, ("all",), match_thr, pair=self.pair)
        self.det_query = gt.pair_query[self.m.det_pair]
        self.det_image = gt.pair_image[self.m.det_pair]
        self.n_pos = n_positive(gt, areas, gt.gt_query, gt.n_queries)  # (Q, A)

    def t_index(self, values: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.thr, values)

    def summary(self, area: str = "all") -> FormulationScores:
        """mAP.5, mAP.75, mAP.5:.95 and the IoU sweep in ``area`` (the counts left unset)."""
        a = self.areas.index(area)
        m = mean_ap(self.ap[:, a, :])  # per threshold
        coco = m[self.t_index(COCO_IOUS)]
        ti = self.t_index(SWEEP_IOUS)
        return FormulationScores(
            map50=_f(m[self.t_index(np.array([0.5]))[0]]),
            map75=_f(m[self.t_index(np.array([0.75]))[0]]),
            map50_95=_f(float(np.mean(coco)) if not np.isnan(coco).any() else math.nan),
            ap_by_iou={sweep_key(t): _f(m[i]) for t, i in zip(SWEEP_IOUS, ti, strict=True)},
        )

    def group(self, queries: np.ndarray, area: str = "all") -> GroupScores:
        """map50 / map50_95 over a subset of queries (those with GT in the area count)."""
        a = self.areas.index(area)
        ap = self.ap[queries, a, :]
        has = ap[:, 0] > -1
        ci = self.t_index(COCO_IOUS)
        i50 = self.t_index(np.array([0.5]))[0]
        if not has.any():
            return GroupScores(map50=None, map50_95=None, n_queries=0)
        return GroupScores(map50=float(ap[has, i50].mean()),
                           map50_95=float(ap[has][:, ci].mean(axis=0).mean()), n_queries=int(has.sum()))

    def domains(self, gt: GroundTruth) -> list[GroupScores]:
        """Per domain (``gt.domains`` order), map50 / map50_95 with images restricted to it
        (area "all"): one evaluation with each (domain, query) a category of its own."""
        ap = self.engine.average_precision(self.dets, self.pair, ("all",), COCO_IOUS, by_domain=True)
        ap = ap.reshape(len(gt.domains), gt.n_queries, len(COCO_IOUS))
        i50 = int(np.flatnonzero(COCO_IOUS == 0.5)[0])
        out: list[GroupScores] = []
        for dom_ap in ap:
            has = dom_ap[:, 0] > -1
            if not has.any():
                out.append(GroupScores(map50=None, map50_95=None, n_queries=0))
                continue
            out.append(GroupScores(map50=float(dom_ap[has, i50].mean()),
                                   map50_95=float(dom_ap[has].mean(axis=0).mean()), n_queries=int(has.sum())))
        return out

    def recovered(self) -> Recovery:
        """Per GT, the IoU-0.5 matching (area "all") that PCR/PLC read: matched or not, by
        the pair's first (highest-scoring) prediction or not, the matched score and box."""
        det = self.m.gt_match[(slice(None), *self.m.column("all", PCR_IOU))]
        ok = det >= 0
        d = det[ok]
        top1 = np.zeros(len(det), bool)
        top1[ok] = self.m.det_rank[d] == 0
        score = np.full(len(det), -np.inf)
        score[ok] = self.m.det_score[d]
        box = np.zeros((len(det), 4))
        box[ok] = self.m.det_box[d]
        return Recovery(matched=ok, top1=top1, score=score, box=box)


def score(
    dataset: Dataset | GroundTruth | CocoAP,
    predictions: Mapping[str, Iterable[Mapping[str, Any]] | DetArrays],
    *,
    latency: Stats | None = None,
    realtime: RealtimeRecord | None = None,
    pcr_score_threshold: float | None = None,
    progress: bool = False,
    bootstrap: int = 0,
    bootstrap_seed: int = 0,
) -> MetricsRecord:
    """Every metric of docs/METRICS.md for the formulations given (a subset of orig/cat/tmpl,
    and ``policy`` for a prompt policy's run: by_formulation, m_policy, delta_policy_orig).
    ``pcr_score_threshold`` adds pcr50_at / plc_at (recovery by predictions scoring at
    least that). ``progress`` shows a tqdm bar on stderr (one step per formulation, then
    breakdowns). ``bootstrap`` resamples (seeded by ``bootstrap_seed``) add ``intervals``
    (scoring/bootstrap.py). ``dataset`` may be its tables, or hotcoco's evaluation over them
    (:class:`~probench.scoring.cocoeval.CocoAP`, shared with the TIDE errors)."""
    unknown = sorted(set(predictions) - set(RUN_FORMULATIONS))
    if unknown:
        raise ScoringUsageError(
            f"unknown formulation(s) {unknown}; expected a subset of {list(RUN_FORMULATIONS)}"
        )
    check_score_threshold(pcr_score_threshold)
    engine = CocoAP.of(dataset)  # one for every formulation
    gt = engine.gt
    present = [f for f in RUN_FORMULATIONS if f in predictions]
    bar = _bar(len(present) + 1, progress)
    evals = {}
    by_formulation: dict[str, FormulationScores] = {}
    for f in present:
        bar.set_description(f"scoring {f}")
        dets = DetArrays.from_results(predictions[f], where=f"{f} predictions")
        n_degenerate, n_ignored = _degenerate_counts(dets)
        ev = evals[f] = _Formulation(gt, dets, ORIG_AREAS if f == "orig" else ("all",), engine=engine,
                                     bootstrap=bool(bootstrap))  # fmt: skip
        by_formulation[f] = ev.summary().updated(
            n_predictions=ev.m.n_given, n_outside_label_space=ev.m.n_outside,
            n_beyond_max_dets=ev.m.n_beyond_max, n_degenerate_boxes=n_degenerate,
            n_degenerate_ignored=n_ignored)  # fmt: skip
        bar.update()
    bar.set_description("consistency and breakdowns")
    orig = by_formulation.get("orig") or FormulationScores()
    m = {f: by_formulation[f].map50 if f in by_formulation else None for f in FORMULATIONS}
    delta_max, best, ties = _best_formulation(m)
    # PCR/PLC over the paper's formulations only
    recovery = {f: ev.recovered() for f, ev in evals.items() if f in FORMULATIONS}
    consistency = pcr_plc(gt.query_coref, gt.gt_query, gt.gt_crowd, recovery, pcr_score_threshold)
    extra: dict[str, Any] = {}
    if POLICY_FORMULATION in evals:  # a prompt policy's run: orig through the policy
        m_policy = by_formulation[POLICY_FORMULATION].map50
        extra.update(m_policy=m_policy, delta_policy_orig=_diff(m_policy, m["orig"]))
    from probench.scoring.absence import absence  # does the model answer absent targets (scoring/absence.py)

    if bootstrap:  # confidence intervals (scoring/bootstrap.py); the point values above are unchanged
        from probench.scoring.bootstrap import intervals, weights

        w = weights(len(gt.image_ids), bootstrap, bootstrap_seed)  # the resamples, for every metric
        absent, absence_iv = absence(gt, evals, pcr_score_threshold, w)
        iv = intervals(gt, evals, best, bootstrap, bootstrap_seed, w=w)
        extra.update(absence=absent, intervals=iv.updated(absence=absence_iv))
    else:
        extra.update(absence=absence(gt, evals, pcr_score_threshold)[0])
    from probench.scoring.curves import curves  # PR and F1-vs-confidence sweeps (scoring/curves.py)

    extra.update(curves=curves(evals, int((~gt.gt_crowd).sum())), **_breakdowns(gt, evals.get("orig")))
    bar.update()
    bar.close()
    if latency is not None:
        extra.update(latency_ms=latency)
    if realtime is not None:
        extra.update(realtime=realtime)
    return MetricsRecord(
        **consistency.to_json(),
        formulations=present,
        formulations_missing=[f for f in FORMULATIONS if f not in predictions],
        n_images=len(gt.image_ids),
        n_queries=int(gt.n_queries),
        n_queries_with_gt=int((np.bincount(gt.gt_query[~gt.gt_crowd], minlength=gt.n_queries) > 0).sum()),
        n_annotations=len(gt.gt_pair),
        by_formulation=by_formulation,
        n_degenerate_boxes=sum(s.n_degenerate_boxes for s in by_formulation.values()),
        map50=orig.map50, map75=orig.map75, map50_95=orig.map50_95,
        m_orig=m["orig"], m_cat=m["cat"], m_tmpl=m["tmpl"],
        delta_orig_cat=_diff(m["orig"], m["cat"]),
        delta_tmpl_orig=_diff(m["tmpl"], m["orig"]),
        delta_max=delta_max, best_formulation=best, best_formulation_ties=ties,
        **extra,
    )


def _breakdowns(gt: GroundTruth, ev: _Formulation | None) -> dict[str, dict[str, GroupScores]]:
    """orig's mAP per prompt type, domain and size (empty without orig)."""
    by_type: dict[str, GroupScores] = {}
    by_size: dict[str, GroupScores] = {}
    if ev is None:
        return dict(by_prompt_type=by_type, by_domain={}, by_size=by_size)
    types = [t for t in PROMPT_TYPES if any(t in qt for qt in gt.query_types)]
    types += sorted({t for qt in gt.query_types for t in qt} - set(types))
    for t in types:
        qs = np.array([i for i, qt in enumerate(gt.query_types) if t in qt], dtype=np.int64)
        by_type[t] = ev.group(qs)
    for size in SIZES:
        s = ev.summary(size)
        a = ev.areas.index(size)
        by_size[size] = GroupScores(map50=s.map50, map75=s.map75, map50_95=s.map50_95,
                                    n_queries=int((ev.n_pos[:, a] > 0).sum()))
    return dict(by_prompt_type=by_type, by_domain=dict(zip(gt.domains, ev.domains(gt), strict=True)),
                by_size=by_size)


class _Progress(Protocol):
    """What :func:`score` uses of a tqdm bar."""

    def set_description(self, desc: str) -> None: ...

    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


def _bar(total: int, enabled: bool) -> _Progress:  # a tqdm, or a no-op stand-in
    if enabled:
        import sys

        from tqdm import tqdm

        # disable=None: a bar on a TTY only
        bar: _Progress = tqdm(total=total, file=sys.stderr, unit="step", leave=False, disable=None)
        return bar
    return _NoBar()


class _NoBar:
    def set_description(self, desc: str) -> None: ...

    def update(self, n: int = 1) -> None: ...

    def close(self) -> None: ...


def check_score_threshold(value: float | None) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0
    if value is not None and not ok:
        raise ScoringUsageError(f"PCR score threshold {value!r} is not a number in [0, 1]")


def _degenerate_counts(dets: DetArrays) -> tuple[int, int]:
    """Predictions whose box has width or height <= 0: they can never match (IoU 0); and
    those with a negative area (one negative side), which fall outside every COCO area
    range, so they are ignored rather than false positives, exactly as pycocotools treats them."""
    w, h = dets.box[:, 2], dets.box[:, 3]
    return int(((w <= 0) | (h <= 0)).sum()), int((w * h < 0).sum())


def _best_formulation(m: Mapping[str, float | None]) -> tuple[float | None, str | None, list[str] | None]:
    """delta_max, k* and the formulations tied at the top, over the formulations with a
    mAP.5 (all null with fewer than two). k* is null on an exact tie of all of them
    (nothing is best); a tie at the top that leaves a formulation below goes to the first in
    orig, cat, tmpl. The ties are listed when more than one formulation shares the top."""
    vals = {f: float(v) for f in FORMULATIONS if (v := m[f]) is not None}
    scored = list(vals)
    if len(scored) < 2:
        return None, None, None
    top = max(vals.values())
    ties = [f for f in scored if vals[f] == top]
    return (top - min(vals.values()), None if len(ties) == len(scored) else ties[0],
            ties if len(ties) > 1 else None)


TIE_TEXT = "tie"  # k* as tables write it when every formulation has the same mAP.5


def best_formulation_text(m: MetricsRecord) -> str | None:
    """k* as tables print it: the formulation, :data:`TIE_TEXT` when every formulation has
    the same mAP.5 (``best_formulation`` null, ``best_formulation_ties`` listed), else None."""
    if m.best_formulation is None and m.best_formulation_ties:
        return TIE_TEXT
    return m.best_formulation


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


DATASET_CHECKS = ("record", "refuse", "allow")


def score_run(
    dataset: Dataset,
    run_dir: str | Path,
    *,
    pcr_score_threshold: float | None = None,
    dataset_check: str = "record",
    progress: bool = False,
    allow_unknown: bool = False,
    bootstrap: int = 0,
    bootstrap_seed: int = 0,
    errors: bool = False,
) -> MetricsRecord:
    """Score a run folder (docs/FORMATS.md, "Run folders"): its complete formulations, latency and realtime.

    A prediction for an image or query the dataset does not have is refused (a
    :class:`ScoringError` naming the first), unless ``allow_unknown``: then such predictions
    never match and are counted in ``n_unknown_predictions``.

    ``dataset_check`` decides what a dataset whose content hash differs from run.json's
    ``dataset.hash`` does: "record" (``dataset_hash_matches`` false), "refuse" (a
    :class:`DatasetMismatch` naming both hashes, before any scoring) or "allow" (scored; a
    mismatch is recorded as ``dataset_mismatch_allowed``, absent when the hashes match).
    ``bootstrap`` adds ``intervals`` (as :func:`score`), ``errors`` the TIDE error analysis."""
    from probench.cache.run import RunDir

    if dataset_check not in DATASET_CHECKS:
        raise ScoringUsageError(f"dataset_check {dataset_check!r} is not one of {', '.join(DATASET_CHECKS)}")
    check_score_threshold(pcr_score_threshold)
    run = RunDir(run_dir)
    if not run.path.is_dir():
        raise ScoringUsageError(f"{run.path}: no such run folder")
    info = run.info  # a RecordError when run.json is not a run record
    from probench.data.negatives import negatives_of, with_negatives

    # the absent queries the run added to the label spaces (data/negatives.py), drawn again
    dataset = with_negatives(dataset, negatives_of(info.settings, where=f"{run.path / RUN_FILE}"))
    run_hash = info.dataset.hash
    matches = None if run_hash is None else run_hash == dataset.content_hash
    if matches is False and dataset_check == "refuse":
        made_on = f" (made on {info.dataset.path})" if info.dataset.path else ""
        raise DatasetMismatch(
            f"{run.path}: the dataset's content hash {dataset.content_hash} differs from run.json's "
            f"dataset.hash {run_hash}{made_on}; score with the dataset the run was made on, or pass "
            "--allow-dataset-mismatch to score anyway"
        )
    forms = run.formulations()
    if not forms:
        partial = run.incomplete_formulations()
        hint = f" (incomplete: {', '.join(partial)}; finish the run first)" if partial else ""
        raise ScoringError(f"{run.path}: no complete predictions/<formulation>.json{hint}")
    preds: dict[str, list[dict[str, Any]] | DetArrays] = {}
    with gc_paused():  # the records die here (as columns they are not garbage-collected objects)
        for f in forms:
            records, columns = run.predictions_and_columns(f)
            where = f"{f} predictions"
            preds[f] = records if columns is None else DetArrays.from_columns(*columns, where=where)
            del records
    n_unknown, first = unknown_predictions(dataset, preds)
    if n_unknown and not allow_unknown:
        raise ScoringError(
            f"{run.path}: {n_unknown} prediction(s) are for images or queries this dataset does not have, "
            f"the first {first}; score with the dataset the run was made on, or pass --allow-unknown"
        )
    latency = run.read_record(LATENCY_FILE, LatencyRecord)
    realtime = run.read_record(REALTIME_FILE, RealtimeRecord)
    engine = CocoAP.of(dataset)  # the tables and hotcoco's ground truth, for the suite and the errors
    out = score(
        engine, preds, latency=None if latency is None else latency.summary_ms, realtime=realtime,
        pcr_score_threshold=pcr_score_threshold, progress=progress, bootstrap=bootstrap,
        bootstrap_seed=bootstrap_seed,
    )  # fmt: skip
    extra: dict[str, Any] = {}
    if dataset.videos:  # a sequence dataset: the temporal metrics (scoring/temporal.py)
        from probench.scoring.temporal import run_temporal

        extra.update(temporal=run_temporal(dataset, run, forms))
    if dataset_check == "allow" and matches is False:
        extra.update(dataset_mismatch_allowed=True)
    if errors:  # TIDE's error types per formulation (scoring/errors_tide.py)
        from probench.scoring.errors_tide import tide_errors

        extra.update(errors=tide_errors(engine, preds))
    if n_unknown:
        extra.update(n_unknown_predictions=n_unknown)
    return out.updated(model=info.model.name, dataset_hash=dataset.content_hash, dataset_hash_matches=matches,
                       formulations_incomplete=run.incomplete_formulations(), **extra)


def unknown_predictions(
    dataset: Dataset, preds: Mapping[str, Sequence[Mapping[str, Any]] | DetArrays]
) -> tuple[int, str]:
    """How many predictions name an image or query id ``dataset`` lacks, and the first (in
    formulation and file order) described: ``"image_id 99999 (predictions/orig.json, record 0)"``."""
    count, first = 0, ""
    for f, records in preds.items():
        if isinstance(records, DetArrays):  # columns: checked in bulk
            bad_image = ~np.isin(records.image_id, np.fromiter(dataset.images, dtype=np.int64))
            bad_query = ~np.isin(records.query_id, np.fromiter(dataset.queries, dtype=np.int64))
            bad_rows = np.flatnonzero(bad_image | bad_query)
            count += len(bad_rows)
            if len(bad_rows) and not first:
                i = int(bad_rows[0])
                bad = (f"image_id {int(records.image_id[i])}" if bad_image[i]
                       else f"query (category_id) {int(records.query_id[i])}")
                first = f"{bad} (predictions/{f}.json, record {i})"
            continue
        for i, r in enumerate(records):
            if not isinstance(r, Mapping):
                continue  # malformed: DetArrays names it
            image_id, query_id = r.get("image_id"), r.get("category_id")
            bad = (f"image_id {image_id}" if image_id not in dataset.images
                   else f"query (category_id) {query_id}" if query_id not in dataset.queries else "")
            if bad:
                count += 1
                first = first or f"{bad} (predictions/{f}.json, record {i})"
    return count, first
