"""Atomic file writes: a reader never sees a half-written file, a crash never leaves one."""

from __future__ import annotations

import glob
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process umask (read by setting it and putting it back, under a lock)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``.

    The file gets the mode a plain ``open()`` would give (0666 minus the umask, so 0644
    under umask 022): ``mkstemp`` creates 0600, which other users, a web server or a CI
    artifact upload could not read."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path next to ``path`` (same suffix, so writers that pick a format from
    it still can) for a file written incrementally; moved over ``path`` when the block ends
    without an error, removed otherwise. Same mode as :func:`write_bytes_atomic`. The name
    carries the writer's PID (``.<stem>.<pid>.<random>.partial<suffix>``), so a leftover of
    a killed writer is recognised (:func:`stale_partials`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.{os.getpid()}.", suffix=f".partial{path.suffix}",
                                    dir=path.parent)
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        os.close(fd)
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists on this machine (ours or another user's)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def stale_partials(path: str | Path) -> list[Path]:
    """The temporary files :func:`replacing` left next to ``path`` in processes that no
    longer run (a SIGKILL leaves them): safe to remove."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    found = []
    for p in path.parent.glob(f".{glob.escape(path.stem)}.*.partial{glob.escape(path.suffix)}"):
        pid = p.name[len(path.stem) + 2:].split(".", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)) and p.is_file():
            found.append(p)
    return sorted(found)


def creation_problem(path: str | Path) -> str | None:
    """Why ``path`` (a file or folder to create, with any missing parents) cannot be
    created, or None. Probed for real (a temporary file in the nearest existing folder), so
    a read-only file system, missing permissions and a parent that is a file all show, as
    root too; nothing is left behind."""
    path = Path(path).absolute()
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".probench-probe-", dir=parent)
    except OSError as exc:
        return f"nothing can be created in {parent} ({exc.strerror or type(exc).__name__})"
    os.close(fd)
    os.unlink(probe)
    return None


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def json_text(obj: object, *, indent: int | None = 2) -> str:
    """JSON with sorted keys so that results diff cleanly between runs (one trailing newline)."""
    return json.dumps(obj, indent=indent, sort_keys=True) + "\n"


def write_json_atomic(path: str | Path, obj: object, *, indent: int | None = 2) -> None:
    """:func:`json_text` written atomically."""
    write_text_atomic(path, json_text(obj, indent=indent))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)
