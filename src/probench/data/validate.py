"""Dataset validation (docs/FORMATS.md): every problem named with its record id, one line each.

Records are named by their id when they have a usable one (``image 5``, ``query 3``,
``annotation 17``), else by their position (``images[4]``). The checks never stop at the
first problem: a user fixing a dataset sees the whole list at once.

Speed: the per-record checks (``_check_*``) are the definition. Images and annotations are
first screened over columns (numpy arrays and type sets over a whole section), which
marks every record that could have a problem, conservatively; only marked records go
through the per-record checks. A clean Pro-Bench-size dataset (13k images, 74.5k
annotations) is thus checked in a few column operations, and a dirty one gives exactly
the lines, in exactly the order, of checking every record (``screen=False``; tested).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Sequence
from itertools import chain
from operator import itemgetter
from pathlib import Path, PurePosixPath
from typing import Any, TypeGuard

import numpy as np

from probench.data.sequences import check_sequences
from probench.vocabulary import FORMULATIONS, PROMPT_TYPES, TEMPLATE_PREFIX, prompt_text_problem

_FORMS = list(FORMULATIONS)
_TYPES = list(PROMPT_TYPES)
BOX_TOLERANCE = 1e-3  # pixels a box may overhang the image border (float rounding in exporters)


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _positive_int(v: object) -> bool:
    return _is_int(v) and v > 0


def _is_num(v: object) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _type_name(v: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(v), type(v).__name__)


class Records:
    """One section's records, named and de-duplicated by id (``id_key``; the importers
    name their sources' records the same way)."""

    def __init__(self, coco: dict[str, Any], key: str, label: str, problems: list[str], *,
                 id_key: str = "id", file: str = "annotations.json") -> None:
        self.key, self.label, self.problems, self.id_key = key, label, problems, id_key
        self.by_id: dict[int, dict[str, Any]] = {}
        raw = coco.get(key)
        self.ids: list[int] = []  # of the usable records, in file order
        self.recs: list[dict[str, Any]] = []
        if raw is None:
            problems.append(f"{file}: '{key}' is missing (a list of records)")
            return
        if not isinstance(raw, list):
            problems.append(f"{file}: '{key}' must be a list, not {_type_name(raw)}")
            return
        if self._fast(raw):
            return
        first_at: dict[int, int] = {}
        for i, rec in enumerate(raw):
            where = f"{key}[{i}]"
            if not isinstance(rec, dict):
                problems.append(f"{where}: not an object ({_type_name(rec)})")
                continue
            rid = rec.get(id_key)
            if rid is None:
                problems.append(f"{where}: '{id_key}' is missing")
                continue
            if not _is_int(rid):
                problems.append(f"{where}: '{id_key}' must be an integer, not {rid!r}")
                continue
            name = f"{label} {rid}"
            if rid in first_at:
                problems.append(f"{name}: duplicate id ({key}[{first_at[rid]}] and {where})")
                continue
            first_at[rid] = i
            self.by_id[rid] = rec
            self.ids.append(rid)
            self.recs.append(rec)

    def _fast(self, raw: list[Any]) -> bool:
        """Every record an object with a distinct integer id: indexed in bulk (no problem
        to report). False (nothing done) otherwise: the record-by-record path names them."""
        if set(map(type, raw)) - {dict}:
            return False
        ids = [rec.get(self.id_key) for rec in raw]
        if set(map(type, ids)) - {int} or len(set(ids)) != len(ids):
            return False
        self.by_id = dict(zip(ids, raw, strict=True))
        self.ids, self.recs = ids, raw
        return True

    def __len__(self) -> int:
        return len(self.ids)

    def name(self, k: int) -> str:
        """How problems name the k-th usable record."""
        return f"{self.label} {self.ids[k]}"

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return ((self.name(k), rec) for k, rec in enumerate(self.recs))


