"""``probench report RUN... --out DIR``: Table II (Markdown + CSV), Figs. 3-5 and, for runs
replayed through the ROS graph, the latency timeline (PNG), report.md."""

from __future__ import annotations

import argparse
from pathlib import Path

from probench.report.build import build_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders (metrics.json, run.json)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder (created)")
    parser.add_argument(
        "--reference", metavar="paper|CSV",
        help="add published rows, labelled '(paper)': 'paper' for the Pro-Bench paper's Table II "
             "(shipped with probench), or a CSV with Table II's columns",
    )  # fmt: skip
    parser.add_argument(
        "--dataset", type=Path, metavar="D",
        help="dataset to score runs that have no metrics.json (default: the path in their run.json)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    written = build_report(args.runs, args.out, args.reference, args.dataset)
    for path in written.values():
        print(path)
    return 0
