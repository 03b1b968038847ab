"""The committed sample sequence bag is datasets/probench-sequences, frame for frame, in video order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probench.bags.reader import ProbenchBag
from probench.data.dataset import load_dataset


def test_committed_sequence_bag_matches_its_dataset(repo_root: Path) -> None:
    ds = load_dataset(repo_root / "datasets" / "probench-sequences")
    bag_dir = repo_root / "bags" / "probench-sequences"
    assert sum(p.stat().st_size for p in bag_dir.iterdir()) < 1_000_000  # stays small
    with ProbenchBag(bag_dir) as bag:
        assert bag.dataset_hash == ds.content_hash, "rebuild it (scripts/make_sample_sequences.py)"
        assert bag.storage == "mcap" and bag.compressed
        assert bag.dataset.videos == ds.videos
        ids, stamps = [], []
        for f in bag.frames():
            ids.append(f.image_id)
            stamps.append(f.timestamp_ns)
            if f.image_id % 7 == 0:  # lossless: the dataset's JPEG bytes
                np.testing.assert_array_equal(f.rgb(), ds.read_image(f.image_id))
        # image-id order is video order, frame by frame, at the dataset's 10 fps
        assert ids == [i for v in ds.videos.values() for i in v.image_ids]
        assert set(np.diff(stamps).tolist()) == {100_000_000}
