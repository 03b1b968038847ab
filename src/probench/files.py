"""The one bounded reader of files a user names: profiles, annotations, run folders' JSON,
prompts CSVs, refcoco pickles, parameter files (docs/SECURITY.md).

Every such file is read through :func:`open_user_file` / :func:`read_user_bytes` /
:func:`read_user_json`, which

- accept a **regular file** only: a FIFO, a device (``/dev/zero``), a socket or a folder is
  refused. The file is opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open
  descriptor, so a FIFO with no writer cannot hang the open, and a symlink swapped between
  a check and the open changes nothing (the checks are of what was opened);
- read at most a **size cap** (:data:`SIZE_CAPS`, per kind of file): a larger file is refused
  from its size, before any byte is read, and a file growing while it is read is refused
  when the cap is passed;
- refuse a **sparse** text or JSON file from its shape (holes read as NUL bytes, which no
  such file holds), before reading it;
- parse JSON with a **nesting cap** (:data:`probench.jsonio.MAX_JSON_DEPTH` levels);
- raise :class:`UserFileError`: one line naming the file and the reason.
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from probench.errors import CheckFailed
from probench.jsonio import parse

__all__ = ["MIB", "SIZE_CAPS", "UserFileError", "check_user_file", "open_user_file", "read_user_bytes",
           "read_user_json", "size_cap"]

MIB = 1 << 20
# The size caps, by kind of file (documented in docs/SECURITY.md). A Pro-Bench-size
# annotations.json is ~40 MiB and a RefCOCO refs pickle ~50 MiB: the caps leave room for
# datasets many times larger while keeping a hostile file far from exhausting memory.
SIZE_CAPS: dict[str, int] = {
    "annotations": 2048 * MIB,  # a dataset's annotations.json, an importer's COCO JSON
    "pickle": 1024 * MIB,  # a RefCOCO refs(...).p
    "csv": 256 * MIB,  # a prompts CSV
    "run": 1024 * MIB,  # run folders' JSON and JSON-lines (predictions, logs, metrics)
    "small": 16 * MIB,  # profiles, run.json, parameter and prompt files, bag metadata
}


class UserFileError(CheckFailed):
    """A file a user named that probench will not read (not a regular file, too large, too
    deeply nested, unreadable, not JSON): one line naming the file (exit 1). ``reason`` is
    the message without the file's name, for a caller that names the file its own way."""

    def __init__(self, what: str, path: Path, reason: str) -> None:
        super().__init__(f"{what} {path}: {reason}")
        self.path, self.reason = path, reason


_NOT_REGULAR = "not a regular file (a FIFO, device or socket is not read)"


def size_cap(kind: str) -> int:
    """The size cap of a kind of file (:data:`SIZE_CAPS`), in bytes."""
    return SIZE_CAPS[kind]


def _size_text(n: int) -> str:
    return f"{n / MIB:.0f} MiB" if n >= MIB else f"{n} bytes"


def _open_fd(path: Path, what: str, follow: bool) -> int:
    """A descriptor of ``path`` opened for reading without blocking, or a UserFileError."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    try:
        return os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise UserFileError(what, path, "no such file") from None
    except IsADirectoryError:
        raise UserFileError(what, path, "is a folder, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a device without its driver)
            raise UserFileError(what, path, _NOT_REGULAR) from None
        if not follow and os.path.islink(path):
            raise UserFileError(what, path, "is a symbolic link; probench does not follow links "
                                "inside a folder it writes") from None
        raise UserFileError(what, path, f"cannot open: {exc.strerror or type(exc).__name__}") from None


def _has_holes(fd: int, size: int) -> bool:
    """Whether the file has a hole (a sparse file: ranges never written, read as NUL bytes),
    asked of the file system without reading (``SEEK_HOLE``; where it is not supported the
    answer is no)."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_hole is None or size == 0:
        return False
    try:
        return os.lseek(fd, 0, seek_hole) < size
    except OSError:
        return False
    finally:
        os.lseek(fd, 0, os.SEEK_SET)


