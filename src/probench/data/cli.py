"""``probench validate DATASET [--no-files]``: every problem of a dataset, one line each.

Exit 0 with a one-line summary when clean, 1 with the problems when not, 2 when DATASET
does not exist.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from probench.errors import UsageError

if TYPE_CHECKING:
    from probench.data.dataset import Dataset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="dataset folder (with annotations.json) or the annotations.json file")
    parser.add_argument("--no-files", action="store_true", help="do not check that image files exist")


def summary(ds: Dataset) -> str:
    """One line: counts, domains and prompt types of a loaded dataset."""
    domains = Counter(im.domain or "(none)" for im in ds.images.values())
    types = Counter(t for q in ds.queries.values() for t in q.prompt_types)
    neg = sum(1 for i in ds.images for q in ds.label_space(i)) - len(
        {(a.image_id, a.query_id) for a in ds.annotations}
    )
    dom = ", ".join(f"{d} {n}" for d, n in sorted(domains.items()))
    typ = ", ".join(f"{t} {n}" for t, n in sorted(types.items())) or "none"
    return (
        f"{len(ds.images)} images, {len(ds.queries)} queries, {len(ds.annotations)} annotations, "
        f"{neg} negative pairs; domains: {dom}; prompt types: {typ}"
    )


def run(args: argparse.Namespace) -> int:
    from probench.data.dataset import load_dataset
    from probench.data.errors import DatasetError

    path = Path(args.dataset)
    if not path.exists():
        raise UsageError(f"{path}: no such dataset folder")
    try:
        ds = load_dataset(path, check_files=not args.no_files)
    except DatasetError as exc:
        if not exc.problems:
            print(f"{path}: {exc}", file=sys.stdout)
            return 1
        for line in exc.problems:
            print(line)
        print(f"{path}: {len(exc.problems)} problem(s)", file=sys.stderr)
        return 1
    if not args.no_files and ds.root is not None:
        from probench.data.validate import image_file_problems

        problems = image_file_problems(ds.root, list(ds.images.values()), ds.raw.get("info"))
        if problems:
            for line in problems:
                print(line)
            print(f"{path}: {len(problems)} problem(s)", file=sys.stderr)
            return 1
    print(f"{path}: OK: {summary(ds)}")
    return 0
