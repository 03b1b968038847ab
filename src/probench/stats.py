"""Summary statistics of timing samples, one definition for latency.json and realtime.json."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SUMMARY_KEYS = ("mean", "std", "p50", "p95", "p99", "max")


def summarize(values: Sequence[float]) -> dict[str, float | None]:
    """mean, std (population, ddof=0), p50, p95, p99 and max; all None when there are no
    values (no data is reported as null, never as an invented number)."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return dict.fromkeys(SUMMARY_KEYS)
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {
        "mean": float(a.mean()),
        "std": float(a.std()),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "max": float(a.max()),
    }
