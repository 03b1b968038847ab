"""The column screening of the validator never changes what it reports: on datasets with
random faults, the screened validation gives exactly the lines, in the same order, as the
per-record checks run on every record (``screen=False``)."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probench.data.synthetic import synthetic_coco
from probench.data.validate import validate_coco

Fault = Callable[[dict[str, Any], random.Random], None]


def _rec(coco: dict[str, Any], key: str, rng: random.Random) -> dict[str, Any]:
    return rng.choice([r for r in coco[key] if isinstance(r, dict)])


def _image_of(coco: dict[str, Any], a: dict[str, Any]) -> dict[str, Any] | None:
    return next((i for i in coco["images"] if isinstance(i, dict) and i.get("id") == a.get("image_id")
                 and isinstance(i.get("width"), int)), None)


def _set(key: str, field: str, *values: object) -> Fault:
    def fault(coco: dict[str, Any], rng: random.Random) -> None:
        _rec(coco, key, rng)[field] = copy.deepcopy(rng.choice(values))
    return fault


def _drop(key: str, field: str) -> Fault:
    def fault(coco: dict[str, Any], rng: random.Random) -> None:
        _rec(coco, key, rng).pop(field, None)
    return fault


def _box(coco: dict[str, Any], rng: random.Random) -> None:
    a = _rec(coco, "annotations", rng)
    im = _image_of(coco, a)
    if im is None:
        return
    x, y = rng.choice([(-0.002, 0), (-0.0004, 0), (0, -1), (im["width"] - 1, 0)])
    w = rng.choice([1.0, im["width"] - x + 0.0006, im["width"] - x + 0.002, 2.0])
    a["bbox"] = [x, y, w, 1.0]


def _outside_label_space(coco: dict[str, Any], rng: random.Random) -> None:
    a = _rec(coco, "annotations", rng)
    im = _image_of(coco, a)
    if im is None:
        return
    im["query_ids"] = [q["id"] for q in coco["categories"] if q["id"] != a["category_id"]][:3]


def _duplicate(key: str) -> Fault:
    def fault(coco: dict[str, Any], rng: random.Random) -> None:
        a, b = rng.sample([r for r in coco[key] if isinstance(r, dict)], 2)
        b["id"] = a["id"]
    return fault


def _not_a_record(key: str) -> Fault:
    def fault(coco: dict[str, Any], rng: random.Random) -> None:
        coco[key][rng.randrange(len(coco[key]))] = rng.choice([None, 3, "x", [1]])
    return fault


NAN, INF, HUGE = math.nan, math.inf, 2**70
FAULTS: list[Fault] = [
    _set("images", "id", True, "7", 1.0, HUGE), _drop("images", "id"), _duplicate("images"),
    _not_a_record("images"),
    _set("images", "width", 0, -3, 2.5, "640", True, None, HUGE), _drop("images", "height"),
    _set("images", "file_name", "", "  ", "/abs.png", "../up.png", "a/../b.png", 5, None, "ok..png"),
    _set("images", "domain", 3, None, ["x"]),
    _set("images", "query_ids", [1, 1], [999], ["1"], [True], [1.0], [[1]], {}, "1", None, [], [HUGE]),
    _set("annotations", "image_id", 99999, "1", True, None, 1.0, HUGE), _drop("annotations", "image_id"),
    _set("annotations", "category_id", 99999, False, 2.0, None),
    _set("annotations", "bbox", [1, 2, 3], [1, 2, 3, 4, 5], "1,2,3,4", None, [1, 2, 0, 4], [1, 2, -3, 4],
         [NAN, 1, 1, 1], [1, 1, INF, 1], ["1", 1, 1, 1], [True, 1, 1, 1], [HUGE, 1, 1, 1], [[1], 1, 1, 1]),
    _box, _outside_label_space, _duplicate("annotations"), _not_a_record("annotations"),
    _set("annotations", "area", -1, NAN, INF, "3", None, True, HUGE),
    _set("annotations", "iscrowd", 2, True, False, 0.0, 1.0, "0", None, -1),
    _set("annotations", "segmentation", "poly", 3, None, {}, []),
    _set("categories", "id", "3", True), _duplicate("categories"),
    _set("categories", "prompts", None, {}, {"orig": ""}),
]


@pytest.mark.parametrize("seed", range(40))
def test_screened_validation_reports_what_every_record_check_does(seed: int) -> None:
    rng = random.Random(seed)
    coco = synthetic_coco(40, 8, seed=seed)
    for _ in range(rng.randint(1, 12)):
        rng.choice(FAULTS)(coco, rng)
    assert validate_coco(coco) == validate_coco(coco, screen=False)


def test_every_fault_is_reported_on_its_own() -> None:
    for k, fault in enumerate(FAULTS):
        for seed in range(6):
            coco = synthetic_coco(20, 5, seed=seed)
            fault(coco, random.Random(seed))
            assert validate_coco(coco) == validate_coco(coco, screen=False), (k, seed)


def test_screening_with_image_files(tmp_path: Path) -> None:
    coco = synthetic_coco(12, 4, seed=1)
    for im in coco["images"][::2]:
        (tmp_path / im["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / im["file_name"]).write_bytes(b"x")
    coco["images"][1]["width"] = 0
    screened = validate_coco(coco, root=tmp_path)
    assert screened == validate_coco(coco, root=tmp_path, screen=False)
    assert sum("not found under" in p for p in screened) == 6 and "'width'" in screened[0]


def test_a_clean_dataset_has_no_problem() -> None:
    assert validate_coco(synthetic_coco(300, 30, seed=3)) == []
