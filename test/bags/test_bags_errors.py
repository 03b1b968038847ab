"""Bad bags and bad `probench bag` calls end in one clear line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probench.bags.errors import BagError
from probench.bags.reader import ProbenchBag
from probench.bags.writer import write_bag
from probench.data.dataset import load_dataset


def _string_only_bag(path: Path) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    w = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    w.open()
    c = w.add_connection("/chatter", "std_msgs/msg/String", typestore=ts)
    w.write(c, 1, ts.serialize_cdr(ts.types["std_msgs/msg/String"](data="hi"), "std_msgs/msg/String"))
    w.close()


def test_not_a_bag(tmp_path: Path) -> None:
    with pytest.raises(BagError, match="no such bag"):
        ProbenchBag(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BagError, match="not a readable rosbag2"):
        ProbenchBag(tmp_path / "empty")
    (tmp_path / "file.mcap").write_bytes(b"hello, not mcap")
    with pytest.raises(BagError, match="not a readable rosbag2"):
        ProbenchBag(tmp_path / "file.mcap")


def test_missing_topics(tmp_path: Path) -> None:
    _string_only_bag(tmp_path / "chatter")
    missing = r"missing topic\(s\) /probench/dataset, /probench/frame_info, /camera"
    with pytest.raises(BagError, match=missing):
        ProbenchBag(tmp_path / "chatter")


def test_corrupt_storage(image_dataset: Path, tmp_path: Path) -> None:
    write_bag(load_dataset(image_dataset), tmp_path / "bag", progress=False)
    mcap = next((tmp_path / "bag").glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])  # truncated, e.g. a copy that died
    with pytest.raises(BagError) as err, ProbenchBag(tmp_path / "bag") as bag:
        list(bag.frames())
    assert "\n" not in str(err.value) and str(tmp_path / "bag") in str(err.value)


def test_sqlite_corrupt(image_dataset: Path, tmp_path: Path) -> None:
    write_bag(load_dataset(image_dataset), tmp_path / "bag", storage="sqlite3", progress=False)
    db = next((tmp_path / "bag").glob("*.db3"))
    db.write_bytes(b"\0" * 100)
    with pytest.raises(BagError, match="bag"), ProbenchBag(tmp_path / "bag") as bag:
        list(bag.frames())


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "probench", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_bag(image_dataset: Path, tmp_path: Path) -> None:
    ok = _run("bag", "--dataset", str(image_dataset), "--out", str(tmp_path / "b"), "--storage", "sqlite3",
              "--quiet")
    assert ok.returncode == 0, ok.stderr
    assert "4 frames" in ok.stdout and "sqlite3" in ok.stdout
    again = _run("bag", "--dataset", str(image_dataset), "--out", str(tmp_path / "b"))
    assert again.returncode == 2
    assert again.stderr.strip().count("\n") == 0 and "exists already" in again.stderr
    nods = _run("bag", "--dataset", str(tmp_path / "nope"), "--out", str(tmp_path / "c"))
    assert nods.returncode == 1 and "Traceback" not in nods.stderr and "annotations.json" in nods.stderr


def test_embedded_dataset_must_match_its_hash(image_dataset: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import probench.bags.writer as writer

    real = writer.dataset_message
    monkeypatch.setattr(writer, "dataset_message", lambda ds: {**real(ds), "dataset_hash": "sha256:0"})
    write_bag(load_dataset(image_dataset), tmp_path / "bag", progress=False)
    with pytest.raises(BagError, match="does not match its content"):
        ProbenchBag(tmp_path / "bag")
