"""Fig. 5 (the accuracy-latency figure) drawn for reference CSVs of growing size: its cost per row.

    python bench/bench_fig5.py                   # 50, 200, 500 and 2000 rows
    python bench/bench_fig5.py --rows 50,500

A reference CSV with Table II's columns and N rows is written to a temporary folder, read
with `probench report`'s reader and drawn by `fig_pareto` (the labels placed as the report
places them). Printed per size: the seconds and the ratio against the smallest size, beside
the ratio of the row counts. A label placer linear in the rows keeps the two ratios close;
a quadratic one makes the time ratio the square of the row ratio (issue 38: 500 rows once
took 88 s, 2000 did not finish).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

COLUMNS = ("model", "map50", "map75", "map50_95", "latency_ms", "m_cat", "m_tmpl", "delta_max",
           "best_formulation", "pcr50", "plc")


def write_reference(path: Path, n: int) -> Path:
    """``n`` rows spread over Fig. 5's plane (deterministic)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for i in range(n):
            m50 = 0.1 + 0.8 * ((i * 37) % 101) / 100
            w.writerow((f"model-{i:04d}", f"{m50:.3f}", f"{m50 * 0.8:.3f}", f"{m50 * 0.6:.3f}",
                        f"{5 + (i * 53) % 700:.1f}", f"{m50:.3f}", f"{m50:.3f}", "0.0", "orig", "0.5", "0.9"))
    return path


def draw_seconds(n: int, work: Path) -> float:
    from probench.report.figures import fig_pareto
    from probench.report.load import load_reference

    entries = load_reference(write_reference(work / f"ref-{n}.csv", n))
    start = time.perf_counter()
    plot = fig_pareto(entries)
    seconds = time.perf_counter() - start
    if plot.figure is None:
        raise RuntimeError(f"no Fig. 5 for {n} rows: {plot.notes}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="50,200,500,2000",
                        help="comma-separated row counts (default 50,200,500,2000)")
    args = parser.parse_args()
    sizes = sorted(int(v) for v in args.rows.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        draw_seconds(sizes[0], Path(tmp))  # imports and font caches, not timed
        times = {n: draw_seconds(n, Path(tmp)) for n in sizes}
    base = sizes[0]
    print(f"{'rows':>6} {'seconds':>9} {'time ratio':>11} {'row ratio':>10}")
    for n in sizes:
        print(f"{n:>6} {times[n]:>9.2f} {times[n] / times[base]:>11.1f} {n / base:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
