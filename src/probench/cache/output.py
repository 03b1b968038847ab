"""THE writer rule: every path probench writes because a user (or a ROS participant) named
it (docs/SECURITY.md, "Files probench writes"). Every command's ``--out``, the node's
``trace_file`` and the run folders' own files go through it:

- **no link it did not make.** A named output that is a symbolic link is refused (``lstat``);
  files are opened with ``O_NOFOLLOW`` or written to a temporary file renamed into place (a
  rename replaces a link, it never writes through one);
- **nothing inside a run folder but the run's own writer.** A run folder (a folder holding
  ``run.json``) is written by the command that owns it (``infer``, ``latency``, ``eval``, the
  default ``score``); any other output inside one is refused, so a run always still scores;
- **no previous result replaced without ``--overwrite``**, and a folder result (a report, a
  bag) is built out of sight and moved into place whole (:class:`StagedFolder`): nothing
  of an old result is left beside a new one, and a folder that is not such a result is
  never replaced;
- **regular files only, and nothing waited on.** A FIFO, device, socket or folder in a
  file's place is refused; opens are ``O_NONBLOCK`` and checked with ``fstat`` on the
  descriptor, so no path can block a command or the node.

Refusals are :class:`OutputPathError` (a usage error, exit 2): one line naming the flag, the
path and the reason.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from probench.cache.atomic import creation_problem, json_text, pid_alive, write_bytes_atomic
from probench.cache.records import RUN_FILE
from probench.errors import UsageError

__all__ = ["RUN_MARKER", "OutputLinkError", "OutputNotRegularError", "OutputPathError", "StagedFolder",
           "check_output_file", "check_output_folder", "check_run_folder_path", "open_appendable",
           "open_regular", "run_folder_of", "stale_stages", "write_output_bytes",
           "write_output_json"]

RUN_MARKER = RUN_FILE  # what makes a folder a run folder
LINK_REASON = "is a symbolic link; probench does not write through a link it did not make"
# never a link, never a wait (a FIFO without a reader), never a controlling terminal
_NO_WAIT = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
NOT_REGULAR_REASON = "is not a regular file (a FIFO, device or socket is never written)"


class OutputPathError(UsageError):
    """An output path probench will not write (exit 2): one line naming it and why."""

    def __init__(self, flag: str, path: Path, reason: str) -> None:
        super().__init__(f"{flag} {path}: {reason}".lstrip())
        self.path, self.reason = path, reason


class OutputLinkError(OutputPathError):
    """The output path is a symbolic link."""


class OutputNotRegularError(OutputPathError):
    """Something other than a regular file (a FIFO, device, socket, folder) is in the file's place."""


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # a parent is a file: creation_problem names it
        return None


def run_folder_of(path: str | Path) -> Path | None:
    """The run folder holding ``path`` (``path`` itself or a folder above it, links resolved),
    or None."""
    here = Path(path).resolve()
    for folder in (here, *here.parents):
        if (folder / RUN_MARKER).exists() or (folder / RUN_MARKER).is_symlink():
            return folder
    return None


def _refuse_inside_run(flag: str, path: Path, start: Path) -> None:
    run = run_folder_of(start)
    if run is not None:
        raise OutputPathError(flag, path, f"is inside the run folder {run}; a run's files are written only "
                              "by the command that owns the run (infer, latency, eval, score without "
                              "--out): choose a path outside it")


def check_output_file(path: str | Path, *, flag: str = "--out", overwrite: bool = False) -> Path:
    """The checks of a file to write, before any work: not a link, not a folder or anything
    but a regular file, not inside a run folder, not an existing file without
    ``overwrite``, and creatable. Returns the path."""
    p = Path(path)
    st = _lstat(p)
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise OutputLinkError(flag, p, LINK_REASON)
        if stat.S_ISDIR(st.st_mode):
            raise OutputNotRegularError(flag, p, "is a folder; name the file to write")
        if not stat.S_ISREG(st.st_mode):
            raise OutputNotRegularError(flag, p, NOT_REGULAR_REASON)
    _refuse_inside_run(flag, p, p.parent)
    if st is not None and not overwrite:
        raise OutputPathError(flag, p, "exists already; choose a new path or pass --overwrite to replace it")
    problem = creation_problem(p)
    if problem is not None:
        raise OutputPathError(flag, p, f"cannot be created: {problem}")
    return p


def write_output_bytes(path: str | Path, data: bytes, *, flag: str = "--out",
                       overwrite: bool = False) -> Path:
    """``data`` written atomically at ``path`` under :func:`check_output_file`'s rule (checked
    again now: the path may have changed during the work). An OSError of the write itself
    (a full disk, a read-only folder) is the caller's to name."""
    p = check_output_file(path, flag=flag, overwrite=overwrite)
    write_bytes_atomic(p, data)
    return p


def write_output_json(path: str | Path, obj: object, *, flag: str = "--out", overwrite: bool = False) -> Path:
    """:func:`write_output_bytes` of :func:`probench.cache.atomic.json_text`."""
    return write_output_bytes(path, json_text(obj).encode("utf-8"), flag=flag, overwrite=overwrite)


def check_run_folder_path(path: str | Path, *, flag: str = "--out") -> Path:
    """The checks of a run folder to create or resume (``infer``, ``latency``, ``eval``,
    ``sweep``): not a link, a folder if it exists, not inside another run folder."""
    p = Path(path)
    _folder_status(p, flag)
    _refuse_inside_run(flag, p, p.absolute().parent)
    return p


def _folder_status(p: Path, flag: str) -> os.stat_result | None:
    """``lstat`` of a folder to write (None: there is none yet); a link or a non-folder refused."""
    st = _lstat(p)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise OutputLinkError(flag, p, LINK_REASON)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise OutputNotRegularError(flag, p, "exists and is not a folder")
    return st


