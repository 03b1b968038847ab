"""The model zoo: every configuration of the paper's Table II by name, plus test variants.

Names:
- ``<name>`` (e.g. ``owlv2-b``): the real model; weights from ``weights=`` (a local folder)
  or the local Hugging Face / ultralytics cache, never downloaded
  (:class:`~probench.models.errors.WeightsNotFoundError` says how to fetch them). With
  ``random_weights=True`` the real-size architecture is built from a config written in
  code, without weights (latency of the architecture, no meaningful predictions).
- ``tiny-<name>``: a tiny configuration of the same adapter with random but deterministic
  weights (same predictions in every process); ``tiny-owlv2`` is ``tiny-owlv2-b``.
- ``test-instant``, ``test-slow-<N>ms``: scripted detectors (:mod:`probench.models.testing`).

Spec lists come from light modules (no torch import): ``specs_transformers``,
``specs_ultralytics`` and ``specs_detectron``, each with a module-level ``SPECS``; the zoo
is filled on first use and ordered like Table II.

Factory contract (``ModelSpec.factory`` / ``tiny_factory`` are ``"module:function"``):
``factory(spec, *, device, precision, score_threshold, weights, random_weights) -> Detector``
and ``tiny_factory(spec, *, device, precision, score_threshold) -> Detector``.
:func:`load_detector` then sets ``detector.model_info`` (the ``model`` object of run.json).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probench.models.base import Detector
from probench.models.errors import ModelError, UnknownModelError
from probench.models.testing import scripted_detector

TINY_PREFIX = "tiny-"
ALIASES = {"owlv2": "owlv2-b"}  # tiny-owlv2 must always exist (CONTRACTS §4)

# The rows of the paper's Table II, in its order.
PAPER_ORDER = (
    "SAM3-Lite", "OWLv2-L", "OWLv2-B", "SAM3", "OmDet-T", "YOLOE-X", "YOLOE-S", "OWL-ViT",
    "G-DINO-S-T", "YOLO-W-X", "Detic", "YOLO-W-S", "G-DINO-T", "LLMDet-L", "MM-G-D-L", "MM-G-D-T",
)

# Modules holding spec lists. A missing module is an error, not a silent gap in the zoo.
SPEC_MODULES = (
    "probench.models.specs_transformers",
    "probench.models.specs_ultralytics",
    "probench.models.specs_detectron",
)


@dataclass(frozen=True)
class ModelSpec:
    name: str  # zoo name, e.g. "owlv2-b"
    paper_name: str  # Table II row, e.g. "OWLv2-B"
    family: str  # "owl", "grounding-dino", "omdet", "sam3", "yolo-world", ...
    backend: str  # "transformers", "ultralytics", "detectron2", "scripted"
    checkpoint: str  # hub id / weights file name of the published weights
    # masks, tensorrt, onnx, batched, text_cache (bools); text_cache_level: "full" | "tokens" | "none"
    capabilities: dict = field(default_factory=dict)
    factory: str | None = None  # "module:function" building the real model (see module doc)
    tiny_factory: str | None = None  # "module:function" building the tiny variant, or None
    notes: str = ""  # checkpoint mapping, uncertainty, what is not supported
    install_hint: str = ""  # how to make the backend available where it is not
    requires: tuple[str, ...] = ()  # importable modules the backend needs ("transformers", ...)

    def installable_here(self) -> bool:
        """Whether every module the backend needs can be imported here (no import done)."""
        for mod in self.requires:
            try:
                if importlib.util.find_spec(mod) is None:
                    return False
            except (ImportError, ValueError):
                return False
        return self.factory is not None

    def weights_present(self) -> bool:
        """Whether the real weights are in the local cache (no network)."""
        if self.backend == "transformers":
            from probench.models.hf_common import weights_in_cache

            return weights_in_cache(self.checkpoint)
        checker = _optional_attr(self.factory, "weights_present")
        return bool(checker(self)) if checker else False

    def info(self, **extra: Any) -> dict:
        """The ``model`` object of run.json (DESIGN.md)."""
        out = {
            "name": self.name,
            "paper_name": self.paper_name,
            "family": self.family,
            "backend": self.backend,
            "checkpoint": self.checkpoint,
        }
        out.update(extra)
        return out


def _optional_attr(target: str | None, attr: str) -> Callable | None:
    """``attr`` of the module named in ``"module:function"``, or None."""
    if not target:
        return None
    module_name = target.split(":", 1)[0]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return getattr(module, attr, None)


def _collect() -> dict[str, ModelSpec]:
    zoo: dict[str, ModelSpec] = {}
    for module_name in SPEC_MODULES:
        module = importlib.import_module(module_name)  # a broken spec module must not hide
        for spec in module.SPECS:
            if spec.name in zoo:
                raise ModelError(f"model {spec.name!r} registered twice ({module_name})")
            zoo[spec.name] = spec
    # Table II order (best mAP first), so listings read like the paper.
    rank = {p: i for i, p in enumerate(PAPER_ORDER)}
    return dict(sorted(zoo.items(), key=lambda kv: rank.get(kv[1].paper_name, len(rank))))


class _LazyZoo(dict):
    """The zoo dict, filled on first use: spec modules import ModelSpec from here, so filling
    it at import time would be circular whichever module is imported first."""

    _loaded = False

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            try:
                super().update(_collect())
            except BaseException:
                self._loaded = False
                raise

    def __getitem__(self, key: str) -> ModelSpec:
        self._load()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._load()
        return super().__contains__(key)

    def __iter__(self):
        self._load()
        return super().__iter__()

    def __len__(self) -> int:
        self._load()
        return super().__len__()

    def __repr__(self) -> str:
        self._load()
        return super().__repr__()

    def get(self, key: str, default: object = None) -> object:
        self._load()
        return super().get(key, default)

    def keys(self):
        self._load()
        return super().keys()

    def values(self):
        self._load()
        return super().values()

    def items(self):
        self._load()
        return super().items()


ZOO: dict[str, ModelSpec] = _LazyZoo()


def list_models() -> list[ModelSpec]:
    return list(ZOO.values())


def tiny_names() -> list[str]:
    """Every ``tiny-*`` name (the alias ``tiny-owlv2`` included)."""
    names = [TINY_PREFIX + s.name for s in ZOO.values() if s.tiny_factory]
    for alias, target in ALIASES.items():
        if target in ZOO and ZOO[target].tiny_factory:
            names.append(TINY_PREFIX + alias)
    return names


def resolve(name: str) -> tuple[ModelSpec, bool]:
    """``(spec, tiny)`` for a zoo name, or :class:`UnknownModelError`."""
    if not isinstance(name, str) or not name:
        raise UnknownModelError("model name must be a non-empty string")
    tiny = name.startswith(TINY_PREFIX)
    base = name[len(TINY_PREFIX):] if tiny else name
    base = ALIASES.get(base, base)
    spec = ZOO.get(base)
    if spec is None:
        raise UnknownModelError(f"unknown model {name!r}; `probench models` lists the zoo")
    if tiny and not spec.tiny_factory:
        raise UnknownModelError(
            f"{spec.name} has no tiny variant (its library does not install here); "
            "`probench models` lists the tiny-* names"
        )
    return spec, tiny


def _import_factory(target: str) -> Callable[..., Detector]:
    module_name, _, func = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        from probench.models.errors import BackendUnavailableError

        raise BackendUnavailableError(f"cannot import {module_name}: {exc}") from exc
    return getattr(module, func)


def load_detector(
    name: str,
    *,
    device: str = "cpu",
    precision: str = "fp32",
    score_threshold: float = 0.0,
    weights: str | None = None,
    random_weights: bool = False,
    runtime: str = "torch",
) -> Detector:
    """Build a detector by zoo name. Never downloads: real weights come from ``weights``
    (a local folder) or the local Hugging Face / ultralytics cache. ``runtime``
    ("torch", "onnxruntime", "tensorrt"): see :mod:`probench.models.accel`."""
    if runtime != "torch":
        from probench.models.accel import load_accelerated

        return load_accelerated(
            name, runtime=runtime, device=device, precision=precision,
            score_threshold=score_threshold, weights=weights, random_weights=random_weights,
        )
    scripted = scripted_detector(name, device=device, score_threshold=score_threshold)
    if scripted is not None:
        scripted.model_info = {
            "name": name, "paper_name": name, "family": "scripted", "backend": "scripted",
            "checkpoint": "", "random_weights": False, "weights_source": "scripted",
        }
        return scripted
    spec, tiny = resolve(name)
    if not spec.installable_here() and not tiny:
        from probench.models.errors import BackendUnavailableError

        raise BackendUnavailableError(
            f"{spec.name} ({spec.paper_name}) needs {', '.join(spec.requires) or spec.backend}, "
            f"which is not installed here. {spec.install_hint}".strip()
        )
    if tiny:
        if weights or random_weights:
            from probench.errors import UsageError

            raise UsageError(f"{name} is a tiny test model: it takes neither weights nor random_weights")
        det = _import_factory(spec.tiny_factory)(
            spec, device=device, precision=precision, score_threshold=score_threshold
        )
        source = "tiny config, random init (deterministic seed)"
    else:
        det = _import_factory(spec.factory)(
            spec, device=device, precision=precision, score_threshold=score_threshold,
            weights=weights, random_weights=random_weights,
        )
        source = getattr(det, "weights_source", None) or (
            "random init (real-size config)" if random_weights else (weights or spec.checkpoint)
        )
    det.model_info = spec.info(
        name=name, random_weights=bool(tiny or random_weights), weights_source=source
    )
    return det
