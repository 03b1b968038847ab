"""A new rosbag2 written out of sight and moved into place only when complete.

The bag is written out of sight and moved into place whole by :meth:`StagedBagWriter.close`
(the writer rule's :class:`probench.cache.output.StagedFolder`): a killed or failed run
never leaves something at ``out`` that looks like a finished bag. With ``overwrite`` an
existing bag at ``out`` is replaced only then, and only if it is a bag.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from probench.bags.errors import BagUsageError
from probench.bags.layout import STORAGES
from probench.cache.output import OutputPathError, StagedFolder, check_output_folder

if TYPE_CHECKING:  # names for the checker only: mypy skips rosbags (pyproject)
    from rosbags.interfaces import Connection, Qos
    from rosbags.typesys.store import Typestore

BAG_FILE_SUFFIXES = (".mcap", ".db3", ".yaml")


def check_new_bag(out: Path, *, overwrite: bool, flag: str = "--out") -> None:
    """The writer rule (:func:`probench.cache.output.check_output_folder`) for a bag folder to
    create: not a link, not inside a run folder; an existing bag replaced only with
    ``overwrite``, and a folder that is not a bag never (``overwrite`` must not delete
    someone's folder)."""
    try:
        check_output_folder(out, what="rosbag2", is_previous=is_bag_folder, flag=flag, overwrite=overwrite)
    except OutputPathError as exc:
        raise BagUsageError(str(exc)) from None


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

        if storage not in STORAGES:
            raise BagUsageError(f"unknown storage {storage!r}; expected one of {', '.join(STORAGES)}")
        self._staged = StagedFolder(out, what="rosbag2", is_previous=is_bag_folder, overwrite=overwrite)
        self.out = self._staged.out
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self.writer = Writer(self._staged.path, version=9, storage_plugin=plugin)
        if storage == "mcap":
            # zstd chunk compression: what `ros2 bag record --compression-mode storage` would do.
            self.writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._open = False

    def open(self) -> StagedBagWriter:
        try:
            self.writer.open()
        except BaseException:
            self._staged.abort()
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
            self._staged.commit()
        finally:
            self.abort()
        return self.out

    def abort(self) -> None:
        """Drop everything written (nothing at ``out`` changes)."""
        if self._open:
            self.writer.abort()
            self._open = False
        self._staged.abort()

    def __enter__(self) -> StagedBagWriter:
        return self.open()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
