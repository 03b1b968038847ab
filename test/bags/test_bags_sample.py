"""The committed sample bag is datasets/probench-sample, frame for frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probench.bags.reader import ProbenchBag
from probench.data.dataset import load_dataset


def test_committed_bag_matches_the_sample_dataset(repo_root: Path) -> None:
    ds = load_dataset(repo_root / "datasets" / "probench-sample")
    bag_dir = repo_root / "bags" / "probench-sample"
    assert sum(p.stat().st_size for p in bag_dir.iterdir()) < 3_000_000  # stays small
    with ProbenchBag(bag_dir) as bag:
        assert bag.dataset_hash == ds.content_hash, "rebuild the bag (see bags/README.md)"
        assert bag.storage == "mcap" and bag.compressed
        ids = []
        for f in bag.frames():
            ids.append(f.image_id)
            np.testing.assert_array_equal(f.rgb(), ds.read_image(f.image_id))  # lossless: original JPEG
            assert [q["query_id"] for q in f.info["label_space"]] == list(ds.label_space(f.image_id))
        assert ids == sorted(ds.images)
