"""Any rosbag2 (mcap or sqlite3; a bag folder or a bare ``.mcap``/``.db3`` file), read with
``rosbags``: its topics, the camera topic to use, and its raw (CDR) messages in time order.

Every failure to open or read it is a :class:`BagError` of one line naming the bag.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from probench.bags.errors import BagError, BagUsageError
from probench.bags.layout import COMPRESSED_MSGTYPE, IMAGE_MSGTYPE, STRING_MSGTYPE

if TYPE_CHECKING:  # a name for the checker only: mypy skips rosbags (pyproject)
    from rosbags.rosbag2 import Reader

IMAGE_MSGTYPES = (IMAGE_MSGTYPE, COMPRESSED_MSGTYPE)
PROMPT_TOPIC_NAME = "prompt"  # the grounding node's prompt topic (relative, so any namespace)


@dataclass(frozen=True)
class Topic:
    name: str
    msgtype: str
    count: int

    def __str__(self) -> str:
        return f"{self.name} ({self.msgtype}, {self.count} msgs)"


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``: what a one-line error says about a library error."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def check_bag_files(path: Path) -> None:
    """The reader rule (docs/SECURITY.md) for a bag, before ``rosbags`` opens it by name: a
    bare ``.mcap``/``.db3`` is a regular file; every file of a bag folder is a regular file
    inside the folder (a link out of it, a FIFO, a device, a socket is refused), each checked
    on a descriptor opened without blocking, so no bag can hang ``ground`` or ``eval``; its
    ``metadata.yaml`` is held to the small-file cap (rosbags parses it whole). The counts it
    declares are only shown (a progress bar's total), never allocated for."""
    from probench.files import UserFileError, check_user_file, open_user_file

    try:
        if not path.is_dir():
            check_user_file(path, what="bag")
            return
        root = path.resolve()
        for entry in sorted(path.iterdir()):
            if entry.is_symlink() and not entry.resolve().is_relative_to(root):
                raise BagError(f"{path}: {entry.name} is a link out of the bag folder: not read")
            if entry.name == "metadata.yaml":  # parsed whole by rosbags: the small-file cap, not sparse
                open_user_file(entry, what="bag metadata", kind="small", text=True).close()
            elif not entry.is_dir():  # rosbags reads no sub-folder
                check_user_file(entry, what="bag file")
    except UserFileError as exc:
        raise BagError(str(exc)) from None


def open_reader(path: Path) -> Reader:
    """An opened ``rosbags.rosbag2.Reader`` on ``path`` (after :func:`check_bag_files`), or a
    one-line :class:`BagError`."""
    from rosbags.rosbag2 import Reader

    if not path.exists():
        raise BagError(f"{path}: no such bag")
    check_bag_files(path)
    try:
        reader = Reader(path)
        reader.open()
    except Exception as exc:  # any failure here means "not a readable bag"
        raise BagError(f"{path}: not a readable rosbag2: {one_line(exc)}") from exc
    return reader


def _listing(topics: Iterable[Topic]) -> str:
    return ", ".join(str(t) for t in topics) or "none"


class BagSource:
    """A rosbag2 opened for reading any of its topics."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._reader = open_reader(self.path)
        self.topics: dict[str, Topic] = {
            name: Topic(name, str(info.msgtype), int(info.msgcount))
            for name, info in self._reader.topics.items()
        }
        self.start_ns = int(self._reader.start_time) if self._reader.message_count else 0
        suffixes = {p.suffix for p in self.path.rglob("*")} if self.path.is_dir() else {self.path.suffix}
        self.storage = "sqlite3" if ".db3" in suffixes else "mcap"

    # -- choosing topics ----------------------------------------------------------------
    def image_topics(self, exclude: Iterable[str] = ()) -> list[Topic]:
        skip = set(exclude)
        return [t for t in self.topics.values() if t.msgtype in IMAGE_MSGTYPES and t.name not in skip]

    def image_topic(self, requested: str | None = None, exclude: Iterable[str] = ()) -> Topic:
        """The camera topic: ``requested``, else the only camera in the bag (leaving out the
        topics in ``exclude``, e.g. depth images).

        A raw topic and its image_transport twin ``<topic>/compressed`` are one camera: the
        raw one is taken (no JPEG loss). Unknown or wrongly typed names are usage errors that
        list the image topics there are; a bag without any is a :class:`BagError`."""
        images = self.image_topics(exclude)
        if requested is not None:
            topic = self.topics.get(requested)
            if topic is None:
                raise BagUsageError(
                    f"--image-topic {requested}: no such topic in {self.path}; "
                    f"image topics: {_listing(images)}"
                )
            if topic.msgtype not in IMAGE_MSGTYPES:
                raise BagUsageError(
                    f"--image-topic {requested} is {topic.msgtype}, not an image; image topics: "
                    f"{_listing(images)}"
                )
            return topic
        if not images:
            raise BagError(
                f"{self.path}: no image topic (sensor_msgs/msg/Image or CompressedImage); topics: "
                f"{_listing(self.topics.values())}"
            )
        cameras = {t.name.removesuffix("/compressed") for t in images}
        if len(cameras) > 1:
            raise BagUsageError(
                f"{self.path} has {len(images)} image topics: {_listing(images)}; "
                "choose one with --image-topic"
            )
        return min(images, key=lambda t: t.msgtype != IMAGE_MSGTYPE)  # the raw one when both exist

    def prompt_topic(self, requested: str | None) -> Topic | None:
        """The recorded prompt topic: ``requested``; ``"none"``: none; ``None`` (auto): the
        std_msgs/String topic named ``.../prompt`` if there is exactly one."""
        return self.named_topic(requested, STRING_MSGTYPE, PROMPT_TOPIC_NAME, "--prompt-topic")

    def named_topic(self, requested: str | None, msgtype: str, name: str, flag: str) -> Topic | None:
        """A topic of ``msgtype``: ``requested`` (``flag``'s value; "none": none), else (None)
        the one whose last name is ``name``, if there is exactly one; one-line usage errors."""
        candidates = [t for t in self.topics.values() if t.msgtype == msgtype]
        if requested == "none":
            return None
        if requested is not None:
            topic = self.topics.get(requested)
            if topic is None or topic.msgtype != msgtype:
                what = "no such topic" if topic is None else f"is {topic.msgtype}, not {msgtype}"
                raise BagUsageError(f"{flag} {requested}: {what} in {self.path}; "
                                    f"{msgtype.rsplit('/', 1)[-1]} topics: {_listing(candidates)}")
            return topic
        named = [t for t in candidates if t.name.rsplit("/", 1)[-1] == name]
        if len(named) > 1:
            raise BagUsageError(
                f"{self.path} has {len(named)} {name} topics: {_listing(named)}; choose one with "
                f"{flag} (or {flag} none)"
            )
        return named[0] if named else None

    # -- reading ------------------------------------------------------------------------
    def messages(
        self, topics: Iterable[str], start: int | None = None, stop: int | None = None
    ) -> Iterator[tuple[str, int, bytes]]:
        """``(topic, log time ns, CDR bytes)`` of ``topics``, in time order; only those logged
        at or after ``start`` and before ``stop`` (ns) when given."""
        wanted = set(topics)
        conns = [c for c in self._reader.connections if c.topic in wanted]
        try:
            for conn, t, raw in self._reader.messages(connections=conns, start=start, stop=stop):
                yield conn.topic, int(t), bytes(raw)
        except Exception as exc:  # rosbags/sqlite/zstd errors: the bag is damaged
            raise BagError(f"{self.path}: corrupt bag data: {one_line(exc)}") from exc

    def first(self, topic: str) -> tuple[int, bytes] | None:
        """The first message of ``topic`` (log time, CDR bytes), or None when it has none."""
        for _, t, raw in self.messages([topic]):
            return t, raw
        return None

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> BagSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
