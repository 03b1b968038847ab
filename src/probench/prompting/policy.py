"""Prompt policies: what a detector is given for the operator's prompts, and the way back.

- ``as_typed`` (default): the query as typed (an explicit ``ORIG => CAT`` form gives ORIG);
- ``categorical``: the derived (or explicit) categorical form (:mod:`.derive`);
- ``template``: the paper's template, ``"a photo of " + orig``;
- ``best``: the loaded model's k* from a formulation profile (:mod:`.profile`; default the
  paper's Table II); a model the default profile lacks is given its prompts as typed, with
  one warning; a profile the user gave that lacks it is refused;
- ``ensemble``: all three forms of every prompt in the same call (one expanded prompt set:
  OWL, YOLO-World, YOLOE and OmDet encode the image once; the Grounding DINO family reads one
  longer caption), the boxes fused per operator prompt (:mod:`.fusion`).

:meth:`PromptPolicy.plan` turns operator prompts into a :class:`PromptPlan`: the distinct
texts the model gets (identical texts asked once, so a text cache keyed by prompt text keeps
working) and, per model text, the operator prompts it answers. :meth:`PromptPlan.to_operator`
maps detections back, so every box names the operator's prompt (``class_id``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from probench.detections import Detections
from probench.errors import UsageError
from probench.prompting.derive import Formulations, derive
from probench.prompting.profile import Profile, load_profile

__all__ = ["DEFAULT_POLICY", "POLICIES", "PolicyError", "PromptPlan", "PromptPolicy", "check_policy_name",
           "resolve_policy"]

POLICIES: tuple[str, ...] = ("as_typed", "categorical", "template", "best", "ensemble")
DEFAULT_POLICY = "as_typed"
# the formulation each single-form policy gives the model
_FORM = {"as_typed": "orig", "categorical": "cat", "template": "tmpl"}
_PLAN_CACHE = 256  # prompt sets whose plans are kept (per policy object)


class PolicyError(UsageError):
    """An unknown policy, or ``best`` with a profile that lacks the model."""


class _Detector(Protocol):
    def detect(self, image: np.ndarray, prompts: Sequence[str] | None = None) -> Detections: ...


def check_policy_name(name: str) -> str:
    if name not in POLICIES:
        raise PolicyError(f"unknown prompt policy {name!r}; expected one of {', '.join(POLICIES)}")
    return name


@dataclass(frozen=True)
class PromptPlan:
    """Operator prompts -> the model's texts, and the way back."""

    operator: tuple[str, ...]  # the operator's prompts (explicit forms removed): the class ids
    model_texts: tuple[str, ...]  # distinct texts the model gets
    owners: tuple[tuple[int, ...], ...]  # owners[m]: operator prompts model text m answers
    forms: tuple[Formulations, ...]
    fuse: bool = False  # ensemble: boxes fused per operator prompt

    @property
    def fallbacks(self) -> int:
        """Prompts whose derivation found no noun phrase (given as typed)."""
        return sum(f.fallback for f in self.forms)

    def given(self) -> dict[str, str]:
        """operator prompt -> what the model gets (``"a | b"`` for an ensemble)."""
        out: dict[str, list[str]] = {p: [] for p in self.operator}
        for text, owners in zip(self.model_texts, self.owners, strict=True):
            for o in owners:
                out[self.operator[o]].append(text)
        return {p: " | ".join(t) for p, t in out.items()}

    def to_operator(self, dets: Detections) -> Detections:
        """Detections over ``model_texts`` -> detections over ``operator`` (a box of a text
        shared by several operator prompts is given to each; an ensemble's are fused)."""
        identity = all(len(o) == 1 and o[0] == m for m, o in enumerate(self.owners))
        if identity and len(self.model_texts) == len(self.operator):
            return dets
        rows: list[int] = []
        index: list[int] = []
        for m, owners in enumerate(self.owners):
            sel = np.flatnonzero(dets.prompt_index == m)
            for o in owners:
                rows.extend(sel.tolist())
                index.extend([o] * len(sel))
        order = np.asarray(rows, dtype=np.int64)
        masks = None if dets.masks is None else dets.masks[order]
        out = Detections(dets.xyxy[order], dets.scores[order], np.asarray(index, dtype=np.int64), masks,
                         dets.timings_ms)
        if self.fuse:
            from probench.prompting.fusion import fuse

            out = fuse(out)
        return out

    def detect(self, detector: _Detector, image: np.ndarray) -> Detections:
        """One call of the detector with the model's texts, answered per operator prompt."""
        if not self.operator:
            return Detections.empty()
        return self.to_operator(detector.detect(image, list(self.model_texts)))