def validate_coco(coco: object, root: Path | None = None, *, screen: bool = True) -> list[str]:
    """Every problem of a Pro-Bench annotations dict, one line each; ``root`` (the dataset
    folder) also checks that image files exist. ``screen=False`` runs the per-record checks
    on every record (the same lines; module doc)."""
    if not isinstance(coco, dict):
        return [f"annotations.json: top level must be a JSON object, not {_type_name(coco)}"]
    problems: list[str] = []
    images = Records(coco, "images", "image", problems)
    queries = Records(coco, "categories", "query", problems)
    anns = Records(coco, "annotations", "annotation", problems)
    for name, c in queries:
        _check_query(name, c, problems)
    im_marked = _screen_images(images.recs, queries.by_id) if screen else np.ones(len(images), bool)
    for k in range(len(images)) if root is not None else np.flatnonzero(im_marked).tolist():
        if im_marked[k]:
            _check_image(images.name(k), images.recs[k], queries.by_id, root, problems)
        elif root is not None:  # an unmarked image's only possible problem: its file
            _check_file(images.name(k), images.recs[k]["file_name"], root, problems)
    an_marked = (_screen_annotations(anns.recs, images.by_id, queries.by_id) if screen
                 else np.ones(len(anns), bool))
    for k in np.flatnonzero(an_marked).tolist():
        _check_annotation(anns.name(k), anns.recs[k], images.by_id, queries.by_id, problems)
    problems.extend(check_sequences(coco))  # videos, frames, tracks, prompt changes (if any)
    return problems


# -- screening: which records could have a problem (never fewer than do) -------------------
_NONE = type(None)
_SCREEN_TOLERANCE = BOX_TOLERANCE / 2  # tighter than the check: a borderline box goes to it


def _marks(values: Sequence[Any], allowed: set[type]) -> np.ndarray:
    """True where a value's exact type is not in ``allowed`` (one pass over the types when
    none is out of place)."""
    if not set(map(type, values)) - allowed:
        return np.zeros(len(values), bool)
    return np.fromiter((type(v) not in allowed for v in values), bool, len(values))


