"""Dataset validation (docs/FORMATS.md): every problem named with its record id, one line each.

Records are named by their id when they have a usable one (``image 5``, ``query 3``,
``annotation 17``), else by their position (``images[4]``). The checks never stop at the
first problem: a user fixing a dataset sees the whole list at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator
from pathlib import Path, PurePosixPath
from typing import TypeGuard

from probench.vocabulary import FORMULATIONS, PROMPT_TYPES

Record = dict[str, object]  # a JSON object of annotations.json, not validated yet
_FORMS = list(FORMULATIONS)
_TYPES = list(PROMPT_TYPES)
BOX_TOLERANCE = 1e-3  # pixels a box may overhang the image border (float rounding in exporters)


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _positive_int(v: object) -> TypeGuard[int]:
    return _is_int(v) and v > 0


def _is_num(v: object) -> TypeGuard[float]:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _type_name(v: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(v), type(v).__name__)


class _Records:
    """One section's records, named and de-duplicated by id."""

    def __init__(self, coco: Record, key: str, label: str, problems: list[str]) -> None:
        self.key, self.label, self.problems = key, label, problems
        self.by_id: dict[int, Record] = {}
        raw = coco.get(key)
        self.items: list[tuple[str, Record]] = []
        if raw is None:
            problems.append(f"annotations.json: '{key}' is missing (a list of records)")
            return
        if not isinstance(raw, list):
            problems.append(f"annotations.json: '{key}' must be a list, not {_type_name(raw)}")
            return
        first_at: dict[int, int] = {}
        for i, rec in enumerate(raw):
            where = f"{key}[{i}]"
            if not isinstance(rec, dict):
                problems.append(f"{where}: not an object ({_type_name(rec)})")
                continue
            rid = rec.get("id")
            if rid is None:
                problems.append(f"{where}: 'id' is missing")
                continue
            if not _is_int(rid):
                problems.append(f"{where}: 'id' must be an integer, not {rid!r}")
                continue
            name = f"{label} {rid}"
            if rid in first_at:
                problems.append(f"{name}: duplicate id ({key}[{first_at[rid]}] and {where})")
                continue
            first_at[rid] = i
            self.by_id[rid] = rec
            self.items.append((name, rec))

    def __iter__(self) -> Iterator[tuple[str, Record]]:
        return iter(self.items)


def validate_coco(coco: object, root: Path | None = None) -> list[str]:
    """Every problem of a Pro-Bench annotations dict, one line each; ``root`` (the dataset
    folder) also checks that image files exist."""
    if not isinstance(coco, dict):
        return [f"annotations.json: top level must be a JSON object, not {_type_name(coco)}"]
    problems: list[str] = []
    images = _Records(coco, "images", "image", problems)
    queries = _Records(coco, "categories", "query", problems)
    anns = _Records(coco, "annotations", "annotation", problems)
    for name, c in queries:
        _check_query(name, c, problems)
    for name, im in images:
        _check_image(name, im, queries.by_id, root, problems)
    for name, a in anns:
        _check_annotation(name, a, images.by_id, queries.by_id, problems)
    return problems


def _check_query(name: str, c: Record, problems: list[str]) -> None:
    label = c.get("name")
    if not isinstance(label, str) or not label.strip():
        problems.append(f"{name}: 'name' must be a non-empty string, not {label!r}")
    prompts = c.get("prompts")
    if prompts is None:
        problems.append(f"{name}: 'prompts' is missing (needs at least 'orig'; cat and tmpl can be derived)")
    elif not isinstance(prompts, dict):
        problems.append(f"{name}: 'prompts' must be an object, not {_type_name(prompts)}")
    else:
        if "orig" not in prompts:
            problems.append(f"{name}: no 'orig' prompt (cat and tmpl can be derived, orig cannot)")
        for k, v in prompts.items():
            if k not in FORMULATIONS:
                problems.append(f"{name}: unknown formulation {k!r} in 'prompts' (expected {_FORMS})")
            elif not isinstance(v, str):
                problems.append(f"{name}: prompt {k!r} must be a string, not {_type_name(v)}")
            elif not v.strip():
                problems.append(f"{name}: prompt {k!r} is empty")
    types = _list_field(c, "prompt_types", "a list", name, problems)
    if types is not None:
        problems += _members(
            types, PROMPT_TYPES, lambda t: f"unknown prompt type {t!r} (expected one of {_TYPES})",
            "'prompt_types' lists a type twice", name,
        )
    coref = c.get("coref")
    if coref is not None:
        if not isinstance(coref, list) or not coref:
            problems.append(f"{name}: 'coref' must be a non-empty list of formulations, not {coref!r}")
        else:
            problems += _members(
                coref, FORMULATIONS, lambda k: f"unknown formulation {k!r} in 'coref' (expected {_FORMS})",
                "'coref' lists a formulation twice", name,
            )


