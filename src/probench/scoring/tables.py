"""Columnar views of a dataset's ground truth and of a formulation's predictions.

The engine works on flat numpy arrays sorted by (image, query) pair instead of Python
dicts per record: building them is the only per-record Python work, done once.
A *pair* is an (image, query) combination that is evaluated: the image's label space
(``Dataset.label_space``) plus, defensively, every pair that has ground truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from probench.data.dataset import Dataset
from probench.scoring.errors import ScoringError
from probench.vocabulary import FORMULATIONS


@dataclass
class GroundTruth:
    image_ids: np.ndarray  # (I,) sorted image ids; an image's index is its position
    image_domain: np.ndarray  # (I,) index into ``domains``
    domains: list[str]
    query_ids: np.ndarray  # (Q,) sorted query ids
    query_types: list[tuple[str, ...]]  # per query index
    query_coref: np.ndarray  # (Q, 3) bool: formulation k in the query's coref set
    pair_keys: np.ndarray  # (P,) sorted: image_index * Q + query_index
    pair_image: np.ndarray  # (P,)
    pair_query: np.ndarray  # (P,)
    pair_gt_start: np.ndarray  # (P,) first GT row of the pair
    pair_gt_count: np.ndarray  # (P,)
    gt_pair: npt.NDArray[np.int64]  # (N,) GT rows sorted by pair, annotation order kept within a pair
    gt_box: np.ndarray  # (N, 4) x, y, w, h
    gt_area: np.ndarray  # (N,) the annotation's ``area`` (COCO uses it for area ranges)
    gt_crowd: np.ndarray  # (N,) bool
    gt_id: np.ndarray  # (N,) annotation ids

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def gt_image(self) -> np.ndarray:
        return self.pair_image[self.gt_pair]

    @property
    def gt_query(self) -> np.ndarray:
        return self.pair_query[self.gt_pair]

    @classmethod
    def from_dataset(cls, ds: Dataset) -> GroundTruth:
        image_ids = np.array(sorted(ds.images), dtype=np.int64)
        query_ids = np.array(sorted(ds.queries), dtype=np.int64)
        n_q = len(query_ids)
        domains = sorted({ds.images[int(i)].domain for i in image_ids})
        dom_index = {d: k for k, d in enumerate(domains)}
        image_domain = np.array([dom_index[ds.images[int(i)].domain] for i in image_ids], dtype=np.int64)
        queries = [ds.queries[int(q)] for q in query_ids]
        query_coref = np.array([[f in q.coref for f in FORMULATIONS] for q in queries], dtype=bool)
        query_coref = query_coref.reshape(n_q, len(FORMULATIONS))

        anns = ds.annotations
        a_img = _index_of(image_ids, np.array([a.image_id for a in anns], dtype=np.int64), "image")
        a_q = _index_of(query_ids, np.array([a.query_id for a in anns], dtype=np.int64), "query")
        a_key = a_img * n_q + a_q
        # label spaces: explicit query_ids; an image without them has its GT queries (in a_key)
        explicit: list[tuple[int, tuple[int, ...]]] = []
        for i, img in enumerate(image_ids.tolist()):
            q_ids = ds.images[img].query_ids
            if q_ids:
                explicit.append((i, q_ids))
        ls_img = np.repeat(np.array([i for i, _ in explicit], np.int64), [len(q) for _, q in explicit])
        ls_q = np.fromiter((x for _, q in explicit for x in q), np.int64, len(ls_img))
        ls_keys = ls_img * n_q + _index_of(query_ids, ls_q, "query")
        pair_keys = _sorted_unique(np.concatenate([a_key, ls_keys]).astype(np.int64))
        order = np.argsort(a_key, kind="stable")
        gt_pair = np.searchsorted(pair_keys, a_key[order])
        counts = np.bincount(gt_pair, minlength=len(pair_keys))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        box = np.array([a.bbox for a in anns], dtype=np.float64).reshape(-1, 4)
        return cls(
            image_ids=image_ids,
            image_domain=image_domain,
            domains=domains,
            query_ids=query_ids,
            query_types=[tuple(q.prompt_types) for q in queries],
            query_coref=query_coref,
            pair_keys=pair_keys,
            pair_image=pair_keys // max(n_q, 1),
            pair_query=pair_keys % max(n_q, 1),
            pair_gt_start=starts,
            pair_gt_count=counts.astype(np.int64),
            gt_pair=gt_pair.astype(np.int64),
            gt_box=box[order],
            gt_area=np.array([a.area for a in anns], dtype=np.float64)[order],
            gt_crowd=np.array([bool(a.iscrowd) for a in anns], dtype=bool)[order],
            gt_id=np.array([a.id for a in anns], dtype=np.int64)[order],
        )


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)`` for int64 keys: one sort and a mask of first occurrences (no
    hash table, no inverse)."""
    keys = np.sort(keys)
    if len(keys) > 1:
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    return keys


