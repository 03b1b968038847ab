"""The model registry: every configuration of the paper's Table II by name, plus test variants.

Names:
- ``<name>`` (e.g. ``owlv2-b``): the real model; weights from ``weights=`` (a local folder)
  or the local Hugging Face / ultralytics cache, never downloaded
  (:class:`~probench.models.errors.WeightsNotFoundError` says how to fetch them). With
  ``random_weights=True`` the real-size architecture is built from a config written in
  code, without weights (latency of the architecture, no meaningful predictions).
- ``tiny-<name>``: a tiny configuration of the same adapter with random but deterministic
  weights (same predictions in every process); ``tiny-owlv2`` is ``tiny-owlv2-b``.
- ``test-instant``, ``test-masks``, ``test-slow-<N>ms``: scripted detectors (:mod:`probench.models.testing`).
- plugin models: those of installed distributions (entry-point group ``probench.models``),
  and one-off ``package.module:factory`` names (:mod:`probench.models.plugins`). They
  resolve like the zoo's own, so every command and the grounding node take them.

Doors run one way: spec lists (``specs_*``, light: no torch) and adapters import
:mod:`probench.models.spec`; this module imports the spec lists, builds a PyTorch detector
with the spec's factory and, for another runtime, hands it to :mod:`probench.models.accel`,
which never imports this module.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from probench.models import specs_detectron, specs_transformers, specs_ultralytics
from probench.models.base import BaseDetector
from probench.models.errors import BackendUnavailableError, ModelError, UnknownModelError
from probench.models.plugins import (
    PluginModel,
    PluginProblem,
    call_foreign,
    discover,
    is_foreign,
    is_one_off,
    one_off_spec,
)
from probench.models.spec import RUNTIMES, TINY_PREFIX, ModelRecord, ModelSpec
from probench.models.testing import scripted_detector

ALIASES = {"owlv2": "owlv2-b"}  # tiny-owlv2 must always exist (the demo and the tests use it)

# The rows of the paper's Table II, in its order.
PAPER_ORDER = (
    "SAM3-Lite", "OWLv2-L", "OWLv2-B", "SAM3", "OmDet-T", "YOLOE-X", "YOLOE-S", "OWL-ViT",
    "G-DINO-S-T", "YOLO-W-X", "Detic", "YOLO-W-S", "G-DINO-T", "LLMDet-L", "MM-G-D-L", "MM-G-D-T",
)
TINY_SOURCE = "tiny config, random init (deterministic seed)"
RANDOM_SOURCE = "random init (real-size config)"


def _collect() -> Mapping[str, ModelSpec]:
    zoo: dict[str, ModelSpec] = {}
    for module in (specs_transformers, specs_ultralytics, specs_detectron):
        for spec in module.SPECS:
            if spec.name in zoo:
                raise ModelError(f"model {spec.name!r} registered twice ({module.__name__})")
            zoo[spec.name] = spec
    # Table II order (best mAP first), so listings read like the paper.
    rank = {p: i for i, p in enumerate(PAPER_ORDER)}
    return MappingProxyType(dict(sorted(zoo.items(), key=lambda kv: rank.get(kv[1].paper_name, len(rank)))))


ZOO: Mapping[str, ModelSpec] = _collect()


def plugins() -> tuple[tuple[PluginModel, ...], tuple[PluginProblem, ...]]:
    """The installed plugin models and the plugins that failed (one line each), discovered
    once per process; a plugin never shadows a zoo name."""
    return discover(frozenset(ZOO))


def registry() -> dict[str, ModelSpec]:
    """The zoo and the installed plugin models, by name."""
    return {**ZOO, **{m.spec.name: m.spec for m in plugins()[0]}}


def list_models() -> list[ModelSpec]:
    return list(registry().values())


def tiny_names() -> list[str]:
    """Every ``tiny-*`` name (the alias ``tiny-owlv2`` included; plugins' too)."""
    names = [TINY_PREFIX + s.name for s in registry().values() if s.tiny_factory]
    for alias, target in ALIASES.items():
        if target in ZOO and ZOO[target].tiny_factory:
            names.append(TINY_PREFIX + alias)
    return names


def resolve(name: str) -> tuple[ModelSpec, bool]:
    """``(spec, tiny)`` for a zoo or plugin name (``tiny-`` prefixed or not), or a
    ``package.module:factory`` reference; else :class:`UnknownModelError`. Plugins are
    looked for only when the zoo does not have the name."""
    if not isinstance(name, str) or not name:
        raise UnknownModelError("model name must be a non-empty string")
    tiny = name.startswith(TINY_PREFIX)
    base = name[len(TINY_PREFIX):] if tiny else name
    base = ALIASES.get(base, base)
    spec = ZOO.get(base)
    if spec is None and is_one_off(base):
        spec = one_off_spec(base)
    elif spec is None:
        spec = registry().get(base)
    if spec is None:
        broken = plugins()[1]
        hint = f" ({len(broken)} plugin(s) failed to load: `probench models` names them)" if broken else ""
        raise UnknownModelError(f"unknown model {name!r}; `probench models` lists the zoo{hint}")
    if tiny and not spec.tiny_factory:
        raise UnknownModelError(
            f"{spec.name} has no tiny variant (its library does not install here); "
            "`probench models` lists the tiny-* names"
        )
    return spec, tiny


def check_model_name(name: str) -> None:
    """A zoo, plugin, ``tiny-*``, ``test-*`` or ``package.module:factory`` name, checked
    without building anything (a one-off's module is imported)."""
    if scripted_detector(name) is None:
        resolve(name)


def weights_present(spec: ModelSpec) -> bool:
    """Whether the real weights are in the local cache (no network, no torch import)."""
    if spec.backend == "transformers":
        from probench.models.hf_common import weights_in_cache

        return weights_in_cache(spec.checkpoint)
    if spec.backend == "ultralytics":
        from probench.models.ultra.weights import weights_present as ultra_weights_present

        return ultra_weights_present(spec)
    return False


def model_record(
    name: str, *, weights: str | None = None, random_weights: bool = False, runtime: str = "torch",
    preprocess: str = "device",
) -> ModelRecord:
    """run.json's ``model`` for a model asked for by these arguments. Built from the
    arguments and the spec alone, so the same call gives the same record before the model
    loads (a resume check), after it loads, and in another process (the evaluator)."""
    if runtime not in RUNTIMES:
        from probench.errors import UsageError

        raise UsageError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if scripted_detector(name) is not None:
        return ModelRecord(
            name=name, paper_name=name, family="scripted", backend="scripted", checkpoint="",
            random_weights=False, weights_source="scripted", runtime=runtime, preprocess=preprocess,
        )
    spec, tiny = resolve(name)
    if tiny:
        source = TINY_SOURCE
    elif random_weights:
        source = RANDOM_SOURCE
    elif weights:
        source = str(Path(weights).expanduser().resolve())
    else:  # the local hub / ultralytics cache (never downloaded); a plugin's factory finds its own
        source = spec.checkpoint or f"its factory's own ({spec.factory})"
    return ModelRecord(
        name=name, paper_name=spec.paper_name, family=spec.family, backend=spec.backend,
        checkpoint=spec.checkpoint, random_weights=bool(tiny or random_weights),
        weights_source=source, runtime=runtime, preprocess=preprocess,
    )


DEVICE_FORM = re.compile(r"^(cpu|cuda(:\d{1,3})?)$")
PRECISIONS = ("fp32", "fp16")


def check_device(device: str, precision: str) -> None:
    """A one-line :class:`probench.errors.UsageError` unless ``device`` is ``cpu``, ``cuda``
    or ``cuda:N`` that this machine has (torch is imported only for a CUDA device) and
    ``precision`` is one of :data:`PRECISIONS`: so no run records a device or a precision it
    could not have used (``cuda`` on a CPU-only machine, ``cuda:-1``, ``fp8``)."""
    from probench.errors import UsageError

    if not isinstance(device, str) or not DEVICE_FORM.match(device):
        raise UsageError(f"--device {device!r}: expected cpu, cuda or cuda:N")
    if precision not in PRECISIONS:
        raise UsageError(f"--precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if device == "cpu":
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        have = f"{count} CUDA device(s)" if count else "no CUDA device"
        raise UsageError(f"--device {device}: this machine has {have} (torch.cuda)")


def _build(target: str, name: str, spec: ModelSpec, **kwargs: Any) -> Any:
    """The detector a factory builds: probench's own called as they are; a plugin's (foreign
    code) contained by :func:`probench.models.plugins.call_foreign`: its import and its call
    get the plugin load timeout, and an exit, an interrupt or a wrong signature is one line."""
    if not is_foreign(target):
        return _import_factory(target)(spec, **kwargs)
    factory = call_foreign(f"model {name}: factory {target}", _import_factory, target)
    det = call_foreign(f"model {name}: factory {target}", factory, spec, **kwargs)
    if isinstance(det, BaseDetector):
        det.foreign_output = True  # every frame of a plugin is validated (BaseDetector._checked)
    return det


def _import_factory(target: str) -> Callable[..., BaseDetector]:
    module_name, _, func = target.partition(":")
    if not module_name or not func:
        raise ModelError(f"malformed factory {target!r} (expected 'module:function')")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailableError(f"cannot import {module_name}: {exc}") from exc
    factory: Callable[..., BaseDetector] | None = getattr(module, func, None)
    if not callable(factory):
        raise ModelError(f"factory {target!r}: {module_name} has no function {func!r}")
    return factory


def load_detector(
    name: str,
    *,
    device: str = "cpu",
    precision: str = "fp32",
    score_threshold: float = 0.0,
    weights: str | None = None,
    random_weights: bool = False,
    runtime: str = "torch",
    engine_cache: str | None = None,
    preprocess: str = "device",
) -> BaseDetector:
    """Build a detector by zoo name. Never downloads: real weights come from ``weights``
    (a local folder) or the local Hugging Face / ultralytics cache. ``runtime``
    ("torch", "compiled", "onnxruntime", "tensorrt"): the PyTorch detector is built first,
    then handed to :mod:`probench.models.accel`. ``preprocess``: "device" (torch ops on the model's
    device, default) or "reference" (the library's own processor;
    :mod:`probench.models.preprocess`). The detector's ``model_info`` is :func:`model_record`."""
    from probench.models.preprocess import check_preprocess

    check_preprocess(preprocess)
    check_device(device, precision)  # what this machine has: before anything is built or recorded
    record = model_record(name, weights=weights, random_weights=random_weights, runtime=runtime,
                          preprocess=preprocess)
    scripted = scripted_detector(name, device=device, score_threshold=score_threshold)
    if scripted is not None:
        if runtime != "torch":
            from probench.models.accel.errors import UnsupportedRuntimeError

            raise UnsupportedRuntimeError(f"{name}: a scripted test model runs in Python only")
        scripted.model_info = record
        return scripted
    spec, tiny = resolve(name)
    if runtime != "torch":
        from probench.models.accel import check_runtime

        check_runtime(spec, runtime, device=device, precision=precision)  # before any build
    if not spec.installable_here() and not tiny:
        raise BackendUnavailableError(
            f"{spec.name} ({spec.paper_name}) needs {', '.join(spec.requires) or spec.backend}, "
            f"which is not installed here. {spec.install_hint}".strip()
        )
    det: BaseDetector
    if tiny:
        if weights or random_weights:
            from probench.errors import UsageError

            raise UsageError(f"{name} is a tiny test model: it takes neither weights nor random_weights")
        det = _build(spec.tiny_factory or "", name, spec, device=device, precision=precision,
                     score_threshold=score_threshold, preprocess=preprocess)
    else:
        det = _build(spec.factory or "", name, spec, device=device, precision=precision,
                     score_threshold=score_threshold, weights=weights, random_weights=random_weights,
                     preprocess=preprocess)
    if not isinstance(det, BaseDetector):  # (a foreign factory's result, checked as any)
        raise ModelError(f"{name}: its factory returned {type(det).__name__}, not a "
                         "probench.models.base.BaseDetector (docs/MODELS.md, plugin models)")
    if runtime != "torch":
        from probench.models.accel import wrap

        det = wrap(det, spec, runtime, cache_dir=engine_cache)
    det.model_info = record
    return det
