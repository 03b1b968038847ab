"""Errors of the real-time core: node configuration values."""

from probench.errors import UsageError


class ParameterValueError(UsageError):
    """A node parameter was given a value outside what it accepts."""