def _list_field(
    rec: Record, key: str, what: str, name: str, problems: list[str]
) -> list[object] | None:
    """``rec[key]`` when it is a list; None when it is absent, or not a list (a problem)."""
    value = rec.get(key)
    if value is None or isinstance(value, list):
        return value
    problems.append(f"{name}: '{key}' must be {what}, not {_type_name(value)}")
    return None


def _members(
    items: list[object], allowed: Collection[str], unknown: Callable[[object], str], twice: str, name: str
) -> list[str]:
    """The problems of a list that must hold distinct members of ``allowed`` (in order: each
    unknown item, then a repeat)."""
    problems = [f"{name}: {unknown(x)}" for x in items if x not in allowed]
    if len(set(map(str, items))) != len(items):
        problems.append(f"{name}: {twice}")
    return problems


def _check_image(
    name: str, im: Record, queries: dict[int, Record], root: Path | None, problems: list[str]
) -> None:
    fn = im.get("file_name")
    if not isinstance(fn, str) or not fn.strip():
        problems.append(f"{name}: 'file_name' must be a non-empty string, not {fn!r}")
        fn = None
    elif PurePosixPath(fn).is_absolute() or ".." in PurePosixPath(fn).parts:
        problems.append(f"{name}: 'file_name' {fn!r} must be relative to the dataset folder")
        fn = None
    for key in ("width", "height"):
        v = im.get(key)
        if not _is_int(v) or v <= 0:
            problems.append(f"{name}: '{key}' must be a positive integer, not {v!r}")
    dom = im.get("domain")
    if dom is not None and not isinstance(dom, str):
        problems.append(f"{name}: 'domain' must be a string, not {_type_name(dom)}")
    qids = _list_field(im, "query_ids", "a list of query ids", name, problems)
    if qids is not None:
        seen: set[int] = set()
        for q in qids:
            if not _is_int(q):
                problems.append(f"{name}: 'query_ids' entry {q!r} is not an integer")
            elif q not in queries:
                problems.append(f"{name}: 'query_ids' names unknown query {q}")
            elif q in seen:
                problems.append(f"{name}: 'query_ids' lists query {q} twice")
            else:
                seen.add(q)
    if root is not None and fn is not None and not (Path(root) / fn).is_file():
        problems.append(f"{name}: image file {fn!r} not found under {root}")


def _check_annotation(
    name: str, a: Record, images: dict[int, Record], queries: dict[int, Record],
    problems: list[str],
) -> None:
    im = None
    iid = a.get("image_id")
    if not _is_int(iid):
        problems.append(f"{name}: 'image_id' must be an integer, not {iid!r}")
    elif iid not in images:
        problems.append(f"{name}: unknown image id {iid}")
    else:
        im = images[iid]
    qid = a.get("category_id")
    if not _is_int(qid):
        problems.append(f"{name}: 'category_id' must be an integer (a query id), not {qid!r}")
    elif qid not in queries:
        problems.append(f"{name}: unknown query (category) id {qid}")
    elif im is not None and isinstance(qids := im.get("query_ids"), list) and qid not in qids:
        problems.append(f"{name}: query {qid} has ground truth in image {iid} but is not in its 'query_ids'")
    bbox = a.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_is_num(v) for v in bbox):
        problems.append(f"{name}: 'bbox' must be [x, y, w, h] of 4 finite numbers, not {bbox!r}")
    else:
        x, y, w, h = bbox
        if w <= 0 or h <= 0:
            problems.append(f"{name}: 'bbox' {bbox} has a non-positive width or height")
        elif (im is not None and _positive_int(width := im.get("width"))
              and _positive_int(height := im.get("height"))):
            tol = BOX_TOLERANCE
            if x < -tol or y < -tol or x + w > width + tol or y + h > height + tol:
                size = f"{width}x{height}"
                problems.append(f"{name}: 'bbox' {bbox} lies outside image {iid} ({size})")
    area = a.get("area")
    if area is not None and (not _is_num(area) or area < 0):
        problems.append(f"{name}: 'area' must be a non-negative number, not {area!r}")
    crowd = a.get("iscrowd", 0)
    if crowd not in (0, 1) or isinstance(crowd, float):
        problems.append(f"{name}: 'iscrowd' must be 0 or 1, not {crowd!r}")
    seg = a.get("segmentation")
    if seg is not None and not isinstance(seg, (list, dict)):
        what = _type_name(seg)
        problems.append(f"{name}: 'segmentation' must be polygons (a list) or RLE (an object), not {what}")
