"""The Pro-Bench dataset format (docs/FORMATS.md): COCO, extended with queries as categories.

``load_dataset`` parses and validates (every problem named, see :mod:`probench.data.validate`)
and returns an immutable :class:`Dataset`. ``Dataset.from_dict`` builds one from an
in-memory COCO dict (synthetic datasets, tests) without touching the disk.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from probench.data.errors import DatasetError
from probench.data.sequences import Video, build_videos
from probench.files import UserFileError, read_user_json_finite
from probench.jsonio import canonical_bytes, gc_paused
from probench.vocabulary import FORMULATIONS, TEMPLATE_PREFIX

__all__ = ["Annotation", "Dataset", "ImageRecord", "Query", "dataset_from_queries", "load_dataset"]



@dataclass(frozen=True)
class Query:
    """One target description (a COCO category) with its three formulations."""

    id: int
    name: str
    prompts: Mapping[str, str]  # formulation -> prompt text, all three present
    prompt_types: tuple[str, ...] = ()
    coref: tuple[str, ...] = FORMULATIONS  # formulations verified to keep the referent


@dataclass(frozen=True)
class ImageRecord:
    id: int
    file_name: str
    width: int
    height: int
    domain: str = ""
    query_ids: tuple[int, ...] | None = None  # explicit label space, when given
    # sequences (docs/FORMATS.md, "Sequences"): the frame's video and place in it
    video_id: int | None = None
    frame_index: int | None = None
    timestamp: float | None = None  # seconds


@dataclass(frozen=True)
class Annotation:
    id: int
    image_id: int
    query_id: int
    bbox: tuple[float, float, float, float]  # x, y, w, h in pixels
    area: float
    iscrowd: int = 0
    segmentation: object = None
    track_id: int | None = None  # sequences: one object over one video's frames


@dataclass
class Dataset:
    """An immutable-by-convention Pro-Bench dataset. ``root`` is None for in-memory ones."""

    images: dict[int, ImageRecord]
    queries: dict[int, Query]
    annotations: list[Annotation]
    root: Path | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # ``raw`` is known to hold no NaN or infinity (parsed by orjson): hashed without a walk
    raw_finite: bool = field(default=False, repr=False, compare=False)

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_dict(cls, coco: dict[str, Any], root: str | Path | None = None) -> Dataset:
        """Build from a COCO dict that already passed validation (or is trusted)."""
        queries = {}
        for c in coco.get("categories", []):
            queries[int(c["id"])] = parse_query(c)
        images = {}
        for im in coco.get("images", []):
            qids = im.get("query_ids")
            images[int(im["id"])] = ImageRecord(
                id=int(im["id"]),
                file_name=str(im["file_name"]),
                width=int(im["width"]),
                height=int(im["height"]),
                domain=str(im.get("domain", "")),
                query_ids=None if qids is None else tuple(map(int, qids)),
                **_sequence_fields(im),
            )
        annotations = [_annotation(a) for a in coco.get("annotations", [])]
        return cls(images, queries, annotations, Path(root) if root is not None else None, coco)

    # -- structure ----------------------------------------------------------------------
    @cached_property
    def annotations_by_image(self) -> dict[int, list[Annotation]]:
        out: dict[int, list[Annotation]] = {i: [] for i in self.images}
        for a in self.annotations:
            out.setdefault(a.image_id, []).append(a)
        return out

    @cached_property
    def videos(self) -> dict[int, Video]:
        """The dataset's videos by id, each with its frames in order ({} for an image dataset)."""
        return build_videos(self.images, self.raw)

    def label_space(self, image_id: int) -> tuple[int, ...]:
        """The queries evaluated on an image: ``query_ids`` if given, else those with GT there."""
        rec = self.images[image_id]
        if rec.query_ids is not None:
            return rec.query_ids
        return tuple(sorted({a.query_id for a in self.annotations_by_image.get(image_id, [])}))

    def prompts_for(self, image_id: int, formulation: str) -> tuple[list[int], list[str]]:
        """The (query ids, prompt texts) a detector is given for one image and formulation."""
        qids = list(self.label_space(image_id))
        return qids, [self.queries[q].prompts[formulation] for q in qids]

    def image_path(self, image_id: int) -> Path:
        if self.root is None:
            raise DatasetError("this dataset was built in memory and has no image files")
        return self.root / self.images[image_id].file_name

    def read_image(self, image_id: int) -> np.ndarray:
        """The image as an RGB uint8 array (H, W, 3); a clear error when it cannot be read."""
        from probench.data.images import read_rgb

        rec = self.images[image_id]
        return read_rgb(self.image_path(image_id), declared=(rec.width, rec.height))

    @cached_property
    def content_hash(self) -> str:
        """SHA-256 of the canonical annotations JSON (images are named, not hashed): the
        bytes of ``json.dumps(raw, sort_keys=True, separators=(",", ":"))``, written by
        orjson where that is provably the same (:func:`probench.jsonio.canonical_bytes`)."""
        canonical = canonical_bytes(self.raw, finite=self.raw_finite)
        return "sha256:" + hashlib.sha256(canonical).hexdigest()

    def summary(self) -> dict[str, object]:
        """run.json's ``dataset``: where it lives, its content hash and size."""
        return {
            "path": str(self.root.resolve()) if self.root is not None else None,
            "hash": self.content_hash,
            "n_images": len(self.images),
            "n_queries": len(self.queries),
        }

    def __len__(self) -> int:
        return len(self.images)


