"""``probench score --dataset D --run RUN [--out F]``: the full metric suite of a run.

Reads annotations only (no image files), writes RUN/metrics.json (or ``--out``) atomically
and prints a short summary table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from probench.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="dataset folder (annotations.json is enough)")
    parser.add_argument("--run", required=True, help="run folder with predictions/<formulation>.json")
    parser.add_argument("--out", help="metrics file to write (default: RUN/metrics.json)")
    parser.add_argument("--quiet", action="store_true", help="do not print the summary table")


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def summary_table(m: dict) -> str:
    rows = ["formulation  mAP.5   mAP.75  mAP.5:.95"]
    for f, s in m["by_formulation"].items():
        rows.append(f"{f:<12} {_fmt(s['map50']):<7} {_fmt(s['map75']):<7} {_fmt(s['map50_95'])}")
    rows.append(
        f"delta_orig_cat {_fmt(m['delta_orig_cat'])}  delta_tmpl_orig {_fmt(m['delta_tmpl_orig'])}  "
        f"delta_max {_fmt(m['delta_max'])}  best {_fmt(m['best_formulation'])}"
    )
    rows.append(f"PCR@.5 {_fmt(m['pcr50'])}  PLC {_fmt(m['plc'])}  (targets {m['n_targets']})")
    if m["formulations_missing"]:
        rows.append(f"missing formulations: {', '.join(m['formulations_missing'])}")
    if "latency_ms" in m:
        lat = m["latency_ms"]
        rows.append(f"latency ms: mean {_fmt(lat.get('mean'))}  p95 {_fmt(lat.get('p95'))}")
    return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    from probench.cache.atomic import write_json_atomic
    from probench.data.dataset import load_dataset
    from probench.scoring.suite import score_run

    ds_path, run_path = Path(args.dataset), Path(args.run)
    if not ds_path.exists():
        raise UsageError(f"{ds_path}: no such dataset folder")
    if not run_path.is_dir():
        raise UsageError(f"{run_path}: no such run folder")
    ds = load_dataset(ds_path, check_files=False)
    metrics = score_run(ds, run_path, progress=not args.quiet)
    out = Path(args.out) if args.out else run_path / "metrics.json"
    try:
        write_json_atomic(out, metrics)
    except OSError as exc:
        raise UsageError(f"{out}: cannot write metrics: {exc}") from exc
    if not args.quiet:
        print(summary_table(metrics))
    print(f"wrote {out}", file=sys.stderr)
    return 0
