"""Errors of ``probench ground``."""

from probench.errors import CheckFailed, UsageError


class GroundError(CheckFailed):
    """The bag's data cannot be grounded (a frame that does not decode, an unknown encoding...)."""


class GroundUsageError(UsageError):
    """``probench ground`` was called wrongly (bad flag value, bad prompt schedule, output exists...)."""
