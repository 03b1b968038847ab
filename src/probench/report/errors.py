"""Errors of the report room."""

from __future__ import annotations

from probench.errors import CheckFailed, UsageError


class ReportError(CheckFailed):
    """A run folder or reference table cannot be reported (malformed or missing metrics...)."""


class ReportUsageError(UsageError):
    """``probench report`` was called wrongly (no such run folder, unwritable output...)."""