def _annotation(a: Mapping[str, Any]) -> Annotation:
    """An annotation record as an :class:`Annotation`. Built without the frozen
    dataclass's per-field ``object.__setattr__`` (74.5k of them at Pro-Bench's size): the
    instance's ``__dict__`` is filled at once, with the values ``__init__`` would get."""
    bbox = tuple(map(float, a["bbox"]))
    area = a.get("area")
    ann: Annotation = object.__new__(Annotation)
    ann.__dict__.update(
        id=int(a["id"]), image_id=int(a["image_id"]), query_id=int(a["category_id"]), bbox=bbox,
        area=float(bbox[2] * bbox[3] if area is None else area), iscrowd=int(a.get("iscrowd", 0)),
        segmentation=a.get("segmentation"),
        track_id=None if a.get("track_id") is None else int(a["track_id"]),
    )
    return ann


def _sequence_fields(im: Mapping[str, Any]) -> dict[str, Any]:
    """An image's video, frame index and timestamp, when it is a frame of a video."""
    if im.get("video_id") is None:
        return {}
    ts = im.get("timestamp")
    return {"video_id": int(im["video_id"]), "frame_index": int(im["frame_index"]),
            "timestamp": None if ts is None else float(ts)}


def parse_query(c: Mapping[str, Any]) -> Query:
    """A category record as a :class:`Query`, deriving ``cat``/``tmpl`` as docs/FORMATS.md says."""
    name = str(c["name"])
    given = dict(c.get("prompts") or {})
    orig = given.get("orig")
    if orig is None:
        raise DatasetError(f"category {c.get('id')}: no 'orig' prompt")
    prompts = {
        "orig": str(orig),
        "cat": str(given.get("cat", name)),
        "tmpl": str(given.get("tmpl", TEMPLATE_PREFIX + str(orig))),
    }
    coref = tuple(c.get("coref") or FORMULATIONS)
    return Query(
        id=int(c["id"]),
        name=name,
        prompts=prompts,
        prompt_types=tuple(c.get("prompt_types") or ()),
        coref=coref,
    )


def load_dataset(path: str | Path, *, check_files: bool = True) -> Dataset:
    """Read and validate ``DATASET/annotations.json``; raises :class:`DatasetError` listing
    every problem. ``check_files=False`` skips checking that image files exist (scoring
    needs annotations only)."""
    from probench.data.validate import validate_coco

    root = Path(path)
    ann_path = root / "annotations.json" if root.is_dir() else root
    if root.is_file():
        root = root.parent
    if not ann_path.exists():
        raise DatasetError(f"{ann_path}: no such file (a dataset is a folder with annotations.json)")
    with gc_paused():
        try:  # bounded: a regular file, the size and nesting caps (docs/SECURITY.md)
            coco, finite = read_user_json_finite(ann_path, what="dataset", kind="annotations")
        except UserFileError as exc:
            raise DatasetError(f"{ann_path}: {exc.reason}") from None
        problems = validate_coco(coco, root=root if check_files else None)
        if problems:
            raise DatasetError(f"{ann_path}: {len(problems)} problem(s)", problems=problems)
        ds = Dataset.from_dict(coco, root=root)
    ds.raw_finite = finite
    return ds


def dataset_from_queries(
    images: Sequence[dict[str, Any]],
    categories: Sequence[dict[str, Any]],
    annotations: Sequence[dict[str, Any]],
) -> Dataset:
    """Convenience for tests: an in-memory dataset from the three COCO lists."""
    return Dataset.from_dict(
        {"images": list(images), "categories": list(categories), "annotations": list(annotations)}
    )