def _regular(fd: int, path: Path, what: str) -> os.stat_result:
    """The status of an open descriptor of a regular file, or a UserFileError."""
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise UserFileError(what, path, "is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise UserFileError(what, path, _NOT_REGULAR)
    return st


def check_user_file(path: str | Path, *, what: str = "file", follow: bool = True) -> int:
    """The size of ``path`` once it passed the reader's checks without a byte read: a
    regular file, opened without blocking and checked on the descriptor. For a file a
    library opens by its name (a bag's storage file), so a FIFO cannot hang it."""
    p = Path(path)
    fd = _open_fd(p, what, follow)
    try:
        return _regular(fd, p, what).st_size
    finally:
        os.close(fd)


def open_user_file(path: str | Path, *, what: str = "file", kind: str = "small",
                   follow: bool = True, text: bool = False) -> BinaryIO:
    """``path`` opened for binary reading (a regular file of at most the kind's size cap),
    for a caller that streams it (csv, pickle). Reads past the cap raise
    :class:`UserFileError`. ``what`` names the file in errors ("profile", "--prompts");
    ``follow=False`` refuses a symbolic link (a run folder's own parts); ``text``: a text
    file (JSON, CSV, INI), so a sparse file, whose holes read as NUL bytes no text holds, is
    refused from its shape before a byte is read."""
    p = Path(path)
    cap = SIZE_CAPS[kind]
    fd = _open_fd(p, what, follow)
    try:
        st = _regular(fd, p, what)
        if st.st_size > cap:
            raise UserFileError(what, p, f"{_size_text(st.st_size)} is over the {_size_text(cap)} "
                                f"limit for this kind of file")
        if text and _has_holes(fd, st.st_size):
            raise UserFileError(what, p, "is a sparse file (its holes read as NUL bytes, which no text or "
                                "JSON file holds): not read")
        os.set_blocking(fd, True)
        raw = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    return _Capped(raw, p, what, cap, st.st_size)


class _Capped(io.BufferedReader):
    """A buffered reader that refuses to read past ``cap`` bytes (a file growing while read)."""

    def __init__(self, raw: Any, path: Path, what: str, cap: int, size: int) -> None:
        super().__init__(raw)
        self._cap, self._path, self._what, self._n, self._size = cap, path, what, 0, size

    def _count(self, data: bytes) -> bytes:
        self._add(len(data))
        return data

    def _add(self, n: int) -> None:
        self._n += n
        if self._n > self._cap:
            raise UserFileError(self._what, self._path, f"grew past the {_size_text(self._cap)} limit "
                                "while it was read")

    def _room(self, size: int | None) -> int:
        """At most the cap and one byte: a read never allocates more than the cap allows."""
        left = self._cap - self._n + 1
        return left if size is None or size < 0 else min(size, left)

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes, in pieces no larger than what the file held when opened (and
        a MiB): a request for 2**62 bytes (a pickle's length field) allocates no such buffer."""
        want = self._room(size)
        pieces = []
        while want > 0:
            piece = self._count(super().read(min(want, max(self._size - self._n, 0) + MIB)))
            if not piece:
                break
            pieces.append(piece)
            want -= len(piece)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def read1(self, size: int = -1) -> bytes:
        return self._count(super().read1(self._room(size)))

    def readline(self, size: int | None = -1) -> bytes:
        return self._count(super().readline(self._room(size)))

    def readinto(self, b: Any) -> int:
        n = super().readinto(b)
        self._add(n)
        return n


def read_user_bytes(path: str | Path, *, what: str = "file", kind: str = "small",
                    follow: bool = True, text: bool = False) -> bytes:
    """The bytes of ``path`` under the bounded reader's rules (module doc; ``text``: see
    :func:`open_user_file`)."""
    p = Path(path)
    with open_user_file(p, what=what, kind=kind, follow=follow, text=text) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise UserFileError(what, p, f"cannot read: {exc.strerror or type(exc).__name__}") from None


def read_user_json(path: str | Path, *, what: str = "file", kind: str = "small", follow: bool = True) -> Any:
    """The JSON document at ``path`` (bounded reader rules, nesting cap); a
    :class:`UserFileError` naming the file when it is not JSON."""
    return read_user_json_finite(path, what=what, kind=kind, follow=follow)[0]


def read_user_json_finite(path: str | Path, *, what: str = "file", kind: str = "small",
                          follow: bool = True) -> tuple[Any, bool]:
    """:func:`read_user_json` and whether the document is known to hold no NaN or infinity
    (:func:`probench.jsonio.parse`)."""
    p = Path(path)
    data = read_user_bytes(p, what=what, kind=kind, follow=follow, text=True)
    try:
        return parse(data)
    except UnicodeDecodeError as exc:
        raise UserFileError(what, p, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UserFileError(what, p, f"not valid JSON: {exc}") from None