def check_output_folder(path: str | Path, *, what: str, is_previous: Callable[[Path], bool],
                        flag: str = "--out", overwrite: bool = False) -> Path:
    """The checks of a folder result to create (a report, a bag, a dataset): not a link, a
    folder if it exists, not a run folder or inside one, creatable. An existing folder that
    is not empty must hold a previous ``what`` (``is_previous``) and is replaced only with
    ``overwrite``; any other folder is never replaced."""
    p = Path(path)
    st = _folder_status(p, flag)
    _refuse_inside_run(flag, p, p)
    if st is not None and any(p.iterdir()):
        if not is_previous(p):
            raise OutputPathError(flag, p, f"exists already and is not a {what} folder: not replaced, even "
                                  "with --overwrite; choose a new or empty folder")
        if not overwrite:
            raise OutputPathError(flag, p, f"exists already (a {what}); choose a new path or pass "
                                  "--overwrite to replace it")
    problem = creation_problem(p.parent / f".{p.name}.stage")  # where it is built (StagedFolder)
    if problem is not None:
        raise OutputPathError(flag, p, f"cannot be created: {problem}")
    return p


def stale_stages(out: str | Path) -> list[Path]:
    """Staging folders of ``out`` (``.<name>.partial-<pid>``, :class:`StagedFolder`) left by
    writers that no longer run (a SIGKILL leaves them): safe to remove."""
    out = Path(out)
    if not out.parent.is_dir():
        return []
    prefix = f".{out.name}.partial-"
    return sorted(
        p for p in out.parent.iterdir()
        if p.name.startswith(prefix) and p.name[len(prefix):].isdigit() and p.is_dir()
        and not p.is_symlink() and not pid_alive(int(p.name[len(prefix):]))
    )  # fmt: skip


class StagedFolder:
    """A folder result built out of sight and moved to ``out`` whole when complete.

    The result is written at :attr:`path`, ``<parent>/.<name>.partial-<pid>/<name>`` (not
    created: the caller or its library makes it), so files inside get their final names.
    :meth:`commit` moves it to ``out``, replacing a previous result there (checked again
    with :func:`check_output_folder`) by two renames; :meth:`abort` drops it. A killed
    writer never leaves a half result at ``out``, and nothing of an old result is left
    beside the new one."""

    def __init__(self, out: str | Path, *, what: str, is_previous: Callable[[Path], bool],
                 flag: str = "--out", overwrite: bool = False) -> None:
        self.out = check_output_folder(out, what=what, is_previous=is_previous, flag=flag,
                                       overwrite=overwrite)
        self._check = (what, is_previous, flag, overwrite)
        self.stage = self.out.parent / f".{self.out.name}.partial-{os.getpid()}"
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(self.stage, ignore_errors=True)
            self.stage.mkdir()
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise OutputPathError(flag, self.out, f"cannot be created: {why}") from None
        self.path = self.stage / self.out.name

    def commit(self) -> Path:
        """Move the finished folder to ``out`` (see the class doc); returns ``out``."""
        what, is_previous, flag, overwrite = self._check
        try:
            check_output_folder(self.out, what=what, is_previous=is_previous, flag=flag, overwrite=overwrite)
            if self.out.exists():
                os.replace(self.out, self.stage / ".replaced")
            os.replace(self.path, self.out)
        finally:
            self.abort()
        return self.out

    def abort(self) -> None:
        """Drop everything staged (nothing at ``out`` changes)."""
        shutil.rmtree(self.stage, ignore_errors=True)


def open_regular(path: str | Path, flags: int, mode: int = 0o666, *, flag: str = "") -> int:
    """A descriptor of ``path`` opened with ``flags`` without following a symbolic link and
    without blocking, then checked on the descriptor: a regular file only. Raises
    :class:`OutputLinkError` / :class:`OutputNotRegularError` (other OSErrors pass). The
    descriptor is left blocking, as files are."""
    p = Path(path)
    try:
        fd = os.open(p, flags | _NO_WAIT, mode)
    except OSError as exc:
        if p.is_symlink():
            raise OutputLinkError(flag, p, LINK_REASON) from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without a reader, a folder
            raise OutputNotRegularError(flag, p, NOT_REGULAR_REASON) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OutputNotRegularError(flag, p, NOT_REGULAR_REASON)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_appendable(path: str | Path, header: bytes, *, flag: str = "", what: str = "file") -> int:
    """A descriptor for appending to ``path`` under the writer rule: created new in an
    existing folder outside run folders (``header``, one line, written first), or an
    existing file appended to only if its first line is ``header`` (a file probench made
    for this purpose). Raises :class:`OutputPathError` otherwise; nothing is written then."""
    p = Path(path)
    if not header.endswith(b"\n") or header.count(b"\n") != 1:
        raise ValueError("header must be one line ending in a newline")
    if not p.parent.is_dir():
        raise OutputPathError(flag, p, f"{p.parent} is not an existing folder")
    _refuse_inside_run(flag, p, p.parent)
    try:  # created new, or an existing file that is one of ours
        try:
            fd, created = open_regular(p, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, flag=flag), True
        except FileExistsError:
            fd, created = open_regular(p, os.O_RDWR | os.O_APPEND, flag=flag), False
    except OSError as exc:  # permissions, a read-only file system
        raise OutputPathError(flag, p, f"cannot be written: {exc.strerror or type(exc).__name__}") from None
    try:
        if created:
            os.write(fd, header)
        elif os.pread(fd, len(header), 0) != header:
            raise OutputPathError(flag, p, f"exists and is not a probench {what}: not appended to; name "
                                  "a new file or one this kind of file was written to before")
    except BaseException:
        os.close(fd)
        raise
    return fd
