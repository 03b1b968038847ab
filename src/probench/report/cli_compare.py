"""``probench compare RUN_A RUN_B [--dataset D] [--bootstrap N] [--formulation F] [--top K]
[--out FILE]``: two runs of one dataset, every metric's change B - A with a paired bootstrap
interval, and the queries whose AP.5 changed most (docs/OFFLINE.md, "Compare")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probench.errors import UsageError
from probench.limits import MAX_COUNT, MAX_SEED, IntRange
from probench.scoring.cli import resamples
from probench.vocabulary import FORMULATIONS

if TYPE_CHECKING:
    from probench.data.dataset import Dataset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", type=Path, help="the baseline run folder")
    parser.add_argument("run_b", metavar="RUN_B", type=Path, help="the run compared with it")
    parser.add_argument("--dataset", type=Path, metavar="D",
                        help="the dataset both runs were made on (default: the folder their run.json "
                             "records, for a bag run the one the bag was made from, while its annotations "
                             "are unchanged)")
    parser.add_argument("--bootstrap", type=resamples, default=1000, metavar="N",
                        help="paired bootstrap resamples over images (default 1000; 0: no intervals)")
    parser.add_argument("--bootstrap-seed", type=IntRange(0, MAX_SEED), default=0, metavar="S",
                        help="the bootstrap's seed (default 0)")
    parser.add_argument("--formulation", choices=FORMULATIONS, default="orig",
                        help="the formulation of the per-query AP changes (default orig)")
    parser.add_argument("--top", type=IntRange(0, MAX_COUNT), default=10, metavar="K",
                        help="queries listed (default 10; 0: all)")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="also write the whole comparison as JSON (a new file, outside run folders)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")


def _dataset(args: argparse.Namespace) -> Dataset:
    """--dataset, else the dataset the runs' run.json records (found unchanged), else a
    one-line refusal saying why (none recorded, moved, changed)."""
    from probench.cache.records import RUN_FILE
    from probench.cache.run import RunDir
    from probench.data.dataset import load_dataset
    from probench.report.load import recorded_dataset

    if args.dataset is not None:
        if not Path(args.dataset).exists():
            raise UsageError(f"{args.dataset}: no such dataset folder")
        return load_dataset(args.dataset, check_files=False)
    for p in (args.run_a, args.run_b):
        if not (p / RUN_FILE).is_file():
            raise UsageError(f"{p}: no run.json, so not a probench run folder")
    found, why = recorded_dataset([(str(p), RunDir(p).info) for p in (args.run_a, args.run_b)])
    if found is None:
        raise UsageError(f"no dataset to compare the runs on: {why}; pass --dataset D")
    return found


def _fmt(v: object, sign: bool = False) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    return f"{v:+.3f}" if sign else f"{v:.3f}"


def _conditions(name: str, c: dict[str, Any]) -> str:
    """One run's miss rate and weights, as compare prints them."""
    miss = c["miss_rate"]
    how = " of its frames dropped" if c["source"] == "ros" else " (offline: every image answered)"
    miss_text = "unknown" if miss is None else f"{miss:.1%}{how}"
    weights = "random weights" if c["random_weights"] else (c["weights_source"] or "weights source unknown")
    return f"{name}: miss rate {miss_text}; weights: {weights}"


def render(result: dict[str, Any], top: int) -> str:
    a, b = result["runs"]
    lines = [f"A: {a}", f"B: {b}",
             f"dataset {result['dataset_hash']}; {result['resamples']} paired bootstrap resamples over "
             f"images (seed {result['seed']}); * = the 95% interval of B - A excludes 0",
             *(_conditions(name, c) for name, c in zip("AB", result["conditions"], strict=True)),
             *(f"warning: {w}" for w in result["warnings"]), "",
             f"{'metric':<18} {'A':>7} {'B':>7} {'B - A':>8}  95% interval of B - A"]  # fmt: skip
    for key, m in result["metrics"].items():
        iv = m["interval"]
        iv_text = f"[{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else "-"
        star = " *" if m["significant"] else ""
        lines.append(f"{key:<18} {_fmt(m['a']):>7} {_fmt(m['b']):>7} {_fmt(m['delta'], True):>8}  "
                     f"{iv_text}{star}")
    for form, why in result["not_compared"].items():
        lines.append(f"{form}: not compared ({why}), nor what needs it (its Δs, PCR and PLC)")
    queries = result["queries"]
    shown = queries if top <= 0 else queries[:top]
    lines += ["", f"AP.5 per query ({result['formulation']}), largest change first "
              f"({len(shown)} of {len(queries)} queries):", f"{'query':<32} {'A':>7} {'B':>7} {'B - A':>8}"]
    for q in shown:
        name = f"{q['query_id']} {q['name']}"[:32]
        lines.append(f"{name:<32} {_fmt(q['a']):>7} {_fmt(q['b']):>7} {_fmt(q['delta'], True):>8}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from probench.cache.output import check_output_file, write_output_json
    from probench.scoring.compare import compare_runs

    for p in (args.run_a, args.run_b):
        if not p.is_dir():
            raise UsageError(f"{p}: no such run folder")
    if args.out is not None:  # the writer rule, before the work
        check_output_file(args.out, overwrite=args.overwrite)
    dataset = _dataset(args)
    result = compare_runs(dataset, args.run_a, args.run_b, n_resamples=args.bootstrap,
                          seed=args.bootstrap_seed, formulation=args.formulation)  # fmt: skip
    print(render(result, args.top))
    if args.out is not None:
        try:
            write_output_json(args.out, result, overwrite=args.overwrite)
        except OSError as exc:
            raise UsageError(f"{args.out}: cannot write: {exc}") from exc
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
