"""Rows of a report: run folders (metrics.json + run.json) and reference tables (CSV).

A run without ``metrics.json`` is scored on the fly with :func:`probench.scoring.score_run`
(the dataset comes from ``--dataset`` or run.json's ``dataset.path``); nothing is written
into the run folder, so a report never modifies its inputs.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from probench.cache.records import (
    AP_KEYS,
    BEST_FORMULATION,
    LATENCY_FILE,
    MAP50,
    METRICS_FILE,
    RUN_FILE,
    TABLE2_COLUMNS,
    LatencyRecord,
    MetricsRecord,
    RunRecord,
    Stats,
    m_key,
)
from probench.errors import ProbenchError
from probench.report.errors import ReportError, ReportUsageError
from probench.scoring.suite import TIE_TEXT
from probench.vocabulary import FORMULATIONS, RUN_FORMULATIONS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from probench.cache.run import RunDir
    from probench.data.dataset import Dataset

# The columns of the paper's Table II, in order (probench/report/data/paper_table2.csv).
COLUMNS: tuple[str, ...] = TABLE2_COLUMNS
NUMERIC: tuple[str, ...] = tuple(c for c in COLUMNS if c not in (COLUMNS[0], BEST_FORMULATION))  # not model
RANDOM_MARK = " (random weights)"
TINY_MARK = " tiny"  # a tiny-<name> test variant: the adapter's code path, not the real architecture
PAPER_MARK = " (paper)"
LATENCY_COLUMN = COLUMNS[4]  # latency_ms: the offline protocol's mean (latency.json's summary_ms)
ROS_LATENCY = "latency_ros_ms"  # Table II's Markdown: the end-to-end latency probench eval measured
# Table II's mAP.5 columns of a formulation other than orig: column -> formulation
FORMULATION_COLUMNS = {m_key(f): f for f in RUN_FORMULATIONS}

# Scale variants of one architecture in the paper's Table II (Fig. 5 joins them with dashes).
PAPER_FAMILIES: dict[str, str] = {
    "OWLv2-L": "owlv2", "OWLv2-B": "owlv2", "YOLOE-X": "yoloe", "YOLOE-S": "yoloe",
    "YOLO-W-X": "yolo-world", "YOLO-W-S": "yolo-world", "MM-G-D-L": "mm-gdino", "MM-G-D-T": "mm-gdino",
}  # fmt: skip


@dataclass
class Entry:
    """One row of the report: a run of the user's, or a published reference row. Its files
    are records read and validated (:mod:`probench.cache.records`): every number is finite
    and in its range."""

    label: str
    metrics: MetricsRecord
    reference: bool = False
    path: Path | None = None
    info: RunRecord = field(default_factory=RunRecord)  # run.json
    family: str | None = None
    scored_now: bool = False  # metrics computed by the report (no metrics.json)
    trace: list[dict[str, Any]] = field(default_factory=list)  # realtime_frames.jsonl of a ROS replay
    latency: LatencyRecord | None = None  # latency.json: its protocol, how it was isolated

    def number(self, column: str) -> float | None:
        """A Table II numeric column (``latency_ms`` is the latency mean of the offline
        protocol; ``latency_ros_ms`` the mean end-to-end latency ``probench eval`` measured
        through ROS 2, :meth:`ros_latency`)."""
        if column == LATENCY_COLUMN:
            return None if self.metrics.latency_ms is None else self.metrics.latency_ms.mean
        if column == ROS_LATENCY:
            ros = self.ros_latency()
            return None if ros is None else ros.mean
        return self.metrics.number(column)

    @property
    def random_weights(self) -> bool:
        """A run of a model with random weights: never ranked, never on a frontier (it tests
        the pipeline, not the model)."""
        return self.info.model.random_weights is True

    def ros_latency(self) -> RosLatency | None:
        """What ``probench eval`` measured through the ROS 2 graph (metrics.json
        ``realtime``): the mean and p95 latency (ms, warm-up frames excluded), the mode and
        rate; None for runs that did not come through ROS."""
        rt = self.metrics.realtime
        if rt is None or rt.latency_ms.mean is None:
            return None
        return RosLatency(rt.latency_ms.mean, rt.latency_ms.p95, rt.mode or "?", rt.rate_hz)

    def ros_latency_text(self) -> str:
        """How the ROS 2 latency was taken, for notes and figure labels: "ROS 2, camera-rate 30 Hz"."""
        ros = self.ros_latency()
        if ros is None:
            return "ROS 2, ?"
        rate = f" {ros.rate_hz:g} Hz" if ros.rate_hz and ros.mode == "camera-rate" else ""
        return f"ROS 2, {ros.mode}{rate}"

    def dataset_name(self) -> str:
        """The dataset a run was made on, as people name it: its folder, or the bag it was
        replayed from (``bag NAME``); "?" when run.json says nothing."""
        ds = self.info.dataset
        if ds.path:
            return Path(ds.path).name or ds.path
        if ds.bag:
            return f"bag {Path(ds.bag).name or ds.bag}"
        return "?"

    def dropped_images(self, formulation: str) -> set[int]:
        """The images whose frame the node never answered in ``formulation`` (missed or failed,
        by the replay's trace): no prediction there says nothing of the model. Empty for runs
        that did not come through ROS."""
        from probench.cache.trace import ANSWERED, latest_frames

        return {int(r["image_id"]) for r in latest_frames(self.trace)
                if r.get("formulation") == formulation and r.get("status") != ANSWERED}  # fmt: skip

    def dataset_hash(self) -> str | None:
        """The content hash of the dataset the row was scored on: metrics.json
        ``dataset_hash``, else run.json's ``dataset.hash`` (the one it was made on)."""
        return self.metrics.dataset_hash or self.info.dataset.hash or None

    def interval(self, column: str) -> tuple[float, float] | None:
        """The bootstrap's 95% interval of a Table II column (metrics.json ``intervals``), or
        None. ``map50``/``map75``/``map50_95`` are orig's, ``m_cat``/``m_tmpl`` the mAP.5 of
        cat/tmpl; the others are top-level keys (``delta_max``, ``pcr50``, ``delta_orig_cat``...)."""
        iv = self.metrics.intervals
        if iv is None:
            return None
        if column in AP_KEYS:
            v = iv.by_formulation.get("orig", {}).get(column)
        elif column in FORMULATION_COLUMNS:
            v = iv.by_formulation.get(FORMULATION_COLUMNS[column], {}).get(MAP50)
        else:
            found = getattr(iv, column, None)
            v = found if isinstance(found, list) else None
        return None if v is None else (v[0], v[1])

    def best_support(self) -> float | None:
        """The share of bootstrap resamples in which k* is the best formulation, or None."""
        return None if self.metrics.intervals is None else self.metrics.intervals.best_formulation_support

    def text(self, column: str) -> str | None:
        v = getattr(self.metrics, column, None)
        return None if v is None else str(v)

    @property
    def latency_std(self) -> float | None:
        return None if self.metrics.latency_ms is None else self.metrics.latency_ms.std

    def ap_by_iou(self, formulation: str) -> dict[float, float] | None:
        """The IoU sweep of one formulation as {threshold: AP}, or None when not scored."""
        rec = self.metrics.by_formulation.get(formulation)
        if rec is None:
            return None
        out = {}
        for key, v in rec.ap_by_iou.items():
            try:
                t = float(key)
            except ValueError as exc:
                where = f"{self.path / METRICS_FILE if self.path else self.label}"
                raise ReportError(f"{where}: by_formulation.{formulation}.ap_by_iou: threshold key "
                                  f"{key!r} is not a number") from exc
            if v is not None:
                out[t] = v
        return dict(sorted(out.items())) or None


class RosLatency(NamedTuple):
    """The end-to-end latency ``probench eval`` measured through ROS 2 (ms)."""

    mean: float
    p95: float | None
    mode: str
    rate_hz: float | None


# -- run folders ------------------------------------------------------------------------------
def load_run(path: str | Path, dataset: str | Path | None = None, *, bootstrap: int = 0) -> Entry:
    """An :class:`Entry` from a run folder, scoring it when it has no metrics.json (with
    ``bootstrap`` resamples for its intervals)."""
    from probench.cache.run import RunDir
    from probench.cache.trace import TRACE_FILE, read_trace

    run = RunDir(path)
    if not run.path.is_dir():
        raise ReportUsageError(f"{run.path}: no such run folder")
    if not (run.path / RUN_FILE).is_file():
        raise ReportUsageError(
            f"{run.path}: no run.json, so not a probench run folder; give the folder that "
            "`probench infer` or `probench eval` wrote (its --out)"
        )
    info = run.info  # RecordError (exit 1, one line) if run.json is malformed
    # validated: a NaN, an infinity or an AP of -5 is refused, naming the file and the key
    metrics = run.read_record(METRICS_FILE, MetricsRecord)
    scored_now = metrics is None
    if metrics is None:
        metrics = _score(run, info, dataset, bootstrap)
    model = info.model
    label = str(model.paper_name or model.name or run.path.resolve().name)
    if model.paper_name and (model.name or "").startswith("tiny-"):
        label += TINY_MARK
    if model.random_weights is True:
        label += RANDOM_MARK
    # scale variants are known by the paper's names (a zoo "family" like "owl" also spans
    # OWL-ViT and OWLv2, which are different architectures)
    family = PAPER_FAMILIES.get(str(model.paper_name))
    return Entry(label, metrics, path=run.path, info=info, family=family, scored_now=scored_now,
                 trace=read_trace(run.path / TRACE_FILE),
                 latency=run.read_record(LATENCY_FILE, LatencyRecord))


def _score(run: RunDir, info: RunRecord, dataset: str | Path | None, bootstrap: int = 0) -> MetricsRecord:
    ds_path = dataset if dataset is not None else info.dataset.path
    where = run.path
    if not ds_path:
        raise ReportError(
            f"{where}: no metrics.json and no dataset to score it with (run.json names none); "
            "run `probench score` first or pass --dataset"
        )
    from probench.data import load_dataset
    from probench.scoring import score_run

    try:
        data = load_dataset(ds_path, check_files=False)
    except ProbenchError as exc:
        # a DatasetError lists every problem on its own line: keep the headline, name the run
        first = str(exc).splitlines()[0]
        raise ReportError(f"{where}: cannot score it (no metrics.json): {first}") from exc
    return score_run(data, where, bootstrap=bootstrap, errors=True)


def check_datasets(entries: list[Entry], *, allow_mismatch: bool = False) -> bool:
    """Refuse runs scored on different datasets (:meth:`Entry.dataset_hash`: metrics.json
    ``dataset_hash``, else run.json's ``dataset.hash``): their rows are not comparable. With
    ``allow_mismatch`` they are reported, each run's label marked with its dataset
    (``[dataset NAME sha256:abcd1234]``); returns whether the datasets differ. Runs with no
    hash in either file are not compared."""
    by_hash: dict[str, list[Entry]] = {}
    for e in entries:
        h = e.dataset_hash()
        if not e.reference and h:
            by_hash.setdefault(h, []).append(e)
    if len(by_hash) < 2:
        return False
    if not allow_mismatch:
        groups = "; ".join(
            f"{', '.join(e.label for e in group)} on {group[0].dataset_name()} ({h[:15]}...)"
            for h, group in by_hash.items()
        )
        raise ReportError(
            f"the runs were made on {len(by_hash)} different datasets ({groups}): their rows are not "
            "comparable; report them separately, or pass --allow-dataset-mismatch (the rows are then marked)"
        )
    for h, group in by_hash.items():
        for e in group:
            e.label += f" [dataset {e.dataset_name()} {h.split(':')[-1][:8]}]"
    return True


def disambiguate(entries: list[Entry]) -> None:
    """Give rows that share a label the run folder's name, so that every row is told apart."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.label] = counts.get(e.label, 0) + 1
    for e in entries:
        if counts[e.label] > 1 and e.path is not None:
            e.label = f"{e.label} [{e.path.resolve().name}]"
    seen: dict[str, int] = {}
    for e in entries:  # same folder name twice (different parents): number them
        n = seen.get(e.label, 0)
        seen[e.label] = n + 1
        if n:
            e.label = f"{e.label} #{n + 1}"


# -- reference tables ------------------------------------------------------------------------
def load_reference(path: str | Path) -> list[Entry]:
    """Rows of a CSV with Table II's columns (e.g. the packaged paper_table2.csv), labelled "(paper)".

    Extra columns are ignored; an empty cell is a missing value; anything else malformed
    is a one-line :class:`ReportError` naming the line.
    """
    from probench.files import read_user_bytes

    path = Path(path)
    if not path.is_file():
        raise ReportUsageError(f"{path}: no such reference table")
    try:  # the bounded reader: a regular file under the CSV size cap (docs/SECURITY.md)
        text = read_user_bytes(path, what="reference table", kind="csv").decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportError(f"{path}: cannot read: {exc}") from exc
    try:
        rows = list(csv.DictReader(text.splitlines()))
        header = csv.DictReader(text.splitlines()).fieldnames or []
    except csv.Error as exc:
        raise ReportError(f"{path}: not a valid CSV: {exc}") from exc
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ReportError(f"{path}: not a Table II CSV: missing column(s) {', '.join(missing)}")
    if not rows:
        raise ReportError(f"{path}: no rows")
    entries = []
    for line, row in enumerate(rows, start=2):
        if None in row:  # DictReader puts surplus cells under the key None
            raise ReportError(f"{path} line {line}: more cells than columns")
        name = (row.get("model") or "").strip()
        if not name:
            raise ReportError(f"{path} line {line}: empty model name")
        values: dict[str, object] = {}
        for col in NUMERIC:
            cell = (row.get(col) or "").strip()
            if not cell:
                continue
            try:
                value = float(cell)
            except ValueError as exc:
                raise ReportError(f"{path} line {line}: {col} {cell!r} is not a number") from exc
            if not math.isfinite(value):
                raise ReportError(f"{path} line {line}: {col} {cell!r} is not a finite number")
            values[col] = value
        best = (row.get(BEST_FORMULATION) or "").strip()
        if best and best not in (*FORMULATIONS, TIE_TEXT):
            allowed = ", ".join((*FORMULATIONS, TIE_TEXT))
            raise ReportError(f"{path} line {line}: best_formulation {best!r} is not one of {allowed}")
        metrics = _reference_metrics(values, best, f"{path} line {line}")
        entries.append(Entry(name + PAPER_MARK, metrics, reference=True, family=PAPER_FAMILIES.get(name)))
    return entries


def _reference_metrics(values: dict[str, object], best: str, where: str) -> MetricsRecord:
    """A published row's numbers as a metrics record (checked as a file's are: an AP of 5
    is refused, naming the line and the column); ``best`` is its best_formulation cell."""
    from probench.cache.records import parse_record

    latency = values.pop(LATENCY_COLUMN, None)
    record = parse_record(MetricsRecord, values, where).updated(best_formulation=best if best in FORMULATIONS
                                                                else None)
    if best == TIE_TEXT:  # as our table2.csv writes an all-formulation tie
        record = record.updated(best_formulation_ties=list(FORMULATIONS))
    if latency is not None:
        record = record.updated(latency_ms=parse_record(Stats, {"mean": latency}, where))
    return record


def recorded_dataset(runs: Sequence[tuple[str, RunRecord]]) -> tuple[Dataset | None, str | None]:
    """The dataset the runs (``(name, run.json)`` pairs) were made on, found without
    ``--dataset``: the first folder their run.json records (``dataset.path``, or for a bag run
    ``dataset.made_from``, the folder the bag was made from) that still exists and whose
    annotations still have the run's hash. (None, why in one line) otherwise: no folder
    recorded, the folder moved, or its annotations changed since the run."""
    from probench.data import load_dataset

    problems: list[str] = []
    for name, info in runs:
        ds = info.dataset
        for folder in dict.fromkeys(f for f in (ds.path, ds.made_from) if f):
            if not Path(folder).is_dir():
                problems.append(f"{name}: the dataset folder its run.json records, {folder}, is gone "
                                "(moved or removed)")
                continue
            try:
                data = load_dataset(folder, check_files=False)
            except ProbenchError as exc:
                why = str(exc).splitlines()[0]
                problems.append(f"{name}: the dataset folder {folder} does not load: {why}")
                continue
            if ds.hash and data.content_hash != ds.hash:
                problems.append(f"{name}: the dataset folder {folder} has changed since the run (its "
                                f"annotations hash {data.content_hash[:19]}, the run's {ds.hash[:19]})")
                continue
            return data, None
    if not problems:
        return None, ("the runs' run.json records no dataset folder (a bag made with --no-dataset-folder, "
                      "or before probench recorded it)")
    return None, problems[0]
