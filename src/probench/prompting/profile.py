"""Formulation profiles: which formulation (orig, cat or tmpl) grounds best for each model.

A profile is a JSON file::

    {"probench_profile": 1,
     "source": "paper Table II" | "runs: ...",
     "models": {"OWLv2-B": {"best": "tmpl", "map50": {"orig": 0.507, "cat": 0.492, "tmpl": 0.509}},
                "tiny-owlv2": {"best": "cat", ...}}}

``best`` is the model's k* (one of orig, cat, tmpl); ``map50`` is optional (what k* was read
from). A model is looked up by its zoo name first, then by its Table II row name. The default
profile is the paper's Table II, shipped as package data (``probench/report/data/
paper_table2.csv``, read as data: no import of the report room). ``probench profile RUN...
--out PROFILE`` builds one from scored runs (their ``metrics.json`` and ``run.json``).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probench.errors import CheckFailed
from probench.files import UserFileError, read_user_json
from probench.vocabulary import FORMULATIONS

if TYPE_CHECKING:
    from probench.cache.records import MetricsRecord, RunModel, RunRecord

__all__ = ["DEFAULT_PROFILE_NAME", "Profile", "ProfileError", "default_profile", "load_profile",
           "profile_from_runs"]

PROFILE_VERSION = 1
DEFAULT_PROFILE_NAME = "paper"  # `--profile paper`: the shipped Table II (the default)


class ProfileError(CheckFailed):
    """A profile file that cannot be read, or that is not a valid profile."""


@dataclass(frozen=True)
class Profile:
    """model name -> k* (orig, cat or tmpl), and where the figures came from."""

    source: str
    best: Mapping[str, str]
    map50: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    is_default: bool = False
    warnings: tuple[str, ...] = ()  # why a k* read from runs may mean nothing (random weights, a tie)

    def lookup(self, *names: str) -> str | None:
        """k* of the first of ``names`` (zoo name, then Table II row) the profile lists."""
        for name in names:
            if name and name in self.best:
                return self.best[name]
        return None

    def as_json(self) -> dict[str, Any]:
        from probench.cache.records import MAP50  # the profile's key of a model's mAP.5 per formulation

        models = {m: {"best": k, **({MAP50: dict(self.map50[m])} if m in self.map50 else {})}
                  for m, k in sorted(self.best.items())}
        return {"probench_profile": PROFILE_VERSION, "source": self.source, "models": models}


def _check_best(where: str, model: str, best: object) -> str:
    if best not in FORMULATIONS:
        raise ProfileError(f"{where}: model {model!r}: best must be one of {', '.join(FORMULATIONS)}, "
                           f"got {best!r}")
    return str(best)


def default_profile() -> Profile:
    """The paper's Table II (k* per row; a tie counts as orig, i.e. as typed)."""
    from probench.cache.records import BEST_FORMULATION, MAP50, m_key  # Table II's columns

    text = (resources.files("probench.report") / "data" / "paper_table2.csv").read_text(encoding="utf-8")
    best: dict[str, str] = {}
    map50: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        name = row["model"]
        k = row[BEST_FORMULATION].strip()
        best[name] = k if k in FORMULATIONS else "orig"  # Table II's mAP.5 columns: orig's, m_cat, m_tmpl
        map50[name] = {f: float(row[MAP50 if f == "orig" else m_key(f)]) for f in FORMULATIONS}
    return Profile("paper Table II", best, map50, is_default=True)


def load_profile(path: str | Path | None) -> Profile:
    """The profile at ``path``; None or ``paper``: the default (Table II). A
    :class:`ProfileError` (one line) when the file is missing or not a valid profile."""
    if path is None or str(path) in ("", DEFAULT_PROFILE_NAME):
        return default_profile()
    p = Path(path)
    try:
        data = read_user_json(p, what="profile")  # bounded: regular file, size and nesting caps
    except UserFileError as exc:
        raise ProfileError(str(exc)) from None
    version = data.get("probench_profile") if isinstance(data, dict) else None
    if type(version) is not int or version != PROFILE_VERSION:  # (true == 1 in Python: not a version)
        raise ProfileError(f"profile {p}: not a probench profile (expected \"probench_profile\": "
                           f"{PROFILE_VERSION}; build one with `probench profile RUN... --out PROFILE`)")
    assert isinstance(data, dict)
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise ProfileError(f"profile {p}: \"models\" must be a non-empty object")
    source = data.get("source")
    if source is not None and not isinstance(source, str):
        raise ProfileError(f"profile {p}: \"source\" must be a string, not {type(source).__name__}")
    from probench.cache.records import MAP50

    best: dict[str, str] = {}
    map50: dict[str, dict[str, float]] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict):
            raise ProfileError(f"profile {p}: model {name!r}: expected an object with \"best\"")
        best[str(name)] = _check_best(f"profile {p}", name, entry.get("best"))
        m = entry.get(MAP50)
        if m is not None:
            map50[str(name)] = _check_map50(f"profile {p}: model {name!r}", m)
    return Profile(source or str(p), best, map50)


