"""Errors of the models room, and :func:`import_backend` (a backend library or its error)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from probench.errors import CheckFailed, UsageError


class ModelError(CheckFailed):
    """A model could not be built, loaded or run."""


class UnknownModelError(UsageError):
    """A model name that is not in the zoo."""


class WeightsNotFoundError(ModelError):
    """Real weights are not on this machine; the message says how to get them."""


class BackendUnavailableError(ModelError):
    """The library a model needs is not installed (or cannot be on this machine)."""


def import_backend(
    name: str, message: Callable[[ImportError], str],
    error: type[BackendUnavailableError] = BackendUnavailableError,
) -> ModuleType:
    """``import name``, or ``error(message(exc))`` saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise error(message(exc)) from exc


class PromptError(UsageError):
    """A prompt list is empty, too long or not made of strings."""


class ImageInputError(UsageError):
    """An image given to a detector is not an RGB uint8 (H, W, 3) array."""


class InferenceError(ModelError):
    """A detector failed on an image during offline inference or latency measurement."""
