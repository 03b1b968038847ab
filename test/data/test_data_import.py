"""`probench import coco|refcoco`: hand-made source files (test/data/importers/) become
datasets that `probench validate` accepts; bad input is named by its record; scores on an
imported COCO dataset equal pycocotools'."""

from __future__ import annotations

import copy
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers.scoring_data import cocoeval, hard_coco, hard_predictions, ref_map
from probench.cli import main
from probench.data.dataset import load_dataset
from probench.scoring.constants import COCO_IOUS

HERE = Path(__file__).resolve().parent / "importers"
SMALL = str(HERE / "coco_small.json")
INSTANCES = str(HERE / "refcoco_instances.json")


def _images(root: Path, names: list[str]) -> Path:
    """Source image files (their content is never read by an import)."""
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"\x89PNG not really")
    return root


def _coco_images(tmp_path: Path, source: Path = HERE / "coco_small.json") -> Path:
    names = [im["file_name"] for im in json.loads(source.read_text())["images"]]
    return _images(tmp_path / "src-images", names)


def _ann(out: Path) -> dict:
    return json.loads((out / "annotations.json").read_text())


def _import(*args: str) -> int:
    return main(["import", *args])


def test_coco_import_is_a_valid_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ds"
    rc = _import("coco", "--annotations", SMALL, "--images", str(_coco_images(tmp_path)), "--out", str(out))
    assert rc == 0 and "3 images, 3 queries, 5 annotations" in capsys.readouterr().out
    assert main(["validate", str(out)]) == 0
    coco = _ann(out)
    cup = next(c for c in coco["categories"] if c["id"] == 3)
    assert cup["prompts"] == {"orig": "cup", "cat": "cup", "tmpl": "a photo of cup"}
    assert cup["prompt_types"] == ["categorical"] and "coref" not in cup
    assert all(im["query_ids"] == [1, 3, 7] for im in coco["images"])  # COCO: every category, everywhere
    assert [a["id"] for a in coco["annotations"]] == [10, 11, 12, 13, 14]  # ids kept
    linked = out / "images" / "park" / "dog.png"
    assert linked.is_symlink() and coco["images"][1]["file_name"] == "images/park/dog.png"
    ds = load_dataset(out)
    assert ds.label_space(3) == (1, 3, 7) and ds.queries[7].prompts["tmpl"] == "a photo of dog"
    # --copy, --label-space gt, --domain; an existing dataset needs --overwrite
    images = str(tmp_path / "src-images")
    assert _import("coco", "--annotations", SMALL, "--images", images, "--out", str(out)) == 2
    assert _import("coco", "--annotations", SMALL, "--images", images, "--out", str(out), "--overwrite",
                   "--copy", "--label-space", "gt", "--domain", "indoor") == 0
    coco = _ann(out)
    assert not (out / "images" / "kitchen.png").is_symlink() and (out / "images" / "kitchen.png").is_file()
    assert all("query_ids" not in im and im["domain"] == "indoor" for im in coco["images"])
    assert main(["validate", str(out)]) == 0


@pytest.mark.parametrize("table", ["prompts.csv", "prompts.json"])
def test_prompts_table_overrides_per_category(tmp_path: Path, table: str) -> None:
    out = tmp_path / "ds"
    assert _import("coco", "--annotations", SMALL, "--images", str(_coco_images(tmp_path)),
                   "--out", str(out), "--prompts", str(HERE / table)) == 0
    cats = {c["id"]: c for c in _ann(out)["categories"]}
    assert cats[3]["prompts"] == {"orig": "the ceramic cup on the left", "cat": "cup",
                                  "tmpl": "a photo of the ceramic cup on the left"}
    assert cats[3]["prompt_types"] == ["attributive", "relational"] and cats[3]["coref"] == ["orig", "tmpl"]
    assert cats[7]["prompts"]["cat"] == "dog" and cats[7]["prompt_types"] == ["attributive", "state"]
    assert cats[1]["prompts"]["orig"] == "person"  # not in the table: the defaults
    assert main(["validate", str(out)]) == 0


def test_bad_prompts_table_rows_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("category,orig,prompt_types\ncat,a cat,\ncup,a cup,\ncup,again,\n")
    rc = _import("coco", "--annotations", SMALL, "--images", str(_coco_images(tmp_path)),
                 "--out", str(tmp_path / "ds"), "--prompts", str(bad))
    err = capsys.readouterr().out  # the problems, one line each, as `probench validate` prints them
    assert rc == 1 and "bad.csv line 2: unknown category 'cat'" in err
    assert "bad.csv line 4: category 'cup' is given twice" in err
    bad_json = tmp_path / "bad.json"
    bad_json.write_text(json.dumps({"dog": {"orig": 3, "colour": "red"}}))
    rc = _import("coco", "--annotations", SMALL, "--images", str(tmp_path / "src-images"),
                 "--out", str(tmp_path / "ds"), "--prompts", str(bad_json))
    err = capsys.readouterr().out
    assert rc == 1 and "'orig' must be a non-empty string, not 3" in err and "unknown field 'colour'" in err
    assert not (tmp_path / "ds").exists()


