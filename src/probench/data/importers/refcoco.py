"""``probench import refcoco``: referring expressions in the refer toolkit's format
(RefCOCO, RefCOCO+, RefCOCOg) as a probench dataset (docs/FORMATS.md, "Importing other
datasets").

Input: the ``refs`` (the toolkit's ``refs(unc).p`` pickle, or the same list as JSON) and
the ``instances.json`` they point into. Each referred object's distinct sentences become
queries of its image, in the order given: ``orig`` = the sentence, ``name`` = the object's
category, ``cat``/``tmpl`` derived. Its ground truth is that object's box alone; the image's
label space is the queries of its refs. A query's ``coref`` leaves out ``cat`` when the
image holds another object of the same category (the category name then names several
objects, so it no longer keeps the referent); otherwise it keeps all three.
"""

from __future__ import annotations

import os
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

from probench.data.errors import DatasetError
from probench.data.importers import common
from probench.data.importers.coco import ImportSummary, source_problems
from probench.data.validate import Records
from probench.errors import UsageError
from probench.files import UserFileError, open_user_file
from probench.jsonio import MAX_JSON_DEPTH
from probench.vocabulary import FORMULATIONS


class _DataOnly(pickle.Unpickler):
    """Plain data only (lists, dicts, strings, numbers): a pickle that names any class or
    function is refused, so reading one runs no code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refuses {module}.{name}: a refs file holds plain data only")


# The structure budget of a refs pickle (docs/SECURITY.md): the nodes (containers and
# values) a walk of it visits, a shared reference counted each time it is reached, at most
# this many per byte of the file (and at least PICKLE_MIN_NODES). A plain pickle holds at
# most about one node per byte; a "billion laughs" of shared lists (L = [L, L], 60 deep)
# holds 2**60 in a kilobyte, and would exhaust memory in whatever walks it next.
PICKLE_NODES_PER_BYTE = 8
PICKLE_MIN_NODES = 1_000_000


def read_refs(path: Path) -> Any:
    """The refs list from ``.p``/``.pkl`` (the toolkit's pickle) or ``.json``."""
    if path.suffix.lower() in (".p", ".pkl", ".pickle"):
        if not path.exists():
            raise UsageError(f"{path}: no such refs file")
        try:  # bounded: a regular file under the pickle size cap, reads never past it
            with open_user_file(path, what="refs", kind="pickle") as fh:
                size = os.fstat(fh.fileno()).st_size
                data = _DataOnly(fh, encoding="latin1").load()
        except UserFileError as exc:
            raise DatasetError(str(exc)) from None
        except (pickle.UnpicklingError, EOFError) as exc:
            raise DatasetError(f"{path}: cannot read the refs pickle: {_one_line(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - a crafted pickle's opcodes raise anything
            raise DatasetError(f"{path}: cannot read the refs pickle: {type(exc).__name__}: "
                               f"{_one_line(exc)}") from None
        check_structure(data, path, max(PICKLE_MIN_NODES, PICKLE_NODES_PER_BYTE * size))
        return data
    return common.read_json_file(path, "refs")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def check_structure(data: Any, path: Path, budget: int) -> None:
    """A :class:`DatasetError` when walking ``data`` visits more than ``budget`` nodes
    (shared references counted each time) or nests deeper than the JSON nesting cap:
    an iterative walk, so neither a deep nor a self-referencing structure recurses."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > budget:
            raise DatasetError(f"{path}: the refs pickle's structure is over its budget of {budget:,} "
                               "nodes (shared references counted each time): refused")
        if depth > MAX_JSON_DEPTH:
            raise DatasetError(f"{path}: the refs pickle nests deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((k, depth + 1) for k in value)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend((v, depth + 1) for v in value)


def _sentences(ref: dict[str, Any]) -> list[str] | None:
    sents = ref.get("sentences")
    if not isinstance(sents, list) or not sents:
        return None
    out = []
    for s in sents:
        text = s.get("sent") if isinstance(s, dict) else None
        if not isinstance(text, str) or not text.strip():
            return None
        out.append(" ".join(text.split()))
    return list(dict.fromkeys(out))  # distinct, in order


def _check_refs(
    refs: Any, anns: dict[int, dict[str, Any]], split: str | None, source: str
) -> tuple[list[str], list[dict[str, Any]]]:
    """Problems of the refs (named ``ref <ref_id>``, or ``refs[i]``), and the refs kept."""
    problems: list[str] = []
    records = Records({"refs": refs}, "refs", "ref", problems, id_key="ref_id", file=source)
    kept: list[dict[str, Any]] = []
    for name, ref in records:
        if split is not None and ref.get("split") != split:
            continue
        ann_id, image_id = ref.get("ann_id"), ref.get("image_id")
        if not isinstance(ann_id, int) or ann_id not in anns:
            problems.append(f"{name}: unknown annotation id {ann_id!r} (not in the instances file)")
        elif anns[ann_id].get("image_id") != image_id:
            problems.append(f"{name}: image_id {image_id!r}, but its annotation {ann_id} is on image "
                            f"{anns[ann_id].get('image_id')!r}")
        elif _sentences(ref) is None:
            problems.append(f"{name}: 'sentences' must be a non-empty list of objects with a 'sent' text")
        else:
            kept.append(ref)
    return problems, kept


def build_refcoco(refs: Any, instances: Any, refs_path: Path, instances_path: Path, *,
                  split: str | None = None, domain: str | None = None) -> dict[str, Any]:
    """The probench annotations of refs + instances (checked; a :class:`DatasetError`
    names every problem with its record: ``ref N`` in the refs, ``image N``,
    ``annotation N``, ``category N`` in the instances)."""
    if not isinstance(instances, dict):
        common.check_problems(instances_path, [f"{instances_path.name}: top level must be a JSON object"])
    # the instances the refs point into, checked as a COCO file (ids, boxes inside images)
    inst_cats = [{"id": c.get("id"), "name": c.get("name"), "prompts": {"orig": str(c.get("name"))}}
                 if isinstance(c, dict) else c for c in instances.get("categories") or []]
    anns_all = instances.get("annotations")
    anns = {a["id"]: a for a in anns_all or [] if isinstance(a, dict) and isinstance(a.get("id"), int)}
    problems, kept = _check_refs(refs, anns, split, refs_path.name)
    common.check_problems(refs_path, problems)
    if not kept:
        raise DatasetError(f"{refs_path}: no ref" + (f" in split {split!r}" if split else ""))
    used_ann = [anns[r["ann_id"]] for r in kept]
    used_img = {a["image_id"] for a in used_ann}
    images = [im for im in instances.get("images") or [] if isinstance(im, dict) and im.get("id") in used_img]
    distinct = list({id(a): a for a in used_ann}.values())
    used = {"images": images, "categories": inst_cats, "annotations": distinct}
    common.check_problems(instances_path, source_problems(used, instances_path))
    cat_name = {c["id"]: c["name"] for c in inst_cats if isinstance(c, dict)}
    same_cat = Counter((a.get("image_id"), a.get("category_id")) for a in anns.values()
                       if not a.get("iscrowd"))
    queries: list[dict[str, Any]] = []
    out_anns: list[dict[str, Any]] = []
    label_space: dict[int, list[int]] = {}
    for ref in kept:
        ann = anns[ref["ann_id"]]
        name = str(cat_name[ann["category_id"]])
        shared = same_cat[(ann["image_id"], ann["category_id"])] > 1
        for text in _sentences(ref) or []:
            qid = len(queries) + 1
            query: dict[str, Any] = {
                "id": qid, "name": name, "prompts": {"orig": text, **common._derive_forms(text, name)},
                "source": {"ref_id": ref["ref_id"], "ann_id": ann["id"]},
            }
            if shared:
                query["coref"] = [f for f in FORMULATIONS if f != "cat"]
            queries.append(query)
            out_anns.append({"id": qid, "image_id": ann["image_id"], "category_id": qid, "bbox": ann["bbox"],
                             "area": ann.get("area", ann["bbox"][2] * ann["bbox"][3]),
                             "iscrowd": ann.get("iscrowd", 0)})
            label_space.setdefault(ann["image_id"], []).append(qid)
    out_images = []
    for im in images:
        rec = {k: im[k] for k in ("id", "file_name", "width", "height")}
        if domain is not None:
            rec["domain"] = domain
        rec["query_ids"] = label_space[im["id"]]
        out_images.append(rec)
    origin = f"refcoco refs {refs_path.name}" + (f", split {split}" if split else "")
    coco = {"images": out_images, "categories": queries, "annotations": out_anns,
            "info": {"imported_from": origin}}
    common.check_problems(refs_path, source_problems(coco, refs_path))  # cannot fail after the checks above
    return coco


def import_refcoco(refs: Path, instances: Path, images_dir: Path, out: Path, *, split: str | None = None,
                   copy: bool = False, domain: str | None = None, overwrite: bool = False) -> ImportSummary:
    """``probench import refcoco``: check everything, then write ``out``."""
    common.check_out(out, overwrite)
    if not images_dir.is_dir():
        raise UsageError(f"--images {images_dir}: no such folder")
    coco = build_refcoco(read_refs(refs), common.read_json_file(instances, "instances"), refs, instances,
                         split=split, domain=domain)
    common.place_images(coco["images"], images_dir, out, copy=copy, info=coco["info"])
    path = common.write_dataset(coco, out)
    return ImportSummary(path, len(coco["images"]), len(coco["categories"]), len(coco["annotations"]))