@dataclass
class PromptPolicy:
    """A resolved policy: its name, the formulation(s) it gives, and for ``best`` the
    profile and model it was resolved for (run.json's ``prompt_policy``)."""

    name: str
    forms: tuple[str, ...]  # formulations given to the model, in order
    profile: str = ""  # the profile's source ("paper Table II", a path), for best
    model: str = ""
    warning: str = ""  # e.g. best without a profile entry: as typed
    row: str = ""  # best: the profile entry it was resolved from (a zoo name or a Table II row)
    _cache: OrderedDict[tuple[str, ...], PromptPlan] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def fuse(self) -> bool:
        return len(self.forms) > 1

    def record(self) -> dict[str, Any]:
        """run.json's ``prompt_policy`` (part of the run identity)."""
        return {"name": self.name, "gives": list(self.forms), "profile": self.profile or None,
                "model": self.model or None}

    def describe(self) -> str:
        gives = "+".join(self.forms)
        return self.name if self.name in _FORM else f"{self.name} ({gives})"

    def plan(self, prompts: Sequence[str]) -> PromptPlan:
        """The plan of one prompt set (cached: a set seen before costs a dict lookup)."""
        key = tuple(prompts)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        plan = self._build(key)
        with self._lock:
            self._cache[key] = plan
            while len(self._cache) > _PLAN_CACHE:
                self._cache.popitem(last=False)
        return plan

    def _build(self, prompts: tuple[str, ...]) -> PromptPlan:
        forms = tuple(derive(p) for p in prompts)
        operator = tuple(f.orig for f in forms)
        texts: dict[str, list[int]] = {}
        for o, f in enumerate(forms):
            for k in self.forms:
                owners = texts.setdefault(getattr(f, k), [])
                if o not in owners:
                    owners.append(o)
        return PromptPlan(operator, tuple(texts), tuple(tuple(v) for v in texts.values()), forms, self.fuse)


def paper_name_of(model: str) -> str:
    """The Table II row of a zoo or plugin model name (``sam3`` -> ``SAM3``), else ""."""
    from probench.errors import ProbenchError

    if not model:
        return ""
    try:
        from probench.models.zoo import model_record

        return str(model_record(model)["paper_name"])
    except ProbenchError:  # not a model name: it may be a Table II row itself
        return ""


def resolve_policy(
    name: str, *, model: str = "", paper_name: str = "", profile: str | Profile | None = None,
) -> PromptPolicy:
    """The policy ``name`` for a model: its zoo name (its Table II row looked up in the zoo
    when ``paper_name`` is not given) or a Table II row. ``profile``: a path, a
    :class:`Profile`, or None/``paper`` for the default. Errors are one line
    (:class:`PolicyError`, :class:`probench.prompting.profile.ProfileError`)."""
    check_policy_name(name)
    prof = profile if isinstance(profile, Profile) else load_profile(profile) if (
        name == "best" or profile not in (None, "")) else None
    if name in _FORM:
        return PromptPolicy(name, (_FORM[name],))
    if name == "ensemble":
        return PromptPolicy(name, ("orig", "cat", "tmpl"))
    assert prof is not None
    paper_name = paper_name or paper_name_of(model)
    row = next((n for n in (model, paper_name) if n and n in prof.best), "")
    k = prof.best[row] if row else None
    if k is None:
        if not prof.is_default:
            raise PolicyError(f"prompt policy best: profile {prof.source!r} has no entry for model {model!r}"
                              + (f" ({paper_name})" if paper_name and paper_name != model else "")
                              + f"; it lists {', '.join(sorted(prof.best))}")
        return PromptPolicy(name, ("orig",), prof.source, model,
                            warning=f"prompt policy best: the {prof.source} profile has no entry for model "
                                    f"{model!r}: prompts go to the model as typed")
    return PromptPolicy(name, (k,), prof.source, model, row=row)


class PolicyDetector:
    """A detector behind a prompt policy, for callers that hold a detector and pass it
    operator prompts (``probench ground``, benchmarks): :meth:`set_prompts` makes the
    policy's texts ready, :meth:`detect` answers under the operator's prompts, and
    :meth:`operator_prompts` gives the class ids to publish. Everything else is the
    detector's."""

    def __init__(self, detector: Any, policy: PromptPolicy) -> None:
        self.detector = detector
        self.policy = policy

    def set_prompts(self, prompts: Sequence[str]) -> None:
        self.detector.set_prompts(list(self.policy.plan(tuple(prompts)).model_texts))

    def detect(self, image: np.ndarray, prompts: Sequence[str] | None = None) -> Detections:
        if prompts is None:
            raise PolicyError("a policy detector needs the prompts with each call")
        return self.policy.plan(tuple(prompts)).detect(self.detector, image)

    def operator_prompts(self, prompts: Sequence[str]) -> tuple[str, ...]:
        return self.policy.plan(tuple(prompts)).operator

    def __getattr__(self, name: str) -> Any:
        return getattr(self.detector, name)
