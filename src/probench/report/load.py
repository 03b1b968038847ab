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
from typing import TYPE_CHECKING, Any

from probench.errors import ProbenchError
from probench.report.errors import ReportError, ReportUsageError
from probench.scoring.suite import TIE_TEXT, json_object
from probench.vocabulary import FORMULATIONS

if TYPE_CHECKING:
    from probench.cache.run import RunDir

# The columns of the paper's Table II, in order (probench/report/data/paper_table2.csv).
COLUMNS: tuple[str, ...] = (
    "model", "map50", "map75", "map50_95", "latency_ms", "m_cat", "m_tmpl",
    "delta_max", "best_formulation", "pcr50", "plc",
)  # fmt: skip
NUMERIC: tuple[str, ...] = tuple(c for c in COLUMNS if c not in ("model", "best_formulation"))
RANDOM_MARK = " (random weights)"
TINY_MARK = " tiny"  # a tiny-<name> test variant: the adapter's code path, not the real architecture
PAPER_MARK = " (paper)"
ROS_LATENCY = "latency_ros_ms"  # Table II's Markdown: the end-to-end latency probench eval measured

# Scale variants of one architecture in the paper's Table II (Fig. 5 joins them with dashes).
PAPER_FAMILIES: dict[str, str] = {
    "OWLv2-L": "owlv2", "OWLv2-B": "owlv2", "YOLOE-X": "yoloe", "YOLOE-S": "yoloe",
    "YOLO-W-X": "yolo-world", "YOLO-W-S": "yolo-world", "MM-G-D-L": "mm-gdino", "MM-G-D-T": "mm-gdino",
}  # fmt: skip


@dataclass
class Entry:
    """One row of the report: a run of the user's, or a published reference row."""

    label: str
    metrics: dict[str, Any]
    reference: bool = False
    path: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)  # run.json
    family: str | None = None
    scored_now: bool = False  # metrics computed by the report (no metrics.json)
    trace: list[dict[str, Any]] = field(default_factory=list)  # realtime_frames.jsonl of a ROS replay
    latency: dict[str, Any] = field(default_factory=dict)  # latency.json: its protocol, how it was isolated

    def number(self, column: str) -> float | None:
        """A Table II numeric column (``latency_ms`` is the latency mean of the offline
        protocol; ``latency_ros_ms`` the mean end-to-end latency ``probench eval`` measured
        through ROS 2, :meth:`ros_latency`)."""
        if column == "latency_ms":
            lat = self.metrics.get("latency_ms")
            return _num(lat.get("mean"), self._where("latency_ms.mean")) if isinstance(lat, dict) else None
        if column == ROS_LATENCY:
            ros = self.ros_latency()
            return None if ros is None else ros["mean"]
        return _num(self.metrics.get(column), self._where(column))

    @property
    def random_weights(self) -> bool:
        """A run of a model with random weights: never ranked, never on a frontier (it tests
        the pipeline, not the model)."""
        return json_object(json_object(self.info).get("model")).get("random_weights") is True

    def ros_latency(self) -> dict[str, Any] | None:
        """What ``probench eval`` measured through the ROS 2 graph (metrics.json
        ``realtime``): ``mean``, ``p95`` (ms, warm-up frames excluded), ``mode``,
        ``rate_hz``; None for runs that did not come through ROS."""
        rt = self.metrics.get("realtime")
        lat = rt.get("latency_ms") if isinstance(rt, dict) else None
        if not isinstance(rt, dict) or not isinstance(lat, dict):
            return None
        mean = _num(lat.get("mean"), self._where("realtime.latency_ms.mean"))
        if mean is None:
            return None
        return {"mean": mean, "p95": _num(lat.get("p95"), self._where("realtime.latency_ms.p95")),
                "mode": str(rt.get("mode") or "?"),
                "rate_hz": _num(rt.get("rate_hz"), self._where("realtime.rate_hz"))}

    def ros_latency_text(self) -> str:
        """How the ROS 2 latency was taken, for notes and figure labels: "ROS 2, camera-rate 30 Hz"."""
        ros = self.ros_latency() or {}
        rate = f" {ros['rate_hz']:g} Hz" if ros.get("rate_hz") and ros.get("mode") == "camera-rate" else ""
        return f"ROS 2, {ros.get('mode', '?')}{rate}"

    def dataset_name(self) -> str:
        """The dataset a run was made on, as people name it: its folder, or the bag it was
        replayed from (``bag NAME``); "?" when run.json says nothing."""
        ds = json_object(json_object(self.info).get("dataset"))
        if ds.get("path"):
            return Path(str(ds["path"])).name or str(ds["path"])
        if ds.get("bag"):
            return f"bag {Path(str(ds['bag'])).name or ds['bag']}"
        return "?"

    def dataset_hash(self) -> str | None:
        """The content hash of the dataset the row was scored on: metrics.json
        ``dataset_hash``, else run.json's ``dataset.hash`` (the one it was made on)."""
        made_on = json_object(json_object(self.info).get("dataset")).get("hash")
        for h in (self.metrics.get("dataset_hash"), made_on):
            if isinstance(h, str) and h:
                return h
        return None

    def interval(self, column: str) -> tuple[float, float] | None:
        """The bootstrap's 95% interval of a Table II column (metrics.json ``intervals``), or
        None. ``map50``/``map75``/``map50_95`` are orig's, ``m_cat``/``m_tmpl`` the mAP.5 of
        cat/tmpl; the others are top-level keys (``delta_max``, ``pcr50``, ``delta_orig_cat``...)."""
        iv = json_object(self.metrics.get("intervals"))
        by = json_object(iv.get("by_formulation"))
        if column in ("map50", "map75", "map50_95"):
            v, key = json_object(by.get("orig")).get(column), f"intervals.by_formulation.orig.{column}"
        elif column in ("m_cat", "m_tmpl", "m_orig", "m_policy"):
            f = column[2:]
            v, key = json_object(by.get(f)).get("map50"), f"intervals.by_formulation.{f}.map50"
        else:
            v, key = iv.get(column), f"intervals.{column}"
        if v is None:
            return None
        if not (isinstance(v, list) and len(v) == 2):
            raise ReportError(f"{self._where(key)} is {v!r}, not an interval [low, high]")
        lo, hi = _num(v[0], self._where(key)), _num(v[1], self._where(key))
        return None if lo is None or hi is None else (lo, hi)

    def best_support(self) -> float | None:
        """The share of bootstrap resamples in which k* is the best formulation, or None."""
        return _num(json_object(self.metrics.get("intervals")).get("best_formulation_support"),
                    self._where("intervals.best_formulation_support"))

    def text(self, column: str) -> str | None:
        v = self.metrics.get(column)
        return None if v is None else str(v)

    @property
    def latency_std(self) -> float | None:
        lat = self.metrics.get("latency_ms")
        return _num(lat.get("std"), self._where("latency_ms.std")) if isinstance(lat, dict) else None

    def ap_by_iou(self, formulation: str) -> dict[float, float] | None:
        """The IoU sweep of one formulation as {threshold: AP}, or None when not scored."""
        by = self.metrics.get("by_formulation")
        rec = by.get(formulation) if isinstance(by, dict) else None
        sweep = rec.get("ap_by_iou") if isinstance(rec, dict) else None
        if not isinstance(sweep, dict):
            return None
        out = {}
        for key, v in sweep.items():
            try:
                t = float(key)
            except ValueError as exc:
                where = self._where(f"by_formulation.{formulation}.ap_by_iou")
                raise ReportError(f"{where}: threshold key {key!r} is not a number") from exc
            val = _num(v, self._where(f"by_formulation.{formulation}.ap_by_iou[{key}]"))
            if val is not None:
                out[t] = val
        return dict(sorted(out.items())) or None

    def _where(self, key: str) -> str:
        return f"{self.path / 'metrics.json' if self.path else self.label}: {key}"


