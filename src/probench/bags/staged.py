"""A new rosbag2 written out of sight and moved into place only when complete.

The bag is written as ``<parent>/.<name>.partial-<pid>/<name>`` (so the storage file inside
gets its final name) and renamed to ``out`` by :meth:`StagedBagWriter.close`: a killed or
failed run never leaves something at ``out`` that looks like a finished bag. With
``overwrite`` an existing bag at ``out`` is replaced only then, and only if it is a bag.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from probench.bags.errors import BagUsageError
from probench.bags.layout import STORAGES

if TYPE_CHECKING:  # names for the checker only: mypy skips rosbags (pyproject)
    from rosbags.interfaces import Connection, Qos
    from rosbags.typesys.store import Typestore

BAG_FILE_SUFFIXES = (".mcap", ".db3", ".yaml")


def check_new_bag(out: Path, *, overwrite: bool, flag: str = "--out") -> None:
    """Usage errors about a bag folder to create: exists (without ``overwrite``), or exists
    and is not a bag (never replaced: ``overwrite`` must not delete someone's folder)."""
    if not out.exists() and not out.is_symlink():
        return
    if not overwrite:
        raise BagUsageError(f"{flag} {out} exists already; choose a new path or pass --overwrite")
    if not is_bag_folder(out):
        raise BagUsageError(
            f"{flag} {out} exists and is not a rosbag2 folder: not replaced, even with --overwrite"
        )


def stale_stages(out: Path) -> list[Path]:
    """Staging folders of ``out`` (``.<name>.partial-<pid>``) left by writers that no longer
    run (a SIGKILL leaves them): safe to remove."""
    from probench.cache.atomic import pid_alive

    if not out.parent.is_dir():
        return []
    prefix = f".{out.name}.partial-"
    return sorted(
        p for p in out.parent.iterdir()
        if p.name.startswith(prefix) and p.name[len(prefix):].isdigit() and p.is_dir()
        and not p.is_symlink() and not pid_alive(int(p.name[len(prefix):]))
    )


def is_bag_folder(path: Path) -> bool:
    """A folder holding a metadata.yaml and only rosbag2 storage files."""
    if path.is_symlink() or not path.is_dir() or not (path / "metadata.yaml").is_file():
        return False
    return all(p.is_file() and p.suffix in BAG_FILE_SUFFIXES for p in path.iterdir())


class StagedBagWriter:
    """``rosbags`` Writer for a new bag at ``out`` (see the module doc); a context manager
    that closes on success and aborts (removing everything it wrote) on an exception."""

    def __init__(self, out: str | Path, *, storage: str = "mcap", overwrite: bool = False) -> None:
        from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer

        self.out = Path(out)
        if storage not in STORAGES:
            raise BagUsageError(f"unknown storage {storage!r}; expected one of {', '.join(STORAGES)}")
        check_new_bag(self.out, overwrite=overwrite)
        self.overwrite = overwrite
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._stage = self.out.parent / f".{self.out.name}.partial-{os.getpid()}"
        shutil.rmtree(self._stage, ignore_errors=True)
        self._stage.mkdir()
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self.writer = Writer(self._stage / self.out.name, version=9, storage_plugin=plugin)
        if storage == "mcap":
            # zstd chunk compression: what `ros2 bag record --compression-mode storage` would do.
            self.writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._open = False

    def open(self) -> StagedBagWriter:
        try:
            self.writer.open()
        except BaseException:
            shutil.rmtree(self._stage, ignore_errors=True)
            raise
        self._open = True
        return self

    def add_topic(
        self, topic: str, msgtype: str, typestore: Typestore, qos: Sequence[Qos] = ()
    ) -> Connection:
        """A connection for ``topic`` (``qos``: rosbags ``Qos`` profiles ``ros2 bag play`` offers)."""
        return self.writer.add_connection(topic, msgtype, typestore=typestore, offered_qos_profiles=qos)

    def write(self, connection: Connection, t_ns: int, raw: bytes | memoryview) -> None:
        self.writer.write(connection, int(t_ns), raw)

    def set_custom_data(self, key: str, value: str) -> None:
        self.writer.set_custom_data(key, value)

    def close(self) -> Path:
        """Finish the bag and move it to ``out`` (replacing an old bag there with ``overwrite``)."""
        try:
            self.writer.close()
            self._open = False
            old = self._stage / ".replaced"
            if self.out.exists():  # checked again now: a bag may have appeared meanwhile
                check_new_bag(self.out, overwrite=self.overwrite)
                os.replace(self.out, old)
            os.replace(self._stage / self.out.name, self.out)
        finally:
            self.abort()
        return self.out

    def abort(self) -> None:
        """Drop everything written (nothing at ``out`` changes)."""
        if self._open:
            self.writer.abort()
            self._open = False
        shutil.rmtree(self._stage, ignore_errors=True)

    def __enter__(self) -> StagedBagWriter:
        return self.open()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
