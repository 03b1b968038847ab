"""``probench bag --dataset D --out BAG [--storage mcap|sqlite3] [--compressed]``."""

from __future__ import annotations

import argparse

from probench.bags.layout import STORAGES
from probench.limits import MAX_RATE_HZ, MIN_RATE_HZ, IntRange, check_flag


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="dataset folder (with annotations.json and images)")
    parser.add_argument("--out", required=True, help="bag folder to create (must not exist)")
    parser.add_argument("--storage", choices=STORAGES, default="mcap", help="rosbag2 storage (default mcap)")
    parser.add_argument(
        "--compressed",
        action="store_true",
        help="store images as sensor_msgs/CompressedImage (jpeg; JPEG files are stored as they are)",
    )
    parser.add_argument(
        "--rate", type=float, default=30.0, help="frame rate of the bag's timestamps in Hz (default 30)"
    )
    parser.add_argument(
        "--jpeg-quality", type=IntRange(1, 100), default=90,
        help="JPEG quality with --compressed, for non-JPEG images",
    )
    from probench.data.negatives import add_negatives_arguments

    add_negatives_arguments(parser)  # --negatives K --negatives-seed S: absent prompts in the label spaces
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (there is none either when stderr is not a terminal)")
    parser.add_argument(
        "--no-dataset-folder", action="store_true",
        help="do not record the dataset's folder in the bag's metadata (a bag to share: the folder is a "
             "path of this machine); a run of the bag then needs --dataset for its report's images",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from probench.bags.writer import write_bag
    from probench.data.dataset import load_dataset
    from probench.data.negatives import negatives_from_args

    check_flag("--rate", args.rate, low=MIN_RATE_HZ, high=MAX_RATE_HZ)
    dataset = load_dataset(args.dataset)
    try:
        summary = write_bag(
            dataset,
            args.out,
            storage=args.storage,
            compressed=args.compressed,
            rate_hz=args.rate,
            jpeg_quality=args.jpeg_quality,
            progress=not args.quiet,
            negatives=negatives_from_args(args),
            record_folder=not args.no_dataset_folder,
        )
    except OSError as exc:  # the output cannot be written (a read-only folder, a full disk)
        from probench.bags.errors import BagError

        where = exc.filename or args.out
        why = exc.strerror or type(exc).__name__
        raise BagError(f"--out {args.out}: cannot write {where}: {why}") from None
    print(
        f"wrote {summary.path} ({summary.storage}, {summary.n_frames} frames, "
        f"{'jpeg' if summary.compressed else 'rgb8'}, {summary.size_bytes / 1e6:.2f} MB, "
        f"dataset {summary.dataset_hash[:19]})"
    )
    return 0
