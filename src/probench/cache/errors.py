"""Errors of the prediction cache."""

from probench.errors import CheckFailed


class CacheError(CheckFailed):
    """A run folder is missing a part or holds a malformed one."""
