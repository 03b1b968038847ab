"""The reader rule for bags (probench.bags.source.check_bag_files): a bare .mcap/.db3 must be
a regular file, and every file of a bag folder a regular file inside it, each checked on a
descriptor opened without blocking, before rosbags opens anything by name. A FIFO as --bag
blocked ``ground`` and ``eval`` forever; now each is one line, exit 1, at once."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from helpers.hostile import returns_within
from probench.bags.errors import BagError
from probench.bags.reader import ProbenchBag
from probench.bags.source import BagSource
from probench.cli import main

BAG = Path(__file__).resolve().parents[2] / "bags" / "probench-sample"


def _hostile_bag(tmp_path: Path, kind: str) -> Path:
    if kind == "fifo":
        path = tmp_path / "bag.mcap"
        os.mkfifo(path)
        return path
    folder = tmp_path / "bag"
    shutil.copytree(BAG, folder)
    storage = next(p for p in folder.iterdir() if p.suffix == ".mcap")
    storage.unlink()
    if kind == "fifo storage file":
        os.mkfifo(storage)
    elif kind == "socket storage file":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(storage))
        sock.close()
    else:  # a link out of the bag folder
        (tmp_path / "elsewhere.mcap").write_bytes((BAG / storage.name).read_bytes())
        storage.symlink_to(tmp_path / "elsewhere.mcap")
    return folder


KINDS = ["fifo", "fifo storage file", "socket storage file", "link out of the folder"]
WHY = {
    "fifo": "not a regular file",
    "fifo storage file": "not a regular file",
    "socket storage file": "not a regular file",
    "link out of the folder": "link out of the bag folder",
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_bag_is_refused_before_it_is_opened(tmp_path: Path, kind: str) -> None:
    path = _hostile_bag(tmp_path, kind)
    for opener in (BagSource, ProbenchBag):
        result = returns_within(lambda: opener(path))  # noqa: B023 - called at once
        assert isinstance(result, BagError) and WHY[kind] in str(result), result
        assert "\n" not in str(result)


def test_a_link_inside_the_bag_folder_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "bag"
    shutil.copytree(BAG, folder)
    storage = next(p for p in folder.iterdir() if p.suffix == ".mcap")
    storage.rename(folder / "real.mcap.data")
    storage.symlink_to(folder / "real.mcap.data")
    with ProbenchBag(folder) as bag:
        assert bag.n_frames > 0


@pytest.mark.parametrize("command", ["ground", "eval"])
def test_a_fifo_as_bag_does_not_block_ground_or_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    fifo = _hostile_bag(tmp_path, "fifo")
    args = {
        "ground": [
            "ground",
            "--bag",
            str(fifo),
            "--model",
            "test-instant",
            "--prompt",
            "a cup",
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
        ],
        "eval": ["eval", "--model", "test-instant", "--bag", str(fifo), "--out", str(tmp_path / "run")],
    }[command]
    rc = returns_within(lambda: main(args))
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and "not a regular file" in err, (rc, err)
    assert not (tmp_path / "o").exists()


def test_a_huge_sparse_metadata_file_is_refused_unread(tmp_path: Path) -> None:
    folder = tmp_path / "bag"
    shutil.copytree(BAG, folder)
    with (folder / "metadata.yaml").open("r+b") as fh:
        fh.truncate(64 << 20)  # holes past the text (and over the 16 MiB cap for metadata)
    with pytest.raises(BagError, match=r"bag metadata .*(sparse|limit)"):
        BagSource(folder)
