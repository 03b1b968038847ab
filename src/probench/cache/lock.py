"""One writer per folder: a run or sweep folder is locked while a process writes it.

The lock is an ``fcntl.flock`` on ``FOLDER/.probench.lock``, which holds the PID of the
process that took it. The kernel drops the lock when that process ends, however it ends
(SIGKILL included), so a lock is never stale: the file may stay, the lock does not. A
second process asking for the folder is refused at once, naming the holder's PID, instead
of both writing (and timing) side by side. Inside one process the lock is re-entrant
(``probench sweep`` holds its folder and each run folder under it in turn).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from probench.cache.errors import CacheError, RunFolderLinkError
from probench.cache.output import OutputLinkError, OutputNotRegularError, check_run_folder_path, open_regular
from probench.errors import UsageError

LOCK_FILE = ".probench.lock"

_HELD: dict[Path, tuple[int, int]] = {}  # folder -> (fd, how many holders in this process)
_GUARD = threading.Lock()


class FolderBusy(UsageError):
    """Another process is writing the folder (exit 2: choose another folder or wait)."""


def _open_lock(lock: Path, flags: int) -> int:
    """The lock file under the writer rule (:func:`probench.cache.output.open_regular`): a
    link planted at ``.probench.lock`` is refused with one line, so the PID is never written
    into a file elsewhere; a regular file only."""
    try:
        return open_regular(lock, flags, 0o644)
    except OutputLinkError:
        raise RunFolderLinkError(lock) from None
    except OutputNotRegularError:
        raise CacheError(f"{lock}: not a regular file; probench writes only its own lock file there") \
            from None


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"process {text}" if text.isdigit() else "another process"


def _refusal(folder: Path, flag: str, fd: int) -> FolderBusy:
    return FolderBusy(
        f"{flag} {folder} is being written by {_holder(fd)} (lock {folder / LOCK_FILE}); wait for it to "
        "finish or choose another folder"
    )


def acquire(folder: str | Path, *, flag: str = "--out") -> None:
    """Take ``folder``'s lock (creating the folder), or raise :class:`FolderBusy` at once."""
    path = Path(folder).resolve()
    with _GUARD:
        if path in _HELD:
            fd, count = _HELD[path]
            _HELD[path] = (fd, count + 1)
            return
        path.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(path / LOCK_FILE, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            error = _refusal(path, flag, fd)
            os.close(fd)
            raise error from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[path] = (fd, 1)


def release(folder: str | Path) -> None:
    """Give back one hold of ``folder``'s lock (the last one unlocks it); no-op if not held."""
    path = Path(folder).resolve()
    with _GUARD:
        if path not in _HELD:
            return
        fd, count = _HELD.pop(path)
        if count > 1:
            _HELD[path] = (fd, count - 1)
            return
        os.close(fd)  # closing the last descriptor drops the flock


def check_free(folder: str | Path, *, flag: str = "--out") -> None:
    """Raise :class:`FolderBusy` if another process holds ``folder``'s lock (takes nothing;
    for checks before a slow model load)."""
    path = Path(folder).resolve()
    lock = path / LOCK_FILE
    with _GUARD:
        if path in _HELD or not (lock.is_file() or lock.is_symlink()):
            return
        try:
            fd = _open_lock(lock, os.O_RDONLY)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _refusal(path, flag, fd) from None
        finally:
            os.close(fd)


def check_out_folder(folder: str | Path, *, flag: str = "--out") -> None:
    """The checks of an output folder before a slow model load: the writer rule's
    (:func:`probench.cache.output.check_run_folder_path`: not a link, not inside a run
    folder), it is a folder or can be created (:func:`probench.cache.atomic.creation_problem`),
    and no other process writes it."""
    from probench.cache.atomic import creation_problem

    path = check_run_folder_path(folder, flag=flag)
    problem = None if path.is_dir() else creation_problem(path)
    if problem is not None:
        raise UsageError(f"{flag} {path} cannot be created: {problem}")
    check_free(path, flag=flag)


@contextmanager
def locked(folder: str | Path, *, flag: str = "--out") -> Iterator[Path]:
    """``with locked(folder):`` holds the lock for the block."""
    acquire(folder, flag=flag)
    try:
        yield Path(folder)
    finally:
        release(folder)