def _column(values: Sequence[Any], allowed: set[type], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """``(marked, array)``: values of another type than ``allowed`` (None counts as 0 when
    allowed) are marked and stand as 0; values beyond the dtype mark everything."""
    marked = _marks(values, allowed)
    if marked.any() or None in values:
        values = [0 if m or v is None else v for v, m in zip(values, marked, strict=True)]
    try:
        return marked, np.array(values, dtype).reshape(len(values))
    except OverflowError:
        return np.ones(len(values), bool), np.zeros(len(values), dtype)


def _field(recs: list[dict[str, Any]], key: str, default: Any = None) -> list[Any]:
    """One field of every record (``default`` where it is absent)."""
    try:
        return list(map(itemgetter(key), recs))
    except KeyError:
        return [r.get(key, default) for r in recs]


def _id_array(records: dict[int, Any]) -> np.ndarray | None:
    """The ids of a section as int64 (None when one is beyond int64: no screening then)."""
    try:
        return np.fromiter(records, np.int64, len(records))
    except OverflowError:
        return None


def _screen_images(recs: list[dict[str, Any]], queries: dict[int, dict[str, Any]]) -> np.ndarray:
    n = len(recs)
    q_ids = _id_array(queries)
    if q_ids is None:
        return np.ones(n, bool)
    fns = _field(recs, "file_name")
    marked = np.fromiter(
        (type(f) is not str or not f.strip() or f.startswith("/") or ".." in f for f in fns), bool, n
    )
    for key in ("width", "height"):
        bad, v = _column(_field(recs, key), {int}, np.int64)
        marked |= bad | (v <= 0)
    marked |= _marks(_field(recs, "domain"), {str, _NONE})
    qids = _field(recs, "query_ids")
    marked |= _marks(qids, {list, _NONE})
    lists: list[list[Any]] = [q if type(q) is list else [] for q in qids]
    flat = list(chain.from_iterable(lists))
    if flat:
        bad, v = _column(flat, {int}, np.int64)
        owner = np.repeat(np.arange(n), [len(q) for q in lists])
        marked[owner[bad | ~np.isin(v, q_ids)]] = True
        twice = (not m and len(set(q)) != len(q) for q, m in zip(lists, marked.tolist(), strict=True))
        marked |= np.fromiter(twice, bool, n)  # a query listed twice (marked lists may not hash)
    return marked


def _screen_annotations(
    recs: list[dict[str, Any]], images: dict[int, dict[str, Any]], queries: dict[int, dict[str, Any]]
) -> np.ndarray:
    n = len(recs)
    im_ids, q_ids = _id_array(images), _id_array(queries)
    if im_ids is None or q_ids is None:
        return np.ones(n, bool)
    q_ids = np.sort(q_ids)
    bad_i, iid = _column(_field(recs, "image_id"), {int}, np.int64)
    bad_q, qid = _column(_field(recs, "category_id"), {int}, np.int64)
    marked = bad_i | bad_q | ~np.isin(iid, im_ids) | ~np.isin(qid, q_ids)
    # each annotation's image, by position in ``images``
    im_recs = list(images.values())
    order = np.argsort(im_ids)
    p = np.minimum(np.searchsorted(im_ids[order], iid), max(len(im_ids) - 1, 0))
    pos = order[p] if len(im_ids) else np.zeros(n, np.int64)
    found = (im_ids[pos] == iid) & ~bad_i if len(im_ids) else np.zeros(n, bool)
    # ground truth outside an explicit label space: (image, query) keys by position
    span = len(q_ids) + 1
    lists = _field(im_recs, "query_ids")
    has_list = np.fromiter((type(q) is list for q in lists), bool, len(lists))
    if has_list.any():
        entries: list[list[Any]] = [q if type(q) is list else [] for q in lists]
        owner = np.repeat(np.arange(len(entries)), [len(q) for q in entries])
        bad, vals = _column(list(chain.from_iterable(entries)), {int}, np.int64)
        keep = ~bad & np.isin(vals, q_ids)  # anything else allows nothing: the check decides
        allowed = owner[keep] * span + np.searchsorted(q_ids, vals[keep])
        key = pos * span + np.searchsorted(q_ids, qid)
        marked |= found & has_list[pos] & ~np.isin(key, allowed)
    # bbox: [x, y, w, h] of 4 finite numbers, positive size, inside its image
    boxes = _field(recs, "bbox")
    shape_bad = _marks(boxes, {list})
    if shape_bad.any() or set(map(len, boxes)) - {4}:
        shape_bad = np.fromiter((type(b) is not list or len(b) != 4 for b in boxes), bool, n)
        boxes = [[0, 0, 1, 1] if m else b for b, m in zip(boxes, shape_bad.tolist(), strict=True)]
    num_bad, flat = _column(list(chain.from_iterable(boxes)), {int, float}, np.float64)
    box = flat.reshape(n, 4)
    x, y, w, h = box.T
    with np.errstate(invalid="ignore"):
        marked |= shape_bad | num_bad.reshape(n, 4).any(axis=1) | ~np.isfinite(box).all(axis=1)
        marked |= (w <= 0) | (h <= 0) | (np.abs(box) > 2.0**52).any(axis=1)
        if len(im_recs):
            iw, ih = _dim(im_recs, "width")[pos], _dim(im_recs, "height")[pos]
            tol = _SCREEN_TOLERANCE
            marked |= found & ((x < -tol) | (y < -tol) | (x + w > iw + tol) | (y + h > ih + tol))
        # area, iscrowd, segmentation
        bad, area = _column(_field(recs, "area"), {int, float, _NONE}, np.float64)
        marked |= bad | ~np.isfinite(area) | (area < 0)
        bad, crowd = _column(_field(recs, "iscrowd", 0), {int}, np.float64)
        marked |= bad | ((crowd != 0) & (crowd != 1))
    marked |= _marks(_field(recs, "segmentation"), {list, dict, _NONE})
    return np.asarray(marked, bool)


def _dim(im_recs: list[dict[str, Any]], key: str) -> np.ndarray:
    """The images' widths or heights as the bbox check reads them (NaN: not checked)."""
    bad, v = _column(_field(im_recs, key), {int}, np.float64)
    out: np.ndarray = np.where(bad | (v <= 0), np.nan, v)
    return out


# -- the per-record checks (the definition) ------------------------------------------------
def _check_query(name: str, c: dict[str, Any], problems: list[str]) -> None:
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
            elif (why := prompt_text_problem(v)) is not None:  # the node's rule for a prompt
                problems.append(f"{name}: prompt {k!r} {why}")
        _check_derived(name, label, prompts, problems)
    types = c.get("prompt_types")
    if types is not None and not isinstance(types, list):
        problems.append(f"{name}: 'prompt_types' must be a list, not {_type_name(types)}")
    elif types is not None:
        _check_names(types, PROMPT_TYPES,
                     lambda t: f"{name}: unknown prompt type {t!r} (expected one of {_TYPES})",
                     f"{name}: 'prompt_types' lists a type twice", problems)
    coref = c.get("coref")
    if coref is not None and (not isinstance(coref, list) or not coref):
        problems.append(f"{name}: 'coref' must be a non-empty list of formulations, not {coref!r}")
    elif coref is not None:
        _check_names(coref, FORMULATIONS,
                     lambda k: f"{name}: unknown formulation {k!r} in 'coref' (expected {_FORMS})",
                     f"{name}: 'coref' lists a formulation twice", problems)


def _check_derived(name: str, label: object, prompts: dict[str, Any], problems: list[str]) -> None:
    """The prompts a dataset leaves to be derived (``cat`` = the name, ``tmpl`` = the
    template of ``orig``) under the same rule as the given ones."""
    orig = prompts.get("orig")
    derived = {"cat": label if "cat" not in prompts else None,
               "tmpl": (TEMPLATE_PREFIX + orig if "tmpl" not in prompts and isinstance(orig, str)
                        and orig.strip() else None)}
    for k, v in derived.items():
        if isinstance(v, str) and v.strip() and (why := prompt_text_problem(v)) is not None:
            source = "the name" if k == "cat" else "the template"
            problems.append(f"{name}: derived prompt {k!r} ({source}) {why}")


def _check_names(values: list[object], allowed: Collection[str], unknown: Callable[[object], str], twice: str,
                 problems: list[str]) -> None:
    """A list of names from ``allowed`` (prompt types, formulations), none twice."""
    problems.extend(unknown(v) for v in values if v not in allowed)
    if len(set(map(str, values))) != len(values):
        problems.append(twice)


def _check_image(
    name: str, im: dict[str, Any], queries: dict[int, dict[str, Any]], root: Path | None, problems: list[str]
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
    qids = im.get("query_ids")
    if qids is not None:
        if not isinstance(qids, list):
            problems.append(f"{name}: 'query_ids' must be a list of query ids, not {_type_name(qids)}")
        else:
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
    if root is not None and fn is not None:
        _check_file(name, fn, root, problems)


def _check_file(name: str, fn: str, root: Path, problems: list[str]) -> None:
    if not (Path(root) / fn).is_file():
        problems.append(f"{name}: image file {fn!r} not found under {root}")


def _check_annotation(
    name: str, a: dict[str, Any], images: dict[int, dict[str, Any]], queries: dict[int, dict[str, Any]],
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
    elif im is not None and isinstance(im.get("query_ids"), list) and qid not in im["query_ids"]:
        problems.append(f"{name}: query {qid} has ground truth in image {iid} but is not in its 'query_ids'")
    bbox = a.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_is_num(v) for v in bbox):
        problems.append(f"{name}: 'bbox' must be [x, y, w, h] of 4 finite numbers, not {bbox!r}")
    else:
        x, y, w, h = bbox
        if w <= 0 or h <= 0:
            problems.append(f"{name}: 'bbox' {bbox} has a non-positive width or height")
        elif im is not None and _positive_int(im.get("width")) and _positive_int(im.get("height")):
            tol = BOX_TOLERANCE
            if x < -tol or y < -tol or x + w > im["width"] + tol or y + h > im["height"] + tol:
                size = f"{im['width']}x{im['height']}"
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


# -- the image files themselves (``probench validate``; not part of every load) ------------------
IMAGES_SOURCE_KEY = "images_source"  # info[...]: the --images folder an import linked to


def image_file_problems(root: Path, images: Sequence[Any], info: object) -> list[str]:
    """What ``probench validate`` checks of the image files beyond their presence: each is a
    regular file whose real path stays inside the dataset folder or inside the ``--images``
    folder an import linked it from (``info.images_source``), so a link to a private file
    elsewhere (``/etc/shadow``) is named, never accepted; and a PNG or JPEG header that
    gives another size than the declared ``width``/``height`` is named (either orientation).
    ``images`` are :class:`probench.data.dataset.ImageRecord`s."""
    from probench.data.images import header_size

    inside = [Path(root).resolve()]
    source = info.get(IMAGES_SOURCE_KEY) if isinstance(info, dict) else None
    if isinstance(source, str) and Path(source).is_absolute() and Path(source).parent != Path(source):
        inside.append(Path(source).resolve())  # (never the file system's root)
    problems: list[str] = []
    for rec in images:
        path = Path(root) / rec.file_name
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            continue  # missing: validate_coco names it
        if not any(real.is_relative_to(top) for top in inside):
            problems.append(f"image {rec.id}: image file {rec.file_name!r} is a link that leaves the dataset "
                            f"(to {real}); copy the image into the dataset instead")
            continue
        if not real.is_file():
            problems.append(f"image {rec.id}: image file {rec.file_name!r} is not a regular file")
            continue
        try:
            size = header_size(real)
        except OSError as exc:
            problems.append(f"image {rec.id}: image file {rec.file_name!r} cannot be read: {exc.strerror}")
            continue
        if size is not None and (rec.width, rec.height) not in (size, size[::-1]):
            problems.append(f"image {rec.id}: declared {rec.width}x{rec.height}, but the file "
                            f"{rec.file_name!r} is {size[0]}x{size[1]}")
    return problems
