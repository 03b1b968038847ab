"""Errors of the prediction cache."""

from probench.errors import CheckFailed


class CacheError(CheckFailed):
    """A run folder is missing a part or holds a malformed one."""


class RecordError(CacheError):
    """A result file (run.json, metrics.json, realtime.json, latency.json) whose content is not
    its record: a wrong type, a number that is not finite or is out of its range."""


class RunMismatchError(CheckFailed):
    """A run folder holds another experiment (model, dataset, settings) than the one asked for."""


class RunFolderWriteError(CacheError):
    """A part of a run folder could not be written (read-only, immutable, full disk...)."""


class RunFolderLinkError(CacheError):
    """A run folder's own file (lock, partial log, predictions) is a symbolic link: probench
    never writes through a link it did not make."""

    def __init__(self, path: object) -> None:
        super().__init__(f"{path}: is a symbolic link; probench does not follow links inside a run folder "
                         "(remove it, or choose another folder)")
