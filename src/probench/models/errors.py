"""Errors of the models room."""

from probench.errors import CheckFailed, UsageError


class ModelError(CheckFailed):
    """A model could not be built, loaded or run."""


class UnknownModelError(UsageError):
    """A model name that is not in the zoo."""


class WeightsNotFoundError(ModelError):
    """Real weights are not on this machine; the message says how to get them."""


class BackendUnavailableError(ModelError):
    """The library a model needs is not installed (or cannot be on this machine)."""


class PromptError(UsageError):
    """A prompt list is empty, too long or not made of strings."""


class ImageInputError(UsageError):
    """An image given to a detector is not an RGB uint8 (H, W, 3) array."""


class InferenceError(ModelError):
    """A detector failed on an image during offline inference or latency measurement."""
