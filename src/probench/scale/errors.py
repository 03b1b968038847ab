"""Errors of the scale-out room (Ray)."""

from probench.errors import CheckFailed, UsageError


class RayUsageError(UsageError):
    """``--ray``/``--workers`` asked for something this cluster or this install cannot do."""


class RayClusterError(CheckFailed):
    """The Ray cluster could not be reached, or it cannot run the workers asked for."""


class WorkerLostError(CheckFailed):
    """Workers died more often than a run allows (every worker gone, or one image that
    keeps killing its worker)."""
