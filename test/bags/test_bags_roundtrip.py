"""probench bags: written to mcap and sqlite3 they read back identically to the dataset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from probench.bags.errors import BagError, BagUsageError
from probench.bags.reader import ProbenchBag
from probench.bags.writer import write_bag
from probench.data.dataset import load_dataset


def _read_all(path: Path) -> tuple[list[tuple[int, dict, np.ndarray]], str, dict]:
    with ProbenchBag(path) as bag:
        frames = [(f.image_id, f.info, f.rgb()) for f in bag.frames()]
        return frames, bag.dataset_hash, bag.dataset.raw


def test_mcap_and_sqlite3_read_back_identically(image_dataset: Path, tmp_path: Path) -> None:
    ds = load_dataset(image_dataset)
    s1 = write_bag(ds, tmp_path / "a", storage="mcap", progress=False)
    s2 = write_bag(ds, tmp_path / "b", storage="sqlite3", progress=False)
    assert (s1.n_frames, s2.n_frames) == (4, 4)
    assert list((tmp_path / "a").glob("*.mcap")) and list((tmp_path / "b").glob("*.db3"))
    fa, ha, ra = _read_all(tmp_path / "a")
    fb, hb, rb = _read_all(tmp_path / "b")
    assert ha == hb == ds.content_hash
    assert ra == rb == ds.raw
    assert [f[0] for f in fa] == [f[0] for f in fb] == [1, 2, 3, 4]
    for (ia, infa, rgba), (_, infb, rgbb) in zip(fa, fb, strict=True):
        assert infa == infb
        np.testing.assert_array_equal(rgba, rgbb)
        np.testing.assert_array_equal(rgba, ds.read_image(ia))  # lossless rgb8
        assert infa["label_space"][1] == {
            "query_id": 2, "orig": "the rusty pipe", "cat": "pipe", "tmpl": "a photo of the rusty pipe"}
    with ProbenchBag(tmp_path / "b") as bag:
        assert bag.storage == "sqlite3" and not bag.compressed
        assert bag.custom_data["probench.dataset_hash"] == ds.content_hash
        assert bag.custom_data["probench.n_frames"] == "4"


def test_metadata_is_what_ros2_bag_play_reads(image_dataset: Path, tmp_path: Path) -> None:
    from ruamel.yaml import YAML

    write_bag(load_dataset(image_dataset), tmp_path / "bag", rate_hz=10.0, progress=False)
    meta = YAML(typ="safe").load((tmp_path / "bag" / "metadata.yaml").read_text())
    meta = meta["rosbag2_bagfile_information"]
    assert meta["version"] == 9 and meta["storage_identifier"] == "mcap"
    assert meta["message_count"] == 1 + 2 * 4
    assert meta["duration"]["nanoseconds"] == 4 * 100_000_000  # dataset at t0, frames at 10 Hz after
    topics = {t["topic_metadata"]["name"]: t["topic_metadata"]["type"]
              for t in meta["topics_with_message_count"]}
    assert topics == {"/camera/image_raw": "sensor_msgs/msg/Image",
                      "/probench/frame_info": "std_msgs/msg/String",
                      "/probench/dataset": "std_msgs/msg/String"}


def test_compressed_jpeg_frames(image_dataset: Path, tmp_path: Path) -> None:
    ds = load_dataset(image_dataset)
    write_bag(ds, tmp_path / "c", compressed=True, jpeg_quality=95, progress=False)
    with ProbenchBag(tmp_path / "c") as bag:
        assert bag.compressed
        for f in bag.frames():
            rgb, ref = f.rgb(), ds.read_image(f.image_id)
            assert rgb.shape == ref.shape
            msg = f.message()
            assert msg.format == "jpeg" and msg.header.frame_id == "probench_camera"
            assert np.abs(rgb.astype(int) - ref.astype(int)).mean() < 4


def test_frame_stamps_and_headers(image_dataset: Path, tmp_path: Path) -> None:
    write_bag(load_dataset(image_dataset), tmp_path / "bag", progress=False)
    with ProbenchBag(tmp_path / "bag") as bag:
        frames = list(bag.frames())
        stamps = [f.timestamp_ns for f in frames]
        assert np.allclose(np.diff(stamps), 1e9 / 30, atol=1)
        for f in frames:
            h = f.message().header
            assert h.stamp.sec * 10**9 + h.stamp.nanosec == f.timestamp_ns
            assert h.frame_id == "probench_camera"
            assert json.loads(json.dumps(f.info))["width"] == f.rgb().shape[1]


def test_writer_refuses_existing_output_and_bad_args(image_dataset: Path, tmp_path: Path) -> None:
    ds = load_dataset(image_dataset)
    (tmp_path / "exists").mkdir()
    with pytest.raises(BagUsageError, match="exists already"):
        write_bag(ds, tmp_path / "exists", progress=False)
    with pytest.raises(BagUsageError, match="unknown storage"):
        write_bag(ds, tmp_path / "x", storage="rosbag1", progress=False)
    with pytest.raises(BagUsageError, match="rate must be positive"):
        write_bag(ds, tmp_path / "x", rate_hz=0.0, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "exists"]


def test_killed_write_leaves_nothing_that_looks_like_a_bag(image_dataset: Path, tmp_path: Path) -> None:
    ds = load_dataset(image_dataset)
    (image_dataset / "images" / "003.png").write_bytes(b"not a png")
    with pytest.raises(Exception, match=r"003\.png"):
        write_bag(ds, tmp_path / "bag", progress=False)
    assert not (tmp_path / "bag").exists()
    assert not any(p.name.startswith(".bag.partial") for p in tmp_path.iterdir())


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_images_by_timestamp(image_dataset: Path, tmp_path: Path, storage: str) -> None:
    """The evaluator's access path: frame infos first, then a group's images by timestamp."""
    write_bag(load_dataset(image_dataset), tmp_path / "bag", storage=storage, progress=False)
    with ProbenchBag(tmp_path / "bag") as bag:
        frames = list(bag.frames())
        stamped = bag.frame_infos()
        assert [(t, i) for t, i in stamped] == [(f.timestamp_ns, f.info) for f in frames]
        ts = [t for t, _ in stamped]
        raw = {f.timestamp_ns: f.raw for f in frames}
        for pick in ([ts[2], ts[0], ts[3]], ts[1:3], ts, [ts[3]]):  # gaps, runs, all, one
            assert bag.images_at(pick) == [raw[t] for t in pick]
        with pytest.raises(BagError, match="no image at"):
            bag.images_at([ts[0] + 1])
