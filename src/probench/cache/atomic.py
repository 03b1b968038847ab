"""Atomic file writes: a reader never sees a half-written file, a crash never leaves one."""

from __future__ import annotations

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
    without an error, removed otherwise. Same mode as :func:`write_bytes_atomic`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".partial{path.suffix}", dir=path.parent)
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


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, obj: object, *, indent: int | None = 2) -> None:
    """JSON with sorted keys so that results diff cleanly between runs."""
    write_text_atomic(path, json.dumps(obj, indent=indent, sort_keys=True) + "\n")


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
