"""Read a probench bag: its frames (in bag order) and the dataset embedded in it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.bags.errors import BagError
from probench.bags.layout import (
    BAG_FORMAT,
    COMPRESSED_MSGTYPE,
    COMPRESSED_TOPIC,
    DATASET_FOLDER_KEY,
    DATASET_TOPIC,
    FRAME_INFO_TOPIC,
    IMAGE_MSGTYPE,
    IMAGE_TOPIC,
    NEGATIVES_KEY,
)
from probench.bags.source import BagSource, one_line
from probench.data.dataset import Dataset
from probench.data.errors import DatasetError
from probench.data.negatives import NEGATIVES_SETTING, Negatives, negatives_of, with_negatives

if TYPE_CHECKING:  # names for the checker only: mypy skips rosbags (pyproject)
    from rosbags.typesys.stores.ros2_kilted import sensor_msgs__msg__CompressedImage as CompressedImage
    from rosbags.typesys.stores.ros2_kilted import sensor_msgs__msg__Image as Image

_FRAME_KEYS = ("image_id", "file_name", "width", "height", "domain", "label_space")


@dataclass(frozen=True)
class BagFrame:
    """One recorded frame: its info, and the image message as recorded (CDR bytes)."""

    image_id: int
    info: dict[str, Any]
    msgtype: str  # sensor_msgs/msg/Image or sensor_msgs/msg/CompressedImage
    raw: bytes  # the CDR-serialized message (rclpy can deserialize it as is)
    timestamp_ns: int

    def message(self) -> Image | CompressedImage:
        """The image message as a rosbags dataclass."""
        from probench.bags.typestore import typestore

        try:
            return typestore().deserialize_cdr(self.raw, self.msgtype)
        except Exception as exc:
            raise BagError(f"image {self.image_id}: corrupt {self.msgtype} message: {exc}") from exc

    def rgb(self) -> np.ndarray:
        """The frame as an RGB uint8 array (H, W, 3)."""
        return image_message_to_rgb(self.message(), self.msgtype, what=f"image {self.image_id}")


def image_message_to_rgb(msg: Image | CompressedImage, msgtype: str, *, what: str = "image") -> np.ndarray:
    if msgtype == COMPRESSED_MSGTYPE:
        import cv2

        bgr = cv2.imdecode(np.asarray(msg.data, dtype=np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise BagError(f"{what}: compressed data ({msg.format!r}) cannot be decoded")
        return np.ascontiguousarray(bgr[:, :, ::-1])
    h, w, step, enc = int(msg.height), int(msg.width), int(msg.step), str(msg.encoding)
    if enc not in ("rgb8", "bgr8"):
        raise BagError(f"{what}: encoding {enc!r} is not supported (rgb8 or bgr8)")
    data = np.asarray(msg.data, dtype=np.uint8)
    if step < w * 3 or data.size < step * h:
        raise BagError(f"{what}: {data.size} bytes do not hold {w}x{h} {enc} with step {step}")
    rgb = data[: step * h].reshape(h, step)[:, : w * 3].reshape(h, w, 3)
    if enc == "bgr8":
        rgb = rgb[:, :, ::-1]
    return np.ascontiguousarray(rgb)


class ProbenchBag:
    """A probench bag opened for reading. Bad bags raise :class:`BagError` with one line.

    It holds a :class:`BagSource` (opening, topics, storage, time-ordered raw messages) and
    adds what only a probench bag has: the embedded dataset and the frame infos."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._stamps: list[int] | None = None  # every frame's timestamp, ascending, once read
        self._source = BagSource(self.path)
        try:
            self._check_topics()
            self.storage = self._source.storage
            self._load_dataset()
        except BaseException:
            self._source.close()
            raise

    # -- structure ----------------------------------------------------------------------
    def _check_topics(self) -> None:
        topics = self._source.topics
        missing = [t for t in (DATASET_TOPIC, FRAME_INFO_TOPIC) if t not in topics]
        if IMAGE_TOPIC in topics:
            self.image_topic, self.image_msgtype = IMAGE_TOPIC, IMAGE_MSGTYPE
        elif COMPRESSED_TOPIC in topics:
            self.image_topic, self.image_msgtype = COMPRESSED_TOPIC, COMPRESSED_MSGTYPE
        else:
            missing.append(f"{IMAGE_TOPIC} (or {COMPRESSED_TOPIC})")
        if missing:
            raise BagError(f"{self.path}: not a probench bag: missing topic(s) {', '.join(missing)}")
        if topics[self.image_topic].msgtype != self.image_msgtype:
            raise BagError(
                f"{self.path}: topic {self.image_topic} has type {topics[self.image_topic].msgtype}, "
                f"expected {self.image_msgtype}"
            )
        self.compressed = self.image_topic == COMPRESSED_TOPIC
        self.n_frames = topics[self.image_topic].count
        self.custom_data = self._custom_data()
        # the folder the bag was made from (absolute), None in bags made before it was recorded
        folder = self.custom_data.get(DATASET_FOLDER_KEY)
        self.dataset_folder: str | None = str(folder) if folder else None

    def _custom_data(self) -> dict[str, str]:
        meta = self.path / "metadata.yaml" if self.path.is_dir() else None
        if meta is None or not meta.exists():
            return {}
        from ruamel.yaml import YAML

        from probench.files import UserFileError, read_user_bytes

        try:
            text = read_user_bytes(meta, what="bag metadata", kind="small", text=True).decode("utf-8")
        except (UserFileError, UnicodeDecodeError) as exc:
            raise BagError(f"{self.path}: cannot read its metadata: {exc}") from exc
        try:
            info = YAML(typ="safe").load(text)
            return dict(info["rosbag2_bagfile_information"].get("custom_data") or {})
        except Exception:  # noqa: BLE001 - metadata was already parsed by rosbags; be lenient
            return {}

    def _load_dataset(self) -> None:
        first = self._source.first(DATASET_TOPIC)
        if first is None:
            raise BagError(f"{self.path}: topic {DATASET_TOPIC} holds no message")
        _, raw = first
        try:
            payload = json.loads(self._string(raw, DATASET_TOPIC))
        except json.JSONDecodeError as exc:
            raise BagError(f"{self.path}: {DATASET_TOPIC} is not valid JSON: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("format") != BAG_FORMAT:
            raise BagError(f"{self.path}: {DATASET_TOPIC} is not a {BAG_FORMAT} dataset message")
        try:
            self.dataset = Dataset.from_dict(payload["annotations"])
        except Exception as exc:
            raise BagError(f"{self.path}: embedded dataset is malformed: {one_line(exc)}") from exc
        self.dataset_hash = str(payload.get("dataset_hash", ""))
        if self.dataset.content_hash != self.dataset_hash:
            raise BagError(
                f"{self.path}: embedded dataset hash {self.dataset_hash or '(none)'} does not match "
                f"its content ({self.dataset.content_hash}): the bag is corrupt"
            )
        self.negatives = self._recorded_negatives()
        self._recorded = self._asked = with_negatives(self.dataset, self.negatives)

    def _recorded_negatives(self) -> Negatives | None:
        """The absent queries ``probench bag --negatives`` put in the frames' label spaces."""
        text = self.custom_data.get(NEGATIVES_KEY)
        if text is None:
            return None
        try:
            return negatives_of({NEGATIVES_SETTING: json.loads(text)}, where=f"{self.path} metadata")
        except (json.JSONDecodeError, TypeError, DatasetError) as exc:
            raise BagError(f"{self.path}: metadata {NEGATIVES_KEY} is malformed: {one_line(exc)}") from None

    def add_negatives(self, negatives: Negatives | None) -> None:
        """Ask ``negatives`` (``probench eval --negatives``) on this bag's frames: their label
        spaces get the absent queries as :func:`probench.data.negatives.with_negatives` draws
        them. A bag made with other negatives is refused (its frames already hold those)."""
        if negatives is None or negatives == self.negatives:
            return
        if self.negatives is not None:
            raise BagError(f"{self.path} was made with --negatives {self.negatives.k} --negatives-seed "
                           f"{self.negatives.seed}; ask those, or make another bag")
        self.negatives = negatives
        self._asked = with_negatives(self.dataset, negatives)

    # -- reading ------------------------------------------------------------------------
    def _string(self, raw: bytes, topic: str) -> str:
        from probench.bags.typestore import typestore

        try:
            return str(typestore().deserialize_cdr(raw, "std_msgs/msg/String").data)
        except Exception as exc:
            raise BagError(f"{self.path}: corrupt std_msgs/String on {topic}: {one_line(exc)}") from exc

    def frames(self) -> Iterator[BagFrame]:
        """Every frame in bag order, paired with its frame info (same timestamp)."""
        infos: dict[int, dict[str, Any]] = {}
        images: dict[int, bytes] = {}
        seen = 0
        for topic, t, raw in self._source.messages([self.image_topic, FRAME_INFO_TOPIC]):
            if topic == FRAME_INFO_TOPIC:
                infos[t] = self._frame_info(raw, t)
            else:
                images[t] = raw
            if t in infos and t in images:
                info = infos.pop(t)
                seen += 1
                yield BagFrame(int(info["image_id"]), info, self.image_msgtype, images.pop(t), t)
        if images or infos:
            stamps = sorted(images) or sorted(infos)
            raise BagError(
                f"{self.path}: {len(images)} image(s) and {len(infos)} frame info(s) without a partner "
                f"(first at t={stamps[0]} ns)"
            )
        if seen == 0:
            raise BagError(f"{self.path}: the bag holds no frames")

    def frame_infos(self) -> list[tuple[int, dict[str, Any]]]:
        """``(timestamp_ns, frame info)`` of every frame, without reading any image: with
        :meth:`image_at`, a replay holds one group of frames in memory, not the whole bag."""
        out = [(t, self._frame_info(raw, t)) for _, t, raw in self._source.messages([FRAME_INFO_TOPIC])]
        self._stamps = sorted(t for t, _ in out)
        return out
    def iter_images(self, timestamps: list[int]) -> Iterator[bytes]:
        """The CDR bytes of the images recorded at ``timestamps`` (ascending, from
        :meth:`frame_infos`), lazily: frames adjacent in the bag are read in one sweep, and
        only one frame is held at a time, however long the list."""
        import bisect
        import itertools

        if any(b <= a for a, b in itertools.pairwise(timestamps)):
            raise BagError("iter_images wants strictly ascending timestamps")
        stamps = self._stamps if self._stamps is not None else sorted(t for t, _ in self.frame_infos())
        i = 0
        while i < len(timestamps):  # a run of frames that are neighbours in the bag
            j = i
            pos = bisect.bisect_left(stamps, timestamps[i])
            while j + 1 < len(timestamps) and pos + 1 < len(stamps) and stamps[pos + 1] == timestamps[j + 1]:
                j, pos = j + 1, pos + 1
            expected = iter(timestamps[i : j + 1])
            want: int | None = next(expected)
            sweep = self._source.messages([self.image_topic], start=timestamps[i], stop=timestamps[j] + 1)
            for _, t, raw in sweep:
                if t != want:
                    break
                yield raw
                want = next(expected, None)
                if want is None:
                    break
            if want is not None:
                raise BagError(f"{self.path}: no image at t={want} ns on {self.image_topic}")
            i = j + 1

    def images_at(self, timestamps: list[int]) -> list[bytes]:
        """Like :meth:`iter_images`, in any order, all at once."""
        wanted = sorted(set(timestamps))
        found = dict(zip(wanted, self.iter_images(wanted), strict=True))
        return [found[t] for t in timestamps]

    def _frame_info(self, raw: bytes, t: int) -> dict[str, Any]:
        try:
            info = json.loads(self._string(raw, FRAME_INFO_TOPIC))
        except json.JSONDecodeError as exc:
            raise BagError(f"{self.path}: frame info at t={t} ns is not JSON: {exc}") from exc
        if not isinstance(info, dict) or any(k not in info for k in _FRAME_KEYS):
            raise BagError(f"{self.path}: frame info at t={t} ns lacks one of {', '.join(_FRAME_KEYS)}")
        image_id = info["image_id"]
        if not isinstance(image_id, int) or isinstance(image_id, bool) or image_id not in self.dataset.images:
            raise BagError(
                f"{self.path}: frame at t={t} ns names image {info['image_id']!r}, not in the dataset"
            )
        # Checked against the embedded dataset (which its hash covers): a frame info changed in
        # the bag (another label space, other prompts) is refused, never replayed.
        from probench.bags.writer import frame_info

        expected = frame_info(self._recorded, image_id, info.get("index", 0))
        changed = sorted(k for k in expected if k != "index" and info.get(k) != expected[k])
        if changed:
            raise BagError(f"{self.path}: frame info at t={t} ns does not match the bag's dataset "
                           f"({', '.join(changed)} differ): the bag was changed after it was written")
        if self._asked is not self._recorded:  # eval --negatives on a bag made without
            info["label_space"] = frame_info(self._asked, image_id, info.get("index", 0))["label_space"]
        return info

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> ProbenchBag:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
