"""Write a Pro-Bench dataset as a rosbag2 that ``ros2 bag play`` accepts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probench.bags.errors import BagError, BagUsageError
from probench.bags.layout import (
    BAG_FORMAT,
    CAMERA_FRAME_ID,
    COMPRESSED_MSGTYPE,
    COMPRESSED_TOPIC,
    DATASET_FOLDER_KEY,
    DATASET_TOPIC,
    DEFAULT_START_NS,
    FRAME_INFO_TOPIC,
    IMAGE_MSGTYPE,
    IMAGE_TOPIC,
    NEGATIVES_KEY,
    STORAGES,
    STRING_MSGTYPE,
)
from probench.data.dataset import Dataset
from probench.data.negatives import Negatives, with_negatives
from probench.vocabulary import FORMULATIONS


@dataclass(frozen=True)
class BagSummary:
    path: Path
    storage: str
    n_frames: int
    compressed: bool
    size_bytes: int
    dataset_hash: str
    dataset_folder: str | None = None  # recorded in the metadata (None: not recorded)


def frame_info(dataset: Dataset, image_id: int, index: int) -> dict[str, object]:
    """What the evaluator needs to replay one frame and map detections back to query ids."""
    rec = dataset.images[image_id]
    label_space = []
    for qid in dataset.label_space(image_id):
        q = dataset.queries[qid]
        label_space.append({"query_id": qid, **{k: q.prompts[k] for k in FORMULATIONS}})
    return {
        "index": index,
        "image_id": image_id,
        "file_name": rec.file_name,
        "width": rec.width,
        "height": rec.height,
        "domain": rec.domain,
        "label_space": label_space,
    }


def dataset_message(dataset: Dataset) -> dict[str, object]:
    return {"format": BAG_FORMAT, "dataset_hash": dataset.content_hash, "annotations": dataset.raw}


def write_bag(
    dataset: Dataset,
    out: str | Path,
    *,
    storage: str = "mcap",
    compressed: bool = False,
    rate_hz: float = 30.0,
    jpeg_quality: int = 90,
    progress: bool = True,
    negatives: Negatives | None = None,
    record_folder: bool = True,
) -> BagSummary:
    """Write ``dataset`` (which must have its image files) as a probench bag at ``out``.
    ``negatives``: absent queries added to the frames' label spaces (data/negatives.py),
    recorded in the metadata; the embedded dataset stays the one given.

    The bag is written into a temporary sibling folder and renamed at the end, so a killed
    run never leaves something at ``out`` that looks like a finished bag. ``record_folder``:
    the dataset's folder (absolute) goes into the metadata, where a run's report finds the
    images again; off for a bag to share (it names a folder of this machine)."""
    from tqdm import tqdm

    from probench.bags.staged import StagedBagWriter
    from probench.bags.typestore import typestore

    out = Path(out)
    if storage not in STORAGES:
        raise BagUsageError(f"unknown storage {storage!r}; expected one of {', '.join(STORAGES)}")
    if out.exists():
        raise BagUsageError(f"{out} exists already; choose a new --out or remove it")
    if not rate_hz > 0:
        raise BagUsageError(f"the frame rate must be positive, got {rate_hz}")
    if dataset.root is None:
        raise BagUsageError("the dataset has no image folder (built in memory)")
    if not dataset.images:
        raise BagUsageError("the dataset has no images")

    ts = typestore()
    Image = ts.types[IMAGE_MSGTYPE]
    CompressedImage = ts.types[COMPRESSED_MSGTYPE]
    String = ts.types[STRING_MSGTYPE]
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]

    image_ids = sorted(dataset.images)
    period_ns = round(1e9 / rate_hz)
    with StagedBagWriter(out, storage=storage) as writer:
        writer.set_custom_data("probench.format", BAG_FORMAT)
        writer.set_custom_data("probench.dataset_hash", dataset.content_hash)
        writer.set_custom_data("probench.n_frames", str(len(image_ids)))
        if negatives is not None:  # only then: a bag without is byte for byte what it was
            writer.set_custom_data(NEGATIVES_KEY, json.dumps(negatives.record(), sort_keys=True))
        asked = with_negatives(dataset, negatives)  # the label spaces of the frame infos
        folder = str(dataset.root.resolve()) if record_folder else None
        if folder is not None:
            writer.set_custom_data(DATASET_FOLDER_KEY, folder)
        image_topic, image_type = (
            (COMPRESSED_TOPIC, COMPRESSED_MSGTYPE) if compressed else (IMAGE_TOPIC, IMAGE_MSGTYPE)
        )
        c_image = writer.add_topic(image_topic, image_type, ts)
        c_info = writer.add_topic(FRAME_INFO_TOPIC, STRING_MSGTYPE, ts)
        c_data = writer.add_topic(DATASET_TOPIC, STRING_MSGTYPE, ts)
        t0 = DEFAULT_START_NS
        payload = json.dumps(dataset_message(dataset), sort_keys=True, separators=(",", ":"))
        writer.write(c_data, t0, ts.serialize_cdr(String(data=payload), STRING_MSGTYPE))
        # off when stderr is no terminal (a log, a pipe): tqdm's disable=None
        bar = tqdm(image_ids, desc="bag", unit="frame", disable=None if progress else True)
        for index, image_id in enumerate(bar):
            t = t0 + (index + 1) * period_ns
            rgb = dataset.read_image(image_id)
            rec = dataset.images[image_id]
            if rgb.shape[:2] != (rec.height, rec.width):
                raise BagError(
                    f"image {image_id} ({rec.file_name}): file is {rgb.shape[1]}x{rgb.shape[0]}, "
                    f"annotations say {rec.width}x{rec.height}"
                )
            header = Header(
                stamp=Time(sec=t // 1_000_000_000, nanosec=t % 1_000_000_000), frame_id=CAMERA_FRAME_ID
            )
            if compressed:
                data = _original_jpeg(dataset.image_path(image_id))
                if data is None:
                    data = _jpeg(rgb, jpeg_quality)
                msg = CompressedImage(header=header, format="jpeg", data=data)
            else:
                h, w = rgb.shape[:2]
                msg = Image(
                    header=header, height=h, width=w, encoding="rgb8", is_bigendian=0, step=w * 3,
                    data=np.ascontiguousarray(rgb).reshape(-1),
                )
            writer.write(c_image, t, ts.serialize_cdr(msg, image_type))
            info = json.dumps(frame_info(asked, image_id, index), sort_keys=True)
            writer.write(c_info, t, ts.serialize_cdr(String(data=info), STRING_MSGTYPE))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return BagSummary(out, storage, len(image_ids), compressed, size, dataset.content_hash, folder)


def _jpeg(rgb: np.ndarray, quality: int) -> np.ndarray:
    import cv2

    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise BagError("JPEG encoding failed")
    return buf.reshape(-1)


def _original_jpeg(path: Path) -> np.ndarray | None:
    """A JPEG file's own bytes: stored as is, the frame decodes to exactly the pixels offline
    inference reads (re-encoding would lose detail and grow nothing but error)."""
    data = np.fromfile(path, dtype=np.uint8)
    if path.suffix.lower() in (".jpg", ".jpeg") and data[:3].tobytes() == b"\xff\xd8\xff":
        return data
    return None
