"""A bag's frame info is checked against the dataset embedded in the bag (which the
dataset hash covers): a frame info changed after the bag was written (other prompts,
another label space, an image id that is not an integer) is refused in one line, never
replayed with different prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probench.bags.errors import BagError
from probench.bags.reader import ProbenchBag

BAG = Path(__file__).resolve().parents[2] / "bags" / "probench-sample"


def _raw(info: dict) -> bytes:
    from probench.bags.typestore import typestore

    ts = typestore()
    string = ts.types["std_msgs/msg/String"]
    return bytes(ts.serialize_cdr(string(data=json.dumps(info)), "std_msgs/msg/String"))


def test_a_changed_frame_info_is_refused() -> None:
    with ProbenchBag(BAG) as bag:
        t, info = bag.frame_infos()[0]
        assert bag._frame_info(_raw(info), t) == info  # as written: accepted
        tampered = json.loads(json.dumps(info))
        tampered["label_space"][0]["orig"] = "something else entirely"
        with pytest.raises(BagError, match="label_space differ"):
            bag._frame_info(_raw(tampered), t)
        tampered = {**info, "label_space": info["label_space"][1:]}
        with pytest.raises(BagError, match="does not match the bag's dataset"):
            bag._frame_info(_raw(tampered), t)
        for bad_id in (str(info["image_id"]), float(info["image_id"]) + 0.5, True):
            with pytest.raises(BagError, match="not in the dataset"):
                bag._frame_info(_raw({**info, "image_id": bad_id}), t)


def test_a_bag_that_cannot_be_written_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only output (simulated: the tests run as root, whom chmod does not stop) was an
    internal error."""
    from probench.bags import writer
    from probench.cli import main

    def read_only(*args: object, **kw: object) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path / "ro" / "bag"))

    monkeypatch.setattr(writer, "write_bag", read_only)
    data = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"
    assert main(["bag", "--dataset", str(data), "--out", str(tmp_path / "ro" / "bag"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "cannot write" in err and "Permission denied" in err and err.count("\n") == 1
