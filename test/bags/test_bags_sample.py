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


def test_committed_bags_name_no_folder_of_a_machine_and_still_read(repo_root: Path) -> None:
    """A committed bag's metadata holds no absolute path (``probench bag`` records the dataset's
    folder unless --no-dataset-folder); bags made before the folder was recorded still read."""
    from ruamel.yaml import YAML

    for name in ("probench-sample", "probench-sequences"):
        meta = YAML(typ="safe").load((repo_root / "bags" / name / "metadata.yaml").read_text())
        custom = meta["rosbag2_bagfile_information"].get("custom_data") or {}
        absolute = {k: v for k, v in custom.items() if str(v).startswith("/") or Path(str(v)).is_absolute()}
        assert absolute == {}, f"{name}: rebuild it with --no-dataset-folder (bags/README.md)"
        with ProbenchBag(repo_root / "bags" / name) as bag:
            assert bag.dataset_folder is None and bag.dataset_hash.startswith("sha256:")
