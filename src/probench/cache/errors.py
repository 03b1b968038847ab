"""Errors of the prediction cache."""

from probench.errors import CheckFailed


class CacheError(CheckFailed):
    """A run folder is missing a part or holds a malformed one."""


class RunMismatchError(CheckFailed):
    """A run folder holds another experiment (model, dataset, settings) than the one asked for."""


class RunFolderWriteError(CacheError):
    """A part of a run folder could not be written (read-only, immutable, full disk...)."""
