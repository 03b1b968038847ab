"""Errors of the console room."""

from probench.errors import CheckFailed, UsageError


class ConsoleUsageError(UsageError):
    """The console was started wrongly (a bind without a token, a port in use...)."""


class BridgeError(CheckFailed):
    """The ROS side could not do what the page asked (no node, a refused transition...).

    ``status`` is the HTTP status the web app answers with."""

    def __init__(self, message: str, status: int = 503) -> None:
        super().__init__(message)
        self.status = status
