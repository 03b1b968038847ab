"""Datasets stay inside themselves: an import (with or without --copy) refuses an image
that is a link leaving --images, a copy never widens a file's permissions, `validate` names
a link that leaves the dataset and a declared size the file's header contradicts, and the
offline readers (infer, latency, bag) hold images to the node's pixel budget, from the
header, in little memory."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from helpers.hostile import PEAK_LIMIT_MB, run_measured
from helpers.image_bomb import png_bomb
from helpers.infer_dataset import make_dataset
from probench.cli import main

HERE = Path(__file__).resolve().parent / "importers"
SMALL = HERE / "coco_small.json"


def _source_images(tmp_path: Path) -> tuple[Path, list[str]]:
    names = [im["file_name"] for im in json.loads(SMALL.read_text())["images"]]
    root = tmp_path / "src-images"
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"\x89PNG not really")
    return root, names


@pytest.mark.parametrize("copy", [True, False])
def test_an_import_refuses_a_link_that_leaves_the_images_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], copy: bool
) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret\n")
    secret.chmod(0o640)
    images, names = _source_images(tmp_path)
    (images / names[0]).unlink()
    (images / names[0]).symlink_to(secret)
    out = tmp_path / "ds"
    args = ["import", "coco", "--annotations", str(SMALL), "--images", str(images), "--out", str(out)]
    assert main([*args, *(["--copy"] if copy else [])]) == 1
    captured = capsys.readouterr()
    assert "is a link that leaves" in captured.out + captured.err
    assert not (out / "annotations.json").exists()
    assert not any(p.read_bytes() == secret.read_bytes() for p in out.rglob("*") if p.is_file())


def test_a_copy_never_widens_permissions(tmp_path: Path) -> None:
    images, names = _source_images(tmp_path)
    (images / names[0]).chmod(0o640)
    out = tmp_path / "ds"
    assert main(["import", "coco", "--annotations", str(SMALL), "--images", str(images), "--out", str(out),
                 "--copy"]) == 0
    copied = out / "images" / names[0]
    assert not copied.is_symlink() and stat.S_IMODE(copied.stat().st_mode) & 0o077 == 0o040


def test_validate_names_a_link_that_leaves_the_dataset(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    data = make_dataset(tmp_path / "data")
    secret = tmp_path / "private.png"
    secret.write_bytes((data / "images" / "im00.png").read_bytes())
    (data / "images" / "im00.png").unlink()
    (data / "images" / "im00.png").symlink_to(secret)
    assert main(["validate", str(data)]) == 1
    out = capsys.readouterr().out
    assert "image 10: image file 'images/im00.png' is a link that leaves the dataset" in out


def test_a_linked_import_still_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Links an import made point into the --images folder it records (info.images_source)."""
    src = make_dataset(tmp_path / "src")
    coco = json.loads((src / "annotations.json").read_text())
    (tmp_path / "coco.json").write_text(json.dumps({**coco, "categories": [
        {"id": c["id"], "name": c["name"]} for c in coco["categories"]]}))
    out = tmp_path / "ds"
    assert main(["import", "coco", "--annotations", str(tmp_path / "coco.json"), "--images", str(src),
                 "--out", str(out)]) == 0
    assert json.loads((out / "annotations.json").read_text())["info"]["images_source"] == str(src.resolve())
    assert main(["validate", str(out)]) == 0, capsys.readouterr().out


def _declare(data: Path, width: int, height: int) -> None:
    coco = json.loads((data / "annotations.json").read_text())
    coco["images"][0].update(width=width, height=height)
    (data / "annotations.json").write_text(json.dumps(coco))


def test_a_declared_size_the_header_contradicts_is_named(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    data = make_dataset(tmp_path / "data")  # image 10 is 64x48
    _declare(data, 6400, 4800)
    assert main(["validate", str(data)]) == 1
    assert "image 10: declared 6400x4800, but the file 'images/im00.png' is 64x48" in capsys.readouterr().out
    assert main(["infer", "--model", "test-instant", "--dataset", str(data), "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "the file is 64x48, the dataset declares 6400x4800" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["infer", "bag", "latency"])
def test_the_pixel_budget_holds_offline_in_little_memory(tmp_path: Path, command: str) -> None:
    data = make_dataset(tmp_path / "data", n_images=2)
    (data / "images" / "im00.png").write_bytes(png_bomb())
    _declare(data, 30000, 30000)
    args = {"infer": ["infer", "--model", "test-instant", "--dataset", str(data), "--out",
                      str(tmp_path / "r"), "--no-progress"],
            "bag": ["bag", "--dataset", str(data), "--out", str(tmp_path / "b"), "--quiet"],
            "latency": ["latency", "--model", "test-instant", "--dataset", str(data), "--out",
                        str(tmp_path / "l"), "--no-progress"]}[command]
    rc, out, peak = run_measured(args, tmp_path, timeout=120)
    assert rc == 1 and "over the budget of 50 MP" in out and "Traceback" not in out, out
    assert peak < PEAK_LIMIT_MB


def test_an_import_that_cannot_be_written_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only --out (simulated: the tests run as root) was an internal error."""
    from probench.data.importers import coco

    def read_only(data: object, out: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(out / "annotations.json"))

    monkeypatch.setattr(coco, "write_dataset", read_only)
    images, _ = _source_images(tmp_path)
    assert main(["import", "coco", "--annotations", str(SMALL), "--images", str(images), "--out",
                 str(tmp_path / "ds")]) == 1
    err = capsys.readouterr().err
    assert "cannot write" in err and "Permission denied" in err and err.count("\n") == 1
