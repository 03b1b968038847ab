"""Hostile files named to the dataset commands go through the one bounded reader
(probench.files): `validate` on an annotations.json linked to /dev/zero, a deeply nested
one, a refcoco pickle built as a "billion laughs", a pickle whose length field says 2**62,
a FIFO as a prompts table. Each is one line, exit 1, and costs < 500 MB at its peak."""

from __future__ import annotations

import json
import os
import pickle
import struct
from pathlib import Path

import pytest

from helpers.hostile import PEAK_LIMIT_MB, laughs_pickle, nested_json, one_line, run_measured
from helpers.infer_dataset import make_dataset
from probench.cli import main
from probench.data.errors import DatasetError
from probench.data.importers.refcoco import check_structure, read_refs

HERE = Path(__file__).resolve().parent / "importers"
INSTANCES = str(HERE / "refcoco_instances.json")



def test_validate_refuses_annotations_linked_to_dev_zero_in_little_memory(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data")
    (data / "annotations.json").unlink()
    (data / "annotations.json").symlink_to("/dev/zero")
    rc, err, peak = run_measured(["validate", str(data)], tmp_path)
    assert rc == 1 and "not a regular file" in one_line(err)
    assert peak < PEAK_LIMIT_MB


def test_deeply_nested_annotations_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = make_dataset(tmp_path / "data")
    (data / "annotations.json").write_text(nested_json(100_000))
    assert main(["validate", str(data)]) == 1
    out = capsys.readouterr()
    assert "nested deeper than 1024 levels" in one_line(out.out + out.err)


def test_a_billion_laughs_refs_pickle_is_refused_in_little_memory(tmp_path: Path) -> None:
    refs = json.loads((HERE / "refs_small.json").read_text())
    laughs = pickle.loads(laughs_pickle(60))
    for key in ("ref_id", "ann_id", "image_id"):
        bad = [dict(refs[0], **{key: {"x": laughs} if key == "image_id" else laughs}), *refs[1:]]
        src = tmp_path / f"refs-{key}.p"
        src.write_bytes(pickle.dumps(bad, protocol=2))
        assert src.stat().st_size < 4096
        images = tmp_path / "train2014"
        images.mkdir(exist_ok=True)
        rc, err, peak = run_measured(["import", "refcoco", "--refs", str(src), "--instances", INSTANCES,
                                      "--images", str(images), "--out", str(tmp_path / "ds")], tmp_path,
                                     timeout=60)
        assert rc == 1 and "over its budget" in one_line(err), err
        assert peak < PEAK_LIMIT_MB


def test_the_structure_budget_counts_shared_references_each_time(tmp_path: Path) -> None:
    leaf = list(range(10))
    shared = [leaf] * 10  # 10 references to one list of 10: 1 + 10 * 11 nodes walked
    check_structure(shared, tmp_path / "r.p", budget=111)
    with pytest.raises(DatasetError, match="over its budget of 110 nodes"):
        check_structure(shared, tmp_path / "r.p", budget=110)
    loop: list[object] = []
    loop.append(loop)  # a self-reference: refused by depth, never walked forever
    with pytest.raises(DatasetError, match="nests deeper than 1024"):
        check_structure(loop, tmp_path / "r.p", budget=10**9)


def test_a_pickle_length_of_2_to_the_62_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "refs.p"
    src.write_bytes(b"\x80\x04\x8d" + struct.pack("<Q", 1 << 62) + b"abc")  # BINUNICODE8, 2**62 bytes
    with pytest.raises(DatasetError, match="cannot read the refs pickle") as exc:
        read_refs(src)
    assert "\n" not in str(exc.value)
    src.write_bytes(b"\x80\x02}q\x00(X\x01\x00\x00\x00ah\x07u.")  # a BINGET of a memo slot never put
    with pytest.raises(DatasetError, match="cannot read the refs pickle"):
        read_refs(src)


def test_a_fifo_as_the_prompts_table_does_not_hang(tmp_path: Path) -> None:
    images = tmp_path / "src-images"
    for im in json.loads((HERE / "coco_small.json").read_text())["images"]:
        (images / im["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        (images / im["file_name"]).write_bytes(b"x")
    fifo = tmp_path / "prompts.csv"
    os.mkfifo(fifo)
    rc, err, _ = run_measured(["import", "coco", "--annotations", str(HERE / "coco_small.json"), "--images",
                               str(images), "--prompts", str(fifo), "--out", str(tmp_path / "ds")], tmp_path,
                              timeout=60)
    assert rc == 1 and "not a regular file" in one_line(err)


def test_an_instances_file_linked_to_dev_zero_is_refused(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A new case (not in the issue's list): the COCO instances file of `import refcoco`."""
    link = tmp_path / "instances.json"
    link.symlink_to("/dev/zero")
    images = tmp_path / "imgs"
    images.mkdir()
    assert main(["import", "refcoco", "--refs", str(HERE / "refs_small.json"), "--instances", str(link),
                 "--images", str(images), "--out", str(tmp_path / "ds")]) == 1
    assert "not a regular file" in one_line(capsys.readouterr().err)
