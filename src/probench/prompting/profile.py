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
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from probench.errors import CheckFailed
from probench.vocabulary import FORMULATIONS

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
        models = {m: {"best": k, **({"map50": dict(self.map50[m])} if m in self.map50 else {})}
                  for m, k in sorted(self.best.items())}
        return {"probench_profile": PROFILE_VERSION, "source": self.source, "models": models}


def _check_best(where: str, model: str, best: object) -> str:
    if best not in FORMULATIONS:
        raise ProfileError(f"{where}: model {model!r}: best must be one of {', '.join(FORMULATIONS)}, "
                           f"got {best!r}")
    return str(best)


def default_profile() -> Profile:
    """The paper's Table II (k* per row; a tie counts as orig, i.e. as typed)."""
    text = (resources.files("probench.report") / "data" / "paper_table2.csv").read_text(encoding="utf-8")
    best: dict[str, str] = {}
    map50: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        name = row["model"]
        k = row["best_formulation"].strip()
        best[name] = k if k in FORMULATIONS else "orig"
        map50[name] = {"orig": float(row["map50"]), "cat": float(row["m_cat"]), "tmpl": float(row["m_tmpl"])}
    return Profile("paper Table II", best, map50, is_default=True)


def load_profile(path: str | Path | None) -> Profile:
    """The profile at ``path``; None or ``paper``: the default (Table II). A
    :class:`ProfileError` (one line) when the file is missing or not a valid profile."""
    if path is None or str(path) in ("", DEFAULT_PROFILE_NAME):
        return default_profile()
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"profile {p}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProfileError(f"profile {p}: not readable JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("probench_profile") != PROFILE_VERSION:
        raise ProfileError(f"profile {p}: not a probench profile (expected \"probench_profile\": "
                           f"{PROFILE_VERSION}; build one with `probench profile RUN... --out PROFILE`)")
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise ProfileError(f"profile {p}: \"models\" must be a non-empty object")
    best: dict[str, str] = {}
    map50: dict[str, dict[str, float]] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict):
            raise ProfileError(f"profile {p}: model {name!r}: expected an object with \"best\"")
        best[str(name)] = _check_best(f"profile {p}", name, entry.get("best"))
        m = entry.get("map50")
        if isinstance(m, dict):
            map50[str(name)] = {k: float(v) for k, v in m.items() if k in FORMULATIONS and v is not None}
    return Profile(str(data.get("source") or p), best, map50)


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
        try:
            info = json.loads((r / "run.json").read_text(encoding="utf-8"))
            metrics = json.loads((r / "metrics.json").read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ProfileError(f"{r}: no {Path(str(exc.filename)).name} (score the run first: "
                               f"`probench score --dataset D --run {r}`)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProfileError(f"{r}: unreadable run.json/metrics.json ({exc})") from None
        name = str((info.get("model") or {}).get("name") or "")
        by = metrics.get("by_formulation") or {}
        vals = {f: float(v) for f in FORMULATIONS if (v := (by.get(f) or {}).get("map50")) is not None}
        if not name or len(vals) < 2:
            raise ProfileError(f"{r}: needs a model name and mAP.5 of at least two of "
                               f"{', '.join(FORMULATIONS)} (run and score them all)")
        top = max(vals.values())
        winners = [f for f, v in vals.items() if v == top]
        best[name] = winners[0] if len(winners) == 1 else "orig"
        map50[name] = vals
        warnings += _doubts(r, name, info.get("model") or {}, vals, winners)
    if not best:
        raise ProfileError("no runs given")
    return Profile("runs: " + ", ".join(str(Path(r)) for r in runs), best, map50, warnings=tuple(warnings))


def _doubts(run: Path, name: str, model: Mapping[str, Any], vals: Mapping[str, float],
            winners: Sequence[str]) -> list[str]:
    """Why ``run``'s k* may mean nothing: a model without trained weights (random weights,
    a scripted test detector), or formulations that tie (k* is then orig by the rule)."""
    out = []
    if model.get("random_weights") or model.get("weights_source") == "scripted":
        kind = "a scripted test detector" if model.get("weights_source") == "scripted" else "random weights"
        out.append(f"{run}: {name} has {kind}: its mAP.5, and so its best formulation, mean nothing "
                   "(profile a run with the model's real weights)")
    if len(winners) > 1:
        tied = ", ".join(winners)
        out.append(f"{run}: {name}: {tied} tie at mAP.5 {max(vals.values()):.3f}, so its best is orig by the "
                   "tie rule, not by a measured difference")
    return out
