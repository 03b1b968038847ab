"""The error hierarchy every subpackage builds on.

Each subpackage has its own ``errors.py`` whose classes derive from these, wrapping
low-level errors (``json``, ``OSError``, ``torch``...) with the context a user needs.
The CLI turns a :class:`ProbenchError` into one line on stderr and its ``exit_code``.
"""


class ProbenchError(Exception):
    """Base of all errors probench raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code = 1


class UsageError(ProbenchError):
    """The command was called wrongly (bad flag value, missing path...): exit code 2."""

    exit_code = 2


class CheckFailed(ProbenchError):
    """Input was read but failed a check (invalid dataset, bad config...): exit code 1."""

    exit_code = 1


class Interrupted(ProbenchError):
    """Stopped on request (Ctrl-C, SIGTERM; ROS shut down) before the work finished: exit
    code 130, as a shell reports a process ended by SIGINT. A run folder records it as
    ``interrupted``, not ``failed``."""

    exit_code = 130
