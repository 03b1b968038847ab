"""``probench report RUN... --out DIR``: Table II (Markdown + CSV), Figs. 3-5 and, for runs
replayed through the ROS graph, the latency timeline (PNG), report.md."""

from __future__ import annotations

import argparse
from pathlib import Path

from probench.report.build import build_report
from probench.scoring.cli import resamples
from probench.vocabulary import FORMULATIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders (metrics.json, run.json)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="output folder (created; never inside a run folder)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a previous report in --out, whole (a folder holding anything else is "
                             "never replaced)")
    parser.add_argument(
        "--reference", metavar="paper|CSV",
        help="add published rows, labelled '(paper)': 'paper' for the Pro-Bench paper's Table II "
             "(shipped with probench), or a CSV with Table II's columns",
    )  # fmt: skip
    parser.add_argument(
        "--dataset", type=Path, metavar="D",
        help="dataset to score runs that have no metrics.json (default: the path in their run.json)",
    )  # fmt: skip
    parser.add_argument(
        "--allow-dataset-mismatch", action="store_true",
        help="report runs made on different datasets together (refused by default: their rows are not "
             "comparable); each run's row is then marked with its dataset",
    )  # fmt: skip


    parser.add_argument(
        "--bootstrap", type=resamples, default=1000, metavar="N",
        help="bootstrap resamples for the intervals of runs scored here (no metrics.json; default 1000, "
             "0: none); a run's metrics.json keeps the intervals `probench score` gave it",
    )  # fmt: skip


    parser.add_argument(
        "--scenes", type=_image_ids, metavar="IMAGE_IDS",
        help="the scenes of Fig. 6 as comma-separated image ids (default: one per domain, then one per "
             "prompt type not covered yet)",
    )  # fmt: skip
    parser.add_argument("--fig6-formulation", choices=FORMULATIONS, default="orig",
                        help="the formulation Fig. 6 and the failure galleries show (default orig)")


def _image_ids(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.split(",") if t.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of image ids") from exc
    if not ids:
        raise argparse.ArgumentTypeError("no image id given")
    return ids


def run(args: argparse.Namespace) -> int:
    written = build_report(args.runs, args.out, args.reference, args.dataset,
                           allow_dataset_mismatch=args.allow_dataset_mismatch, bootstrap=args.bootstrap,
                           scenes=args.scenes, fig6_formulation=args.fig6_formulation,
                           overwrite=args.overwrite)
    for path in written.values():
        print(path)
    return 0
