"""Errors of the bag room."""

from probench.errors import CheckFailed, UsageError


class BagError(CheckFailed):
    """A file or folder is not a readable probench bag (not a bag, corrupt, topics missing)."""


class BagUsageError(UsageError):
    """A bag command was called wrongly (output exists, unknown storage...)."""
