"""The full metric suite (docs/METRICS.md): ``score`` on in-memory predictions, ``score_run``
on a run folder. Definitions and edge cases: docs/METRICS.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

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

    def summary(self, area: str = "all") -> dict[str, Any]:
        a = self.areas.index(area)
        m = mean_ap(self.ap[:, a, :])  # per threshold
        coco = m[self.t_index(COCO_IOUS)]
        ti = self.t_index(SWEEP_IOUS)
        return {
            "map50": _f(m[self.t_index(np.array([0.5]))[0]]),
            "map75": _f(m[self.t_index(np.array([0.75]))[0]]),
            "map50_95": _f(float(np.mean(coco)) if not np.isnan(coco).any() else math.nan),
            "ap_by_iou": {sweep_key(t): _f(m[i]) for t, i in zip(SWEEP_IOUS, ti, strict=True)},
        }

    def group(self, queries: np.ndarray, area: str = "all") -> dict[str, Any]:
        """map50 / map50_95 over a subset of queries (those with GT in the area count)."""
        a = self.areas.index(area)
        ap = self.ap[queries, a, :]
        has = ap[:, 0] > -1
        ci = self.t_index(COCO_IOUS)
        i50 = self.t_index(np.array([0.5]))[0]
        if not has.any():
            return {"map50": None, "map50_95": None, "n_queries": 0}
        return {
            "map50": float(ap[has, i50].mean()),
            "map50_95": float(ap[has][:, ci].mean(axis=0).mean()),
            "n_queries": int(has.sum()),
        }

    def domains(self, gt: GroundTruth) -> list[dict[str, Any]]:
        """Per domain (``gt.domains`` order), map50 / map50_95 with images restricted to it
        (area "all"): one evaluation with each (domain, query) a category of its own."""
        ap = self.engine.average_precision(self.dets, self.pair, ("all",), COCO_IOUS, by_domain=True)
        ap = ap.reshape(len(gt.domains), gt.n_queries, len(COCO_IOUS))
        i50 = int(np.flatnonzero(COCO_IOUS == 0.5)[0])
        out: list[dict[str, Any]] = []
        for dom_ap in ap:
            has = dom_ap[:, 0] > -1
            if not has.any():
                out.append({"map50": None, "map50_95": None, "n_queries": 0})
                continue
            out.append({
                "map50": float(dom_ap[has, i50].mean()),
                "map50_95": float(dom_ap[has].mean(axis=0).mean()),
                "n_queries": int(has.sum()),
            })  # fmt: skip
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
    latency: Mapping[str, object] | None = None,
    realtime: Mapping[str, object] | None = None,
    pcr_score_threshold: float | None = None,
    progress: bool = False,
    bootstrap: int = 0,
    bootstrap_seed: int = 0,
) -> dict[str, Any]:
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
    degenerate: dict[str, dict[str, int]] = {}
    for f in present:
        bar.set_description(f"scoring {f}")
        dets = DetArrays.from_results(predictions[f], where=f"{f} predictions")
        degenerate[f] = _degenerate_counts(dets)
        evals[f] = _Formulation(gt, dets, ORIG_AREAS if f == "orig" else ("all",), engine=engine,
                                bootstrap=bool(bootstrap))  # fmt: skip
        bar.update()
    bar.set_description("consistency and breakdowns")
    out: dict[str, Any] = {
        "formulations": present,
        "formulations_missing": [f for f in FORMULATIONS if f not in predictions],
        "n_images": len(gt.image_ids),
        "n_queries": int(gt.n_queries),
        "n_queries_with_gt": int((np.bincount(gt.gt_query[~gt.gt_crowd], minlength=gt.n_queries) > 0).sum()),
        "n_annotations": len(gt.gt_pair),
        "by_formulation": {},
    }
    for f, ev in evals.items():
        s = ev.summary()
        s["n_predictions"] = ev.m.n_given
        s["n_outside_label_space"] = ev.m.n_outside
        s["n_beyond_max_dets"] = ev.m.n_beyond_max
        s.update(degenerate[f])
        out["by_formulation"][f] = s
    out["n_degenerate_boxes"] = sum(d["n_degenerate_boxes"] for d in degenerate.values())
    orig = out["by_formulation"].get("orig", {})
    for key in ("map50", "map75", "map50_95"):
        out[key] = orig.get(key)
    m = {f: out["by_formulation"].get(f, {}).get("map50") for f in FORMULATIONS}
    for f in FORMULATIONS:
        out[f"m_{f}"] = m[f]
    out["delta_orig_cat"] = _diff(m["orig"], m["cat"])
    out["delta_tmpl_orig"] = _diff(m["tmpl"], m["orig"])
    out.update(_best_formulation(m))
    if POLICY_FORMULATION in evals:  # a prompt policy's run: orig through the policy
        m_policy = out["by_formulation"][POLICY_FORMULATION].get("map50")
        out["m_policy"] = m_policy
        out["delta_policy_orig"] = _diff(m_policy, m["orig"])
    # PCR/PLC over the paper's formulations only
    recovery = {f: ev.recovered() for f, ev in evals.items() if f in FORMULATIONS}
    out.update(pcr_plc(gt.query_coref, gt.gt_query, gt.gt_crowd, recovery, pcr_score_threshold))
    if bootstrap:  # confidence intervals (scoring/bootstrap.py); the point values above are unchanged
        from probench.scoring.bootstrap import intervals

        out["intervals"] = intervals(gt, evals, out["best_formulation"], bootstrap, bootstrap_seed)
    from probench.scoring.curves import curves  # PR and F1-vs-confidence sweeps (scoring/curves.py)

    out["curves"] = curves(evals, int((~gt.gt_crowd).sum()))
    out["by_prompt_type"], out["by_domain"], out["by_size"] = {}, {}, {}
    if "orig" in evals:
        ev = evals["orig"]
        types = [t for t in PROMPT_TYPES if any(t in qt for qt in gt.query_types)]
        types += sorted({t for qt in gt.query_types for t in qt} - set(types))
        for t in types:
            qs = np.array([i for i, qt in enumerate(gt.query_types) if t in qt], dtype=np.int64)
            out["by_prompt_type"][t] = ev.group(qs)
        out["by_domain"] = dict(zip(gt.domains, ev.domains(gt), strict=True))
        for size in SIZES:
            s = ev.summary(size)
            a = ev.areas.index(size)
            out["by_size"][size] = {
                "map50": s["map50"],
                "map75": s["map75"],
                "map50_95": s["map50_95"],
                "n_queries": int((ev.n_pos[:, a] > 0).sum()),
            }
    bar.update()
    bar.close()
    if latency is not None:
        out["latency_ms"] = dict(latency)
    if realtime is not None:
        out["realtime"] = dict(realtime)
    return out


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


def _degenerate_counts(dets: DetArrays) -> dict[str, int]:
    """Predictions whose box has width or height <= 0: they can never match (IoU 0). Those
    with a negative area (one negative side) fall outside every COCO area range, so they are
    ignored rather than false positives, exactly as pycocotools treats them."""
    w, h = dets.box[:, 2], dets.box[:, 3]
    return {
        "n_degenerate_boxes": int(((w <= 0) | (h <= 0)).sum()),
        "n_degenerate_ignored": int((w * h < 0).sum()),
    }


def _best_formulation(m: Mapping[str, float | None]) -> dict[str, Any]:
    """delta_max and k* over the formulations with a mAP.5 (both null with fewer than two).
    k* is null on an exact tie of all of them (nothing is best); a tie at the top that leaves
    a formulation below goes to the first in orig, cat, tmpl. ``best_formulation_ties``
    lists the formulations sharing the top when more than one does."""
    vals = {f: float(v) for f in FORMULATIONS if (v := m[f]) is not None}
    scored = list(vals)
    if len(scored) < 2:
        return {"delta_max": None, "best_formulation": None, "best_formulation_ties": None}
    top = max(vals.values())
    ties = [f for f in scored if vals[f] == top]
    return {
        "delta_max": top - min(vals.values()),
        "best_formulation": None if len(ties) == len(scored) else ties[0],
        "best_formulation_ties": ties if len(ties) > 1 else None,
    }


TIE_TEXT = "tie"  # k* as tables write it when every formulation has the same mAP.5


def best_formulation_text(m: Mapping[str, Any]) -> str | None:
    """k* as tables print it: the formulation, :data:`TIE_TEXT` when every formulation has
    the same mAP.5 (``best_formulation`` null, ``best_formulation_ties`` listed), else None."""
    best = m.get("best_formulation")
    if best is None and m.get("best_formulation_ties"):
        return TIE_TEXT
    return None if best is None else str(best)


def json_object(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else {}: an optional part that is absent or malformed."""
    return value if isinstance(value, dict) else {}


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
) -> dict[str, Any]:
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
    info = run.info  # a CacheError when run.json is not a JSON object
    run_ds = json_object(info.get("dataset"))
    run_hash = run_ds.get("hash")
    matches = None if run_hash is None else run_hash == dataset.content_hash
    if matches is False and dataset_check == "refuse":
        made_on = f" (made on {run_ds['path']})" if run_ds.get("path") else ""
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
    latency = run.read_json("latency.json")
    realtime = run.read_json("realtime.json")
    summary = latency.get("summary_ms") if isinstance(latency, dict) else None
    rt = realtime if isinstance(realtime, dict) else None
    engine = CocoAP.of(dataset)  # the tables and hotcoco's ground truth, for the suite and the errors
    out = score(
        engine, preds, latency=summary, realtime=rt, pcr_score_threshold=pcr_score_threshold,
        progress=progress, bootstrap=bootstrap, bootstrap_seed=bootstrap_seed,
    )  # fmt: skip
    if dataset.videos:  # a sequence dataset: the temporal metrics (scoring/temporal.py)
        from probench.scoring.temporal import run_temporal

        out["temporal"] = run_temporal(dataset, run, forms)
    model = info.get("model")
    out["model"] = model.get("name") if isinstance(model, dict) else None
    out["dataset_hash"] = dataset.content_hash
    out["dataset_hash_matches"] = matches
    if dataset_check == "allow" and matches is False:
        out["dataset_mismatch_allowed"] = True
    out["formulations_incomplete"] = run.incomplete_formulations()
    if errors:  # TIDE's error types per formulation (scoring/errors_tide.py)
        from probench.scoring.errors_tide import tide_errors

        out["errors"] = tide_errors(engine, preds)
    if n_unknown:
        out["n_unknown_predictions"] = n_unknown
    return out


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