def test_bad_coco_records_are_named_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    coco = json.loads((HERE / "coco_small.json").read_text())
    coco["annotations"][0]["image_id"] = 99  # unknown image
    coco["annotations"][1]["bbox"] = [60, 40, 10, 10]  # outside the 64x48 image
    del coco["annotations"][3]["bbox"]  # a missing key
    coco["images"].append(copy.deepcopy(coco["images"][0]))  # a duplicate id
    coco["categories"][2]["name"] = ""
    src = tmp_path / "instances.json"
    src.write_text(json.dumps(coco))
    out = tmp_path / "ds"
    images = str(_coco_images(tmp_path))
    rc = _import("coco", "--annotations", str(src), "--images", images, "--out", str(out))
    lines = capsys.readouterr().out.splitlines()
    assert rc == 1 and not out.exists()
    assert "image 1: duplicate id (images[0] and images[3])" in lines
    assert "category 7: 'name' must be a non-empty string, not ''" in lines
    assert "annotation 10: unknown image id 99" in lines
    assert "annotation 11: 'bbox' [60, 40, 10, 10] lies outside image 1 (64x48)" in lines
    assert "annotation 13: 'bbox' must be [x, y, w, h] of 4 finite numbers, not None" in lines
    # --clip-boxes clips the overhanging box (and only that problem goes)
    coco = json.loads((HERE / "coco_small.json").read_text())
    coco["annotations"][1]["bbox"] = [60, 40, 10, 10]
    coco["annotations"][1]["area"] = 100  # the source's, of the whole box: it kept 100 for a 4x8 box
    unclipped = coco["annotations"][0]
    src.write_text(json.dumps(coco))
    rc = _import("coco", "--annotations", str(src), "--images", images, "--out", str(out), "--clip-boxes")
    assert rc == 0
    written = _ann(out)["annotations"]
    assert written[1]["bbox"] == [60, 40, 4, 8] and written[1]["area"] == 32
    assert written[0]["bbox"] == unclipped["bbox"] and written[0].get("area") == unclipped.get("area")