def _num(v: object, where: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ReportError(f"{where} is {v!r}, not a number")
    return float(v) if math.isfinite(v) else None


# -- run folders ------------------------------------------------------------------------------
def load_run(path: str | Path, dataset: str | Path | None = None, *, bootstrap: int = 0) -> Entry:
    """An :class:`Entry` from a run folder, scoring it when it has no metrics.json (with
    ``bootstrap`` resamples for its intervals)."""
    from probench.cache.run import RunDir
    from probench.cache.trace import TRACE_FILE, read_trace

    run = RunDir(path)
    if not run.path.is_dir():
        raise ReportUsageError(f"{run.path}: no such run folder")
    if not (run.path / "run.json").is_file():
        raise ReportUsageError(
            f"{run.path}: no run.json, so not a probench run folder; give the folder that "
            "`probench infer` or `probench eval` wrote (its --out)"
        )
    info = run.info  # CacheError (exit 1, one line) if run.json is malformed or not an object
    metrics = run.read_json("metrics.json")
    scored_now = False
    if metrics is None:
        metrics = _score(run, info, dataset, bootstrap)
        scored_now = True
    if not isinstance(metrics, dict):
        raise ReportError(f"{run.path / 'metrics.json'}: expected a JSON object")
    model = json_object(info.get("model"))
    label = str(model.get("paper_name") or model.get("name") or run.path.resolve().name)
    if model.get("paper_name") and str(model.get("name", "")).startswith("tiny-"):
        label += TINY_MARK
    if model.get("random_weights") is True:
        label += RANDOM_MARK
    # scale variants are known by the paper's names (a zoo "family" like "owl" also spans
    # OWL-ViT and OWLv2, which are different architectures)
    family = PAPER_FAMILIES.get(str(model.get("paper_name")))
    latency = run.read_json("latency.json")
    return Entry(label, metrics, path=run.path, info=info, family=family, scored_now=scored_now,
                 trace=read_trace(run.path / TRACE_FILE),
                 latency=json_object(latency))  # fmt: skip


def _score(
    run: RunDir, info: dict[str, Any], dataset: str | Path | None, bootstrap: int = 0
) -> dict[str, Any]:
    ds = json_object(info.get("dataset"))
    ds_path = dataset if dataset is not None else ds.get("path")
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
        metrics: dict[str, Any] = {}
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
            if col == "latency_ms":
                metrics["latency_ms"] = {"mean": value}
            else:
                metrics[col] = value
        best = (row.get("best_formulation") or "").strip()
        if best and best not in (*FORMULATIONS, TIE_TEXT):
            allowed = ", ".join((*FORMULATIONS, TIE_TEXT))
            raise ReportError(f"{path} line {line}: best_formulation {best!r} is not one of {allowed}")
        metrics["best_formulation"] = best if best in FORMULATIONS else None
        if best == TIE_TEXT:  # as our table2.csv writes an all-formulation tie
            metrics["best_formulation_ties"] = list(FORMULATIONS)
        entries.append(Entry(name + PAPER_MARK, metrics, reference=True, family=PAPER_FAMILIES.get(name)))
    return entries
