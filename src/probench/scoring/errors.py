"""Errors of the scoring room."""

from __future__ import annotations

from probench.errors import CheckFailed, UsageError


class ScoringError(CheckFailed):
    """Predictions or a run folder cannot be scored (malformed records, no predictions...)."""


class ScoringUsageError(UsageError):
    """The scorer was called wrongly (unknown formulation, missing run folder...)."""


class DatasetMismatch(ScoringError):
    """The dataset given is not the one the run was made on (content hashes differ)."""
