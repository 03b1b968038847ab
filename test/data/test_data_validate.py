"""The validator: one test per problem class, each line naming the record; CLI exit codes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from probench.cli import main
from probench.data.dataset import load_dataset
from probench.data.errors import DatasetError
from probench.data.validate import validate_coco

GOOD = {
    "images": [
        {"id": 1, "file_name": "images/a.png", "width": 100, "height": 80, "domain": "indoor",
         "query_ids": [1, 2]},
        {"id": 2, "file_name": "images/b.png", "width": 50, "height": 50, "domain": "my-own-domain"},
    ],
    "categories": [
        {"id": 1, "name": "valve", "prompts": {"orig": "the red valve", "cat": "valve",
         "tmpl": "a photo of x"}, "prompt_types": ["attributive"], "coref": ["orig", "cat"]},
        {"id": 2, "name": "door", "prompts": {"orig": "the open door"},
         "prompt_types": ["state", "negative"]},
    ],
    "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 100, 80], "area": 8000, "iscrowd": 0},
        {"id": 2, "image_id": 2, "category_id": 2, "bbox": [10.5, 10, 5, 5], "area": 25, "iscrowd": 1,
         "segmentation": [[10, 10, 15, 10, 15, 15]]},
    ],
}  # fmt: skip


def _bad(section: str, index: int, **changes: object) -> list[str]:
    coco = copy.deepcopy(GOOD)
    rec = coco[section][index]
    for k, v in changes.items():
        if v is _DROP:
            rec.pop(k, None)
        else:
            rec[k] = v
    return validate_coco(coco)


_DROP = object()


def _one(problems: list[str], *needles: str) -> None:
    assert len(problems) == 1, problems
    for n in needles:
        assert n in problems[0], problems


def test_good_dataset_is_clean() -> None:
    assert validate_coco(GOOD) == []


def test_top_level() -> None:
    assert "top level must be a JSON object" in validate_coco([1, 2])[0]
    problems = validate_coco({"images": {}, "categories": []})
    assert any("'images' must be a list" in p for p in problems)
    assert any("'annotations' is missing" in p for p in problems)


def test_record_not_an_object_named_by_position() -> None:
    coco = copy.deepcopy(GOOD)
    coco["annotations"].append("oops")
    _one(validate_coco(coco), "annotations[2]", "not an object")


def test_missing_and_non_integer_ids() -> None:
    problems = _bad("images", 1, id=_DROP)  # its annotation then refers to an unknown image
    assert problems == ["images[1]: 'id' is missing", "annotation 2: unknown image id 2"]
    problems = _bad("categories", 0, id="1")
    assert problems[0] == "categories[0]: 'id' must be an integer, not '1'"
    assert "unknown query" in problems[1] and "unknown query" in problems[2]  # the cascade, named
    _one(_bad("annotations", 1, id=2.0), "annotations[1]", "'id' must be an integer")


def test_duplicate_ids() -> None:
    for section, label in (("images", "image"), ("categories", "query"), ("annotations", "annotation")):
        coco = copy.deepcopy(GOOD)
        coco[section].append(copy.deepcopy(coco[section][0]))
        problems = [p for p in validate_coco(coco) if "duplicate" in p]
        assert problems == [f"{label} 1: duplicate id ({section}[0] and {section}[2])"], problems


def test_image_fields() -> None:
    _one(_bad("images", 0, width=0), "image 1", "'width' must be a positive integer")
    _one(_bad("images", 0, height="80"), "image 1", "'height'")
    _one(_bad("images", 0, file_name=""), "image 1", "'file_name'")
    _one(_bad("images", 0, file_name="../x.png"), "image 1", "relative")
    _one(_bad("images", 1, domain=3), "image 2", "'domain' must be a string")


def test_query_ids() -> None:
    _one(_bad("images", 0, query_ids=[1, 2, 7]), "image 1", "unknown query 7")
    _one(_bad("images", 0, query_ids=[1, 2, 2]), "image 1", "query 2 twice")
    _one(_bad("images", 0, query_ids=[1, "2"]), "image 1", "not an integer")
    _one(_bad("images", 0, query_ids="1,2"), "image 1", "'query_ids' must be a list")
    # GT of a query outside the image's explicit label space
    _one(_bad("images", 0, query_ids=[2]), "annotation 1", "not in its 'query_ids'")


def test_prompts() -> None:
    _one(_bad("categories", 1, prompts={"cat": "door"}), "query 2", "no 'orig' prompt")
    _one(_bad("categories", 1, prompts=_DROP), "query 2", "'prompts' is missing")
    _one(_bad("categories", 1, prompts=["the open door"]), "query 2", "'prompts' must be an object")
    _one(_bad("categories", 1, prompts={"orig": "  "}), "query 2", "prompt 'orig' is empty")
    _one(_bad("categories", 1, prompts={"orig": "x", "cat": 3}), "query 2", "prompt 'cat' must be a string")
    _one(_bad("categories", 1, prompts={"orig": "x", "long": "y"}), "query 2", "unknown formulation 'long'")
    _one(_bad("categories", 1, name=""), "query 2", "'name'")


def test_prompt_types_and_coref() -> None:
    _one(_bad("categories", 0, prompt_types=["colour"]), "query 1", "unknown prompt type 'colour'")
    _one(_bad("categories", 0, prompt_types="state"), "query 1", "'prompt_types' must be a list")
    _one(_bad("categories", 0, coref=["orig", "para"]), "query 1", "unknown formulation 'para' in 'coref'")
    _one(_bad("categories", 0, coref=[]), "query 1", "'coref' must be a non-empty list")
    _one(_bad("categories", 0, coref=["orig", "orig"]), "query 1", "twice")


def test_annotation_references(tmp_path: Path) -> None:
    _one(_bad("annotations", 1, image_id=9), "annotation 2", "unknown image id 9")
    _one(_bad("annotations", 1, category_id=9), "annotation 2", "unknown query (category) id 9")
    _one(_bad("annotations", 1, image_id="2"), "annotation 2", "'image_id' must be an integer")
    # a boolean is not an id: `category_id: true` was scored as query 1 (dataset and loading alike)
    _one(_bad("annotations", 1, category_id=True), "annotation 2",
         "'category_id' must be an integer (a query id), not True")
    _one(_bad("annotations", 1, image_id=True), "annotation 2", "'image_id' must be an integer")
    _one(_bad("images", 0, query_ids=[True, 2]), "image 1", "entry True is not an integer")
    bad = copy.deepcopy(GOOD)
    bad["annotations"][1]["category_id"] = True
    (tmp_path / "annotations.json").write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(DatasetError) as exc:
        load_dataset(tmp_path, check_files=False)
    assert any("'category_id' must be an integer" in p for p in exc.value.problems)


def test_boxes() -> None:
    _one(_bad("annotations", 0, bbox=[0, 0, 0, 10]), "annotation 1", "non-positive")
    _one(_bad("annotations", 0, bbox=[0, 0, -5, 10]), "annotation 1", "non-positive")
    _one(_bad("annotations", 0, bbox=[1, 0, 100, 80]), "annotation 1", "outside image 1 (100x80)")
    _one(_bad("annotations", 0, bbox=[-1, 0, 10, 10]), "annotation 1", "outside")
    _one(_bad("annotations", 0, bbox=[0, 0, 10]), "annotation 1", "'bbox' must be")
    _one(_bad("annotations", 0, bbox=[0, 0, "10", 10]), "annotation 1", "'bbox' must be")


def test_other_annotation_fields() -> None:
    _one(_bad("annotations", 0, area=-1), "annotation 1", "'area'")
    _one(_bad("annotations", 0, iscrowd=2), "annotation 1", "'iscrowd'")
    _one(_bad("annotations", 0, segmentation="poly"), "annotation 1", "'segmentation'")


def test_every_problem_is_reported_not_just_the_first() -> None:
    coco = copy.deepcopy(GOOD)
    coco["images"][0]["width"] = -1
    coco["categories"][1]["prompts"] = {}
    coco["annotations"][1]["bbox"] = [0, 0, 0, 0]
    assert len(validate_coco(coco)) == 3


def _write(folder: Path, coco: object, images: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "annotations.json").write_text(json.dumps(coco))
    if images:
        (folder / "images").mkdir(exist_ok=True)
        for name in ("a.png", "b.png"):
            (folder / "images" / name).write_bytes(b"png")
    return folder


def test_missing_files_only_when_asked(tmp_path: Path) -> None:
    folder = _write(tmp_path / "ds", GOOD)
    (folder / "images" / "b.png").unlink()
    _one(validate_coco(GOOD, root=folder), "image 2", "'images/b.png' not found")
    with pytest.raises(DatasetError):
        load_dataset(folder)
    assert len(load_dataset(folder, check_files=False).images) == 2


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = _write(tmp_path / "good", GOOD)
    assert main(["validate", str(good)]) == 0
    out = capsys.readouterr().out
    assert "2 images, 2 queries, 2 annotations" in out and "my-own-domain" in out
    bad = copy.deepcopy(GOOD)
    bad["annotations"][0]["bbox"] = [0, 0, 500, 5]
    bad["images"][1]["width"] = 0
    folder = _write(tmp_path / "bad", bad)
    assert main(["validate", str(folder)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("image 2:") and lines[1].startswith("annotation 1:")
    assert main(["validate", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "no such dataset folder" in err and "Traceback" not in err
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "annotations.json").write_text("{not json")
    assert main(["validate", str(tmp_path / "broken")]) == 1
    assert "not valid JSON" in capsys.readouterr().out
    nofiles = _write(tmp_path / "nofiles", GOOD, images=False)
    assert main(["validate", str(nofiles)]) == 1
    assert main(["validate", str(nofiles), "--no-files"]) == 0
