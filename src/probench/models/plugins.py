"""Models from outside probench: the ``probench.models`` entry-point group and
``package.module:factory`` names (docs/MODELS.md, "Plugin models").

- An installed distribution declares entry points in the group ``probench.models``; each
  loads a :class:`~probench.models.spec.ModelSpec` or a list of them. Their names join the
  zoo's (a ``tiny_factory`` gives ``tiny-<name>`` as well).
- A name holding a colon, ``package.module:attribute``, is a one-off model: the attribute
  is a ``ModelSpec``, or a factory with the zoo's ``factory`` signature (the spec is then
  made up around it).

Discovery imports each plugin's spec module (which, like probench's own ``specs_*``,
should be light) and never raises: a plugin with a broken import or a bad spec becomes one
:class:`PluginProblem` line, and the rest of the zoo is untouched. This module imports
:mod:`probench.models.spec` only; the registry (:mod:`probench.models.zoo`) calls it.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any, NamedTuple

from probench.errors import ProbenchError
from probench.models.errors import ModelError, UnknownModelError
from probench.models.spec import TINY_PREFIX, ModelSpec

ENTRY_POINT_GROUP = "probench.models"
# Foreign code (a plugin's import, entry point or factory) gets this long to return
# (docs/SECURITY.md); the environment variable changes it (seconds).
LOAD_TIMEOUT_S = 600.0
LOAD_TIMEOUT_ENV = "PROBENCH_PLUGIN_LOAD_TIMEOUT"


class PluginLoadError(ModelError):
    """A plugin's code failed, exited or hung while loading: one line (exit 1)."""


def load_timeout() -> float:
    """The plugin load timeout in seconds (:data:`LOAD_TIMEOUT_ENV`, else :data:`LOAD_TIMEOUT_S`)."""
    text = os.environ.get(LOAD_TIMEOUT_ENV, "").strip()
    if not text:
        return LOAD_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UnknownModelError(f"{LOAD_TIMEOUT_ENV}={text!r}: must be a positive number of seconds")
    return value


def foreign_text(exc: BaseException) -> str:
    """An exception of foreign code as one line: its type and message, newlines folded."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def call_foreign(what: str, fn: Callable[..., Any], *args: Any, error: type[ProbenchError] = PluginLoadError,
                 **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for foreign code, contained: it runs in a daemon thread given
    :func:`load_timeout` seconds; whatever it raises (``SystemExit``, ``KeyboardInterrupt``,
    a ``TypeError`` of a wrong signature) becomes one ``error`` line naming ``what`` (a
    :class:`probench.errors.ProbenchError` it raises passes as it is); a hang becomes one
    line at the timeout, the thread left behind (it cannot be killed; a daemon, it does not
    keep the process alive)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - foreign code: SystemExit and all, contained
            box["error"] = exc

    timeout = load_timeout()
    thread = threading.Thread(target=target, name=f"probench-plugin-load {what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise error(f"{what}: did not return within {timeout:g} s (the plugin load timeout; "
                    f"{LOAD_TIMEOUT_ENV} changes it)")
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, ProbenchError):
            raise exc
        raise error(f"{what}: {foreign_text(exc)}")
    return box["value"]


def is_foreign(target: str) -> bool:
    """Whether a ``module:function`` target is code from outside probench."""
    module = target.partition(":")[0]
    return module != "probench" and not module.startswith("probench.")
ONE_OFF_FAMILY = "plugin"
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class PluginModel:
    """A model an installed distribution adds to the zoo."""

    spec: ModelSpec
    entry_point: str  # "name = module:attribute"
    distribution: str  # "probench-example-plugin 0.1.0"


class PluginProblem(NamedTuple):
    """An entry point that gives no usable model, in one line."""

    entry_point: str
    distribution: str
    error: str

    def line(self) -> str:
        """As ``probench models`` prints it."""
        return f"plugin {self.entry_point} ({self.distribution}): {self.error}"


def _distribution(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown distribution"
    return f"{dist.metadata['Name'] or dist.name} {dist.version}"


def spec_problem(spec: object) -> str | None:
    """Why ``spec`` is not a usable plugin spec, or None."""
    if not isinstance(spec, ModelSpec):
        return f"gives {type(spec).__name__}, not a probench.models.spec.ModelSpec"
    if not isinstance(spec.name, str) or not _NAME.match(spec.name):
        return f"model name {spec.name!r} must be lower-case letters, digits, '.', '_' or '-'"
    if spec.name.startswith((TINY_PREFIX, "test-")):
        return f"model name {spec.name!r} must not start with {TINY_PREFIX!r} or 'test-' (reserved)"
    for key in ("factory", "tiny_factory"):
        target = getattr(spec, key)
        if target is None and key == "tiny_factory":
            continue
        if not isinstance(target, str) or not _TARGET.match(target):
            return f"model {spec.name!r}: {key} must be 'module:function', not {target!r}"
    return None


def _load(ep: metadata.EntryPoint) -> list[ModelSpec]:
    loaded = ep.load()
    specs = list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
    if not specs:
        raise ValueError("gives no model")
    for spec in specs:
        why = spec_problem(spec)
        if why:
            raise ValueError(why)
    return specs


@cache
def discover(builtin: frozenset[str]) -> tuple[tuple[PluginModel, ...], tuple[PluginProblem, ...]]:
    """Every plugin model installed, and every plugin that failed (one line each). Names
    already taken (``builtin``: the zoo's own, or an earlier plugin's) are problems too:
    a plugin never replaces a model. Cached for the process."""
    models: list[PluginModel] = []
    problems: list[PluginProblem] = []
    taken = set(builtin)
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        where, dist = f"{ep.name} = {ep.value}", _distribution(ep)
        try:
            specs = call_foreign(f"plugin {where}", _load, ep)
        except ProbenchError as exc:  # any failure of foreign code (exits and hangs too) is one line
            problems.append(PluginProblem(where, dist, str(exc).removeprefix(f"plugin {where}: ")))
            continue
        clash = [s.name for s in specs if s.name in taken]
        if clash:
            problems.append(PluginProblem(where, dist, f"model name {clash[0]!r} is already taken"))
            continue
        for spec in specs:
            taken.add(spec.name)
            models.append(PluginModel(spec, where, dist))
    return tuple(models), tuple(problems)


def is_one_off(name: str) -> bool:
    """Whether ``name`` is a ``package.module:attribute`` reference."""
    return ":" in name


@cache
def one_off_spec(target: str) -> ModelSpec:
    """The spec of ``--model package.module:attribute``: the attribute itself when it is a
    ``ModelSpec``, else a spec around it as the zoo's ``factory``. A usage error (one line)
    when it cannot be imported or is neither."""
    if not _TARGET.match(target):
        raise UnknownModelError(f"model {target!r}: expected a zoo name or 'package.module:factory'")
    module_name, _, attr = target.partition(":")
    module = call_foreign(f"model {target!r}: cannot import {module_name}", importlib.import_module,
                          module_name, error=UnknownModelError)  # foreign code: one line, whatever it did
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UnknownModelError(f"model {target!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, ModelSpec):
        problem = spec_problem(obj)
        if problem and not problem.startswith("model name"):  # the name asked for is the target itself
            raise UnknownModelError(f"model {target!r}: {problem}")
        return obj
    if not callable(obj):
        what = type(obj).__name__
        raise UnknownModelError(f"model {target!r}: {what} is neither a ModelSpec nor a factory")
    return ModelSpec(
        name=target, paper_name=target, family=ONE_OFF_FAMILY, backend=ONE_OFF_FAMILY, checkpoint="",
        factory=target, notes="one-off model given as package.module:factory",
    )
