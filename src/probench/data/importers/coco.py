"""``probench import coco``: a plain COCO detection file as a probench dataset
(docs/FORMATS.md, "Importing other datasets").

Each category becomes a query with ``orig`` = its name (``cat`` and ``tmpl`` derived,
``prompt_types`` ``["categorical"]``), unless the ``--prompts`` table says otherwise. Image,
category and annotation ids are kept, so a problem is named by the record of the COCO file
it comes from. With ``label_space="all"`` (the default) every image's label space is every
category, which is how COCO is annotated (exhaustively) and how pycocotools evaluates it:
scores then equal pycocotools' on the same results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probench.data.importers.common import (
    _derive_forms,
    check_out,
    check_problems,
    place_images,
    read_json_file,
    write_dataset,
)
from probench.data.validate import validate_coco
from probench.errors import UsageError

LABEL_SPACES = ("all", "gt")
_QUERY = re.compile(r"^query (\S+):")


@dataclass(frozen=True)
class ImportSummary:
    annotations: Path
    n_images: int
    n_queries: int
    n_annotations: int

    def line(self) -> str:
        return (f"{self.annotations}: {self.n_images} images, {self.n_queries} queries, "
                f"{self.n_annotations} annotations")


def source_problems(coco: dict[str, Any], source: Path) -> list[str]:
    """The validator's lines for a dataset built from ``source``, in the source's words:
    its file name instead of annotations.json, and ``category N`` for ``query N``."""
    out = []
    for line in validate_coco(coco):
        line = line.replace("annotations.json:", f"{source.name}:", 1)
        out.append(_QUERY.sub(r"category \1:", line))
    return out


def _query(c: dict[str, Any], table: dict[int, dict[str, Any]]) -> dict[str, Any]:
    name = c.get("name")
    if not isinstance(name, str) or not name.strip():
        return {"id": c.get("id"), "name": name, "prompts": {"orig": "?"}}  # the validator names it
    given = table.get(c["id"], {}) if isinstance(c.get("id"), int) else {}
    orig = given.get("orig", name)
    prompts = {"orig": orig, **_derive_forms(orig, name)}
    prompts.update({k: given[k] for k in ("cat", "tmpl") if k in given})
    query: dict[str, Any] = {"id": c["id"], "name": name, "prompts": prompts,
                             "prompt_types": given.get("prompt_types", ["categorical"])}
    if "coref" in given:
        query["coref"] = given["coref"]
    if "supercategory" in c:
        query["supercategory"] = c["supercategory"]
    return query


def _clip(a: dict[str, Any], images: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    im, box = images.get(a.get("image_id")), a.get("bbox")
    if not (isinstance(im, dict) and isinstance(box, list) and len(box) == 4
            and all(isinstance(v, (int, float)) for v in box)
            and isinstance(im.get("width"), int) and isinstance(im.get("height"), int)):
        return a
    x, y, w, h = box
    x0, y0 = min(max(x, 0), im["width"]), min(max(y, 0), im["height"])
    x1, y1 = min(max(x + w, 0), im["width"]), min(max(y + h, 0), im["height"])
    clipped = [x0, y0, x1 - x0, y1 - y0]
    if clipped == box:
        return a
    out = {**a, "bbox": clipped}
    area = a.get("area")
    if isinstance(area, (int, float)) and not isinstance(area, bool):
        # the source's area (of the whole object) no longer fits the box: at most what is left of it
        out["area"] = min(area, clipped[2] * clipped[3])
    return out


def build_coco(
    src: Any, source: Path, *, table: dict[int, dict[str, Any]] | None = None, label_space: str = "all",
    clip_boxes: bool = False, domain: str | None = None,
) -> dict[str, Any]:
    """The probench annotations of a COCO dict (checked; a :class:`DatasetError` names
    every problem with its record)."""
    if label_space not in LABEL_SPACES:
        raise UsageError(f"--label-space must be one of {', '.join(LABEL_SPACES)}, not {label_space!r}")
    if not isinstance(src, dict):
        what = type(src).__name__
        check_problems(source, [f"{source.name}: top level must be a JSON object (COCO), not {what}"])
    sections = {k: src.get(k) for k in ("images", "categories", "annotations")}
    if any(not isinstance(v, list) for v in sections.values()):
        check_problems(source, source_problems(sections, source))  # names the missing or malformed section
    table = table or {}
    cats = [_query(c, table) if isinstance(c, dict) else c for c in sections["categories"]]
    all_ids = sorted({c["id"] for c in cats if isinstance(c, dict) and isinstance(c.get("id"), int)})
    images = []
    for im in sections["images"]:
        if isinstance(im, dict):
            im = {k: im[k] for k in ("id", "file_name", "width", "height") if k in im}
            if domain is not None:
                im["domain"] = domain
            if label_space == "all":
                im["query_ids"] = all_ids
        images.append(im)
    by_id = {im.get("id"): im for im in images if isinstance(im, dict)}
    anns = []
    for a in sections["annotations"]:
        if isinstance(a, dict):
            a = {k: a[k] for k in ("id", "image_id", "category_id", "bbox", "area", "iscrowd", "segmentation")
                 if k in a}
            if clip_boxes:
                a = _clip(a, by_id)
        anns.append(a)
    coco: dict[str, Any] = {"images": images, "categories": cats, "annotations": anns}
    if isinstance(src.get("info"), dict):
        coco["info"] = src["info"]
    check_problems(source, source_problems(coco, source))
    return coco


def import_coco(annotations: Path, images_dir: Path, out: Path, *, prompts: Path | None = None,
                label_space: str = "all", copy: bool = False, clip_boxes: bool = False,
                domain: str | None = None, overwrite: bool = False) -> ImportSummary:
    """``probench import coco``: check everything, then write ``out``."""
    from probench.data.importers.prompts import read_prompts_table

    check_out(out, overwrite)
    if not images_dir.is_dir():
        raise UsageError(f"--images {images_dir}: no such folder")
    src = read_json_file(annotations, "COCO annotations")
    table = None
    if prompts is not None:
        cats = src.get("categories") if isinstance(src, dict) else None
        usable: list[dict[str, Any]] = [
            c for c in cats or [] if isinstance(c, dict) and isinstance(c.get("id"), int)
        ]
        table = read_prompts_table(prompts, usable)
    coco = build_coco(src, annotations, table=table, label_space=label_space, clip_boxes=clip_boxes,
                      domain=domain)
    place_images(coco["images"], images_dir, out, copy=copy, info=coco.setdefault("info", {}))
    path = write_dataset(coco, out)
    return ImportSummary(path, len(coco["images"]), len(coco["categories"]), len(coco["annotations"]))