def _check_map50(where: str, m: object) -> dict[str, float]:
    """A profile's ``map50`` object: formulation -> a finite number in [0, 1] (or null)."""
    if not isinstance(m, dict):
        raise ProfileError(f"{where}: \"map50\" must be an object, not {type(m).__name__}")
    out: dict[str, float] = {}
    for k, v in m.items():
        if k not in FORMULATIONS or v is None:
            continue
        if not _is_score(v):
            raise ProfileError(f"{where}: map50 {k!r} must be a number in [0, 1], got {v!r}")
        out[k] = float(v)
    return out


def _is_score(v: object) -> bool:
    """A finite number in [0, 1] (a bool is not a number here)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0.0 <= v <= 1.0


def profile_from_runs(runs: Sequence[str | Path]) -> Profile:
    """A profile from scored run folders: each run's model (run.json ``model.name``) gets the
    k* of its metrics.json (mAP.5 over orig, cat, tmpl; a tie counts as orig). A later run of
    the same model replaces an earlier one. ``warnings``: a run of a model without trained
    weights, or whose formulations tie."""
    best: dict[str, str] = {}
    map50: dict[str, dict[str, float]] = {}
    warnings: list[str] = []
    for run in runs:
        r = Path(run)
        info, metrics = _scored_run(r)
        model = info.model
        name = model.name
        vals = {f: m50 for f in FORMULATIONS if (m50 := metrics.formulation(f).map50) is not None}
        if not name or len(vals) < 2:
            raise ProfileError(f"{r}: needs a model name and mAP.5 of at least two of "
                               f"{', '.join(FORMULATIONS)} (run and score them all)")
        top = max(vals.values())
        winners = [f for f, v in vals.items() if v == top]
        best[name] = winners[0] if len(winners) == 1 else "orig"
        map50[name] = vals
        warnings += _doubts(r, name, model, vals, winners)
    if not best:
        raise ProfileError("no runs given")
    return Profile("runs: " + ", ".join(str(Path(r)) for r in runs), best, map50, warnings=tuple(warnings))


def _scored_run(r: Path) -> tuple[RunRecord, MetricsRecord]:
    """A scored run's run.json and metrics.json, read and validated (a NaN or an AP out of
    [0, 1] is named with its file and key); a :class:`ProfileError` in one line otherwise."""
    from probench.cache.records import METRICS_FILE, RUN_FILE, MetricsRecord, RunRecord
    from probench.cache.run import RunDir

    run = RunDir(r)
    try:
        info = run.read_record(RUN_FILE, RunRecord)
        metrics = run.read_record(METRICS_FILE, MetricsRecord)
    except CheckFailed as exc:  # unreadable (the bounded reader) or not its record
        raise ProfileError(str(exc)) from None
    if info is None or metrics is None:
        missing = RUN_FILE if info is None else METRICS_FILE
        raise ProfileError(f"{r}: no {missing} (score the run first: `probench score --dataset D --run {r}`)")
    return info, metrics


def _doubts(run: Path, name: str, model: RunModel, vals: Mapping[str, float],
            winners: Sequence[str]) -> list[str]:
    """Why ``run``'s k* may mean nothing: a model without trained weights (random weights,
    a scripted test detector), or formulations that tie (k* is then orig by the rule)."""
    out = []
    if model.random_weights or model.weights_source == "scripted":
        kind = "a scripted test detector" if model.weights_source == "scripted" else "random weights"
        out.append(f"{run}: {name} has {kind}: its mAP.5, and so its best formulation, mean nothing "
                   "(profile a run with the model's real weights)")
    if len(winners) > 1:
        tied = ", ".join(winners)
        out.append(f"{run}: {name}: {tied} tie at mAP.5 {max(vals.values()):.3f}, so its best is orig by the "
                   "tie rule, not by a measured difference")
    return out