def _index_of(sorted_ids: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
    """Positions of ``ids`` in ``sorted_ids``; ids must be present (dataset integrity)."""
    pos = np.searchsorted(sorted_ids, ids)
    bad = (pos >= len(sorted_ids)) | (sorted_ids[np.minimum(pos, len(sorted_ids) - 1)] != ids)
    if len(sorted_ids) == 0:
        bad = np.ones(len(ids), dtype=bool)
    if bad.any():
        raise ScoringError(f"the dataset refers to unknown {what} id {int(ids[np.argmax(bad)])}")
    return pos.astype(np.int64)


@dataclass
class DetArrays:
    """One formulation's predictions as columns, in the order they were given."""

    image_id: np.ndarray  # (n,) int64
    query_id: np.ndarray  # (n,) int64
    box: np.ndarray  # (n, 4) x, y, w, h
    score: np.ndarray  # (n,) float64

    def __len__(self) -> int:
        return len(self.score)

    @classmethod
    def empty(cls) -> DetArrays:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z.copy(), np.zeros((0, 4)), np.zeros(0))

    @classmethod
    def concat(cls, parts: Sequence[DetArrays]) -> DetArrays:
        if not parts:
            return cls.empty()
        return cls(
            np.concatenate([p.image_id for p in parts]),
            np.concatenate([p.query_id for p in parts]),
            np.concatenate([p.box for p in parts]).reshape(-1, 4),
            np.concatenate([p.score for p in parts]),
        )

    @classmethod
    def from_results(
        cls, results: Iterable[Mapping[str, Any]] | DetArrays, where: str = "predictions"
    ) -> DetArrays:
        """COCO result dicts (``image_id``, ``category_id``, ``bbox``, ``score``) as columns;
        a malformed record is named with its index."""
        if isinstance(results, DetArrays):
            return results
        results = results if isinstance(results, list) else list(results)
        n = len(results)
        try:
            if any(type(r["image_id"]) is bool or type(r["category_id"]) is bool for r in results):
                raise TypeError("a boolean id")  # numpy would read true as 1 (query 1): named below
            image_id = np.fromiter((r["image_id"] for r in results), dtype=np.int64, count=n)
            query_id = np.fromiter((r["category_id"] for r in results), dtype=np.int64, count=n)
            score = np.fromiter((r["score"] for r in results), dtype=np.float64, count=n)
            box = np.array([r["bbox"] for r in results], dtype=np.float64).reshape(n, 4)
        except (KeyError, TypeError, ValueError) as exc:
            raise ScoringError(f"{where}: {_first_bad(results)}") from exc
        return cls.from_columns(image_id, query_id, box, score, where)

    @classmethod
    def from_columns(
        cls, image_id: np.ndarray, query_id: np.ndarray, box: np.ndarray, score: np.ndarray,
        where: str = "predictions",
    ) -> DetArrays:
        """Columns already of the right types; a non-finite box or score is named."""
        if not np.all(np.isfinite(box)) or not np.all(np.isfinite(score)):
            i = int(np.argmax(~(np.isfinite(box).all(1) & np.isfinite(score))))
            raise ScoringError(f"{where}: record {i} has a non-finite bbox or score")
        return cls(image_id, query_id, box, score)


def _first_bad(results: Sequence[object]) -> str:
    for i, r in enumerate(results):
        if not isinstance(r, Mapping) or not {"image_id", "category_id", "bbox", "score"} <= r.keys():
            return f"record {i} lacks image_id/category_id/bbox/score"
        b = r["bbox"]
        if not (isinstance(b, (list, tuple)) and len(b) == 4):
            return f"record {i} has a malformed bbox {b!r}"
        for key in ("image_id", "category_id"):
            if isinstance(r[key], bool) or not isinstance(r[key], int):
                return f"record {i} has a non-integer {key} {r[key]!r}"
        if isinstance(r["score"], bool) or not isinstance(r["score"], (int, float)):
            return f"record {i} has a non-numeric score {r['score']!r}"
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in b):
            return f"record {i} has a non-numeric bbox {b!r}"
    return "malformed records"
