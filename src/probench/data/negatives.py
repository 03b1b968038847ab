"""Absent prompts on demand (``--negatives K --negatives-seed S`` of ``probench bag``,
``infer`` and ``eval``; docs/EVALUATION.md, "Absent prompts"; issue 37).

:func:`with_negatives` adds to each image's label space ``K`` queries of the image's domain
that have no target in it (no annotation, crowd included), drawn without replacement by a
NumPy generator seeded from ``S`` and a stable hash of the image id (SHA-256, never Python's
``hash()``, which changes between processes): the same (K, S) gives the same label spaces on
every machine, whichever command asks. A domain's queries are those of its images' label
spaces; an image with fewer than K candidates gets them all. The three formulations share
the label spaces, so they get the same absent queries.

The dataset returned keeps the source's annotations (``raw``) and so its content hash: a run
records the hash of the dataset it was given and, beside it, ``settings.negatives`` = ``{"k",
"seed"}`` (:meth:`Negatives.record`, only when K > 0, so a run without negatives is byte for
byte what it was); scoring draws the same label spaces again from those (:func:`negatives_of`).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from probench.data.dataset import Dataset
from probench.data.errors import DatasetError
from probench.limits import MAX_SEED, IntRange

MAX_NEGATIVES = 100  # absent queries added per image: more is a typo, not an experiment
NEGATIVES_SETTING = "negatives"  # the key in run.json's settings and the bag's metadata
NEGATIVES_RANGE = IntRange(0, MAX_NEGATIVES)
SEED_RANGE = IntRange(0, MAX_SEED)


@dataclass(frozen=True)
class Negatives:
    """K absent queries per image, drawn with seed ``seed``."""

    k: int
    seed: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.k, int) and 0 <= self.k <= MAX_NEGATIVES):
            raise DatasetError(f"negatives: K must be a whole number in 0..{MAX_NEGATIVES}, got {self.k!r}")
        if not (isinstance(self.seed, int) and 0 <= self.seed <= MAX_SEED):
            raise DatasetError(f"negatives: the seed must be a whole number in 0..{MAX_SEED}, "
                               f"got {self.seed!r}")

    def record(self) -> dict[str, int]:
        return {"k": self.k, "seed": self.seed}


def negatives_of(settings: Mapping[str, object], where: str) -> Negatives | None:
    """The negatives a run or bag recorded under ``settings.negatives`` (None: none); a
    malformed record is a one-line :class:`DatasetError`."""
    rec = settings.get(NEGATIVES_SETTING)
    if rec is None:
        return None
    k = rec.get("k") if isinstance(rec, Mapping) else None
    seed = rec.get("seed") if isinstance(rec, Mapping) else None
    whole = [isinstance(v, int) and not isinstance(v, bool) for v in (k, seed)]
    if not isinstance(rec, Mapping) or set(rec) != {"k", "seed"} or not all(whole) \
            or not isinstance(k, int) or not isinstance(seed, int):
        raise DatasetError(f"{where}: {NEGATIVES_SETTING} must be {{\"k\": K, \"seed\": S}}, got {rec!r}")
    return Negatives(k, seed) if k > 0 else None


def stable_image_hash(image_id: int) -> int:
    """A 64-bit hash of an image id, the same in every process and on every machine."""
    return int.from_bytes(hashlib.sha256(str(int(image_id)).encode("ascii")).digest()[:8], "big")


def domain_queries(dataset: Dataset) -> dict[str, tuple[int, ...]]:
    """Per domain, the queries of its images' label spaces, sorted."""
    out: dict[str, set[int]] = {}
    for image_id, rec in dataset.images.items():
        out.setdefault(rec.domain, set()).update(dataset.label_space(image_id))
    return {d: tuple(sorted(q)) for d, q in out.items()}


def draw_negatives(
    dataset: Dataset, image_id: int, negatives: Negatives,
    domains: Mapping[str, tuple[int, ...]] | None = None,
) -> tuple[int, ...]:  # fmt: skip
    """The absent queries drawn for one image (sorted): ``k`` of its domain's queries that
    are neither in its label space nor annotated in it."""
    domains = domain_queries(dataset) if domains is None else domains
    rec = dataset.images[image_id]
    annotated = {a.query_id for a in dataset.annotations_by_image.get(image_id, [])}
    taken = set(dataset.label_space(image_id)) | annotated
    candidates = np.array([q for q in domains.get(rec.domain, ()) if q not in taken], dtype=np.int64)
    n = min(negatives.k, len(candidates))
    if n == 0:
        return ()
    rng = np.random.default_rng([negatives.seed, stable_image_hash(image_id)])
    return tuple(sorted(int(q) for q in rng.choice(candidates, size=n, replace=False)))


def with_negatives(dataset: Dataset, negatives: Negatives | None) -> Dataset:
    """``dataset`` with every image's label space extended by its drawn absent queries (the
    dataset itself when there are none to add: K = 0 changes nothing)."""
    if negatives is None or negatives.k == 0:
        return dataset
    domains = domain_queries(dataset)
    images = {}
    for image_id, rec in dataset.images.items():
        drawn = draw_negatives(dataset, image_id, negatives, domains)
        images[image_id] = replace(rec, query_ids=(*dataset.label_space(image_id), *drawn)) if drawn else rec
    return Dataset(images, dataset.queries, dataset.annotations, dataset.root, dataset.raw,
                   raw_finite=dataset.raw_finite)  # fmt: skip


def add_negatives_arguments(parser: argparse.ArgumentParser) -> None:
    """``--negatives K`` and ``--negatives-seed S``: the same two flags for bag, infer and eval."""
    parser.add_argument("--negatives", type=NEGATIVES_RANGE, default=0, metavar="K",
                        help=f"add K absent queries (of the image's domain, no target in it) to each image's "
                        f"label space, for every formulation (0..{MAX_NEGATIVES}; default 0: none)")
    parser.add_argument("--negatives-seed", type=SEED_RANGE, default=0, metavar="S",
                        help="the seed of the --negatives draw (default 0)")


def negatives_from_args(args: argparse.Namespace) -> Negatives | None:
    """The flags' negatives (None for K = 0: the run is today's, byte for byte)."""
    k = int(getattr(args, "negatives", 0) or 0)
    return Negatives(k, int(getattr(args, "negatives_seed", 0) or 0)) if k > 0 else None