def test_missing_image_files_and_bad_files_are_one_line_each(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    images = _coco_images(tmp_path)
    (images / "park" / "dog.png").unlink()
    rc = _import("coco", "--annotations", SMALL, "--images", str(images),
                 "--out", str(tmp_path / "ds"))
    assert rc == 1 and "image 2: image file 'park/dog.png' not found under" in capsys.readouterr().out
    assert _import("coco", "--annotations", str(tmp_path / "nope.json"), "--images", str(images),
                   "--out", str(tmp_path / "ds")) == 2
    (tmp_path / "broken.json").write_text("{")
    assert _import("coco", "--annotations", str(tmp_path / "broken.json"), "--images", str(images),
                   "--out", str(tmp_path / "ds")) == 1
    assert "cannot read the COCO annotations file as JSON" in capsys.readouterr().err
    (tmp_path / "list.json").write_text("[]")
    assert _import("coco", "--annotations", str(tmp_path / "list.json"), "--images", str(images),
                   "--out", str(tmp_path / "ds")) == 1
    assert "list.json: top level must be a JSON object (COCO), not list" in capsys.readouterr().out


def _ref_images(tmp_path: Path) -> Path:
    names = [im["file_name"] for im in json.loads((HERE / "refcoco_instances.json").read_text())["images"]]
    return _images(tmp_path / "train2014", names)


def test_refcoco_import(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    images = str(_ref_images(tmp_path))
    assert _import("refcoco", "--refs", str(HERE / "refs_small.json"), "--instances", INSTANCES,
                   "--images", images, "--out", str(out)) == 0
    assert main(["validate", str(out)]) == 0
    coco = _ann(out)
    queries = {c["id"]: c for c in coco["categories"]}
    # one query per distinct sentence ("right  cup" is "right cup" once spaces are normalised)
    assert [c["prompts"]["orig"] for c in queries.values()] == [
        "left cup", "the cup on the left", "right cup", "man in a red shirt"]
    assert queries[1]["prompts"] == {"orig": "left cup", "cat": "cup", "tmpl": "a photo of left cup"}
    assert queries[1]["name"] == "cup" and queries[4]["name"] == "person"
    assert queries[1]["coref"] == ["orig", "tmpl"]  # two cups on image 101: "cup" is not the referent
    assert "coref" not in queries[4]  # the only person on image 102
    assert [im["id"] for im in coco["images"]] == [101, 102]  # image 103 has no ref
    assert coco["images"][0]["query_ids"] == [1, 2, 3] and coco["images"][1]["query_ids"] == [4]
    gt = {a["category_id"]: a["bbox"] for a in coco["annotations"]}
    assert gt[1] == gt[2] == [5, 10, 20, 25] and gt[3] == [60, 12, 18, 22]
    # a split, and the toolkit's pickle
    refs = json.loads((HERE / "refs_small.json").read_text())
    pickled = tmp_path / "refs(unc).p"
    pickled.write_bytes(pickle.dumps(refs, protocol=2))
    assert _import("refcoco", "--refs", str(pickled), "--instances", INSTANCES,
                   "--images", str(tmp_path / "train2014"), "--out", str(out), "--split", "testA",
                   "--overwrite") == 0
    coco = _ann(out)
    assert [c["prompts"]["orig"] for c in coco["categories"]] == ["man in a red shirt"]
    assert main(["validate", str(out)]) == 0


def test_a_pickle_that_names_code_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = tmp_path / "refs.p"
    evil.write_bytes(pickle.dumps([shutil.rmtree]))
    rc = _import("refcoco", "--refs", str(evil), "--instances", INSTANCES,
                 "--images", str(_ref_images(tmp_path)), "--out", str(tmp_path / "ds"))
    err = capsys.readouterr().err
    assert rc == 1 and "refuses shutil.rmtree" in err and err.count("\n") == 1


def test_bad_refs_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refs = json.loads((HERE / "refs_small.json").read_text())
    refs[0]["ann_id"] = 9999
    refs[1]["image_id"] = 102
    refs[2]["sentences"] = []
    refs.append(copy.deepcopy(refs[2]))
    refs.append({"ann_id": 1004})
    src = tmp_path / "refs.json"
    src.write_text(json.dumps(refs))
    rc = _import("refcoco", "--refs", str(src), "--instances", INSTANCES,
                 "--images", str(_ref_images(tmp_path)), "--out", str(tmp_path / "ds"))
    lines = capsys.readouterr().out.splitlines()
    assert rc == 1 and not (tmp_path / "ds").exists()
    assert lines == [  # the records first (as `probench validate`), then each ref's own checks
        "ref 3: duplicate id (refs[2] and refs[3])",
        "refs[4]: 'ref_id' is missing",
        "ref 1: unknown annotation id 9999 (not in the instances file)",
        "ref 2: image_id 102, but its annotation 1002 is on image 101",
        "ref 3: 'sentences' must be a non-empty list of objects with a 'sent' text",
    ]


def test_score_on_an_imported_coco_dataset_equals_pycocotools(tmp_path: Path) -> None:
    """A plain COCO file (hard cases: crowd, IoU ties, size boundaries, an image without
    GT) and its results: probench score on the import equals pycocotools on the file."""
    coco = hard_coco(seed=4)
    preds = hard_predictions(coco, "orig", seed=4)
    plain = {
        "images": [{k: im[k] for k in ("id", "file_name", "width", "height")} for im in coco["images"]],
        "categories": [{"id": c["id"], "name": c["name"]} for c in coco["categories"]],
        "annotations": coco["annotations"],
    }
    src = tmp_path / "instances.json"
    src.write_text(json.dumps(plain))
    images = _images(tmp_path / "imgs", [im["file_name"] for im in plain["images"]])
    out = tmp_path / "ds"
    assert _import("coco", "--annotations", str(src), "--images", str(images), "--out", str(out)) == 0
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    (run / "predictions" / "orig.json").write_text(json.dumps(preds))
    assert main(["score", "--dataset", str(out), "--run", str(run), "--quiet"]) == 0
    mine = json.loads((run / "metrics.json").read_text())["by_formulation"]["orig"]
    ev = cocoeval(plain, preds, COCO_IOUS, area=True, filtered=False)  # plain pycocotools
    s = ev.eval["precision"][:, :, :, 0, 0]
    assert mine["map50"] == pytest.approx(ref_map(ev, 0), abs=1e-9)
    assert mine["map75"] == pytest.approx(ref_map(ev, 5), abs=1e-9)
    assert mine["map50_95"] == pytest.approx(float(np.mean(s[s > -1])), abs=1e-9)
    assert mine["n_outside_label_space"] == 0  # every result is on an evaluated pair, as in pycocotools
