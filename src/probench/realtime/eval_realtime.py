"""The real-time figures of a replay, from its per-frame trace (``realtime_frames.jsonl``).

Definitions follow NVIDIA ros2_benchmark's basic performance calculator where it has one
(docs/EVALUATION.md, "Real-time figures"). All times are the evaluator's wall clock
(``time.time_ns()``): a frame's latency is the arrival of its Detection2DArray minus the
moment its image was published.

- ``frames_sent`` / ``frames_received`` / ``frames_missed``: frames published; answered
  and credited; the rest (dropped by the node's newest-frame mailbox, not answered within
  ``answer_timeout``, or answered with class ids outside the frame's set).
- ``warmup_frames``: the first N frames each session sends (the node's first frames pay
  for lazy initialisation; the evaluator sends them one at a time); reported apart in
  ``warmup`` and left out of every other figure below. They count in the frame counts and
  the accuracy scores like every other frame.
- ``within_budget``: fraction of the (non-warm-up) sent frames answered within
  ``budget_ms``; a missed frame is not within budget.
- ``latency_ms``: percentiles of the answered (non-warm-up) frames' latencies.
- ``first_latency_ms``: the latency of the first frame sent (None if it was missed).
- ``output_rate_hz``: answers per second, (n - 1) / (last - first arrival) within each
  uninterrupted stream (a formulation in one session), pooled over streams.
- ``output_jitter_ms``: |difference of consecutive arrival intervals| (ros2_benchmark's
  frame-to-frame jitter); ``jitter_ms`` is the same figure under its original name
  (docs/FORMATS.md, "realtime.json").
- ``achieved_send_rate_hz``: frames published per second by the evaluator, (n - 1) /
  (last - first send) per stream, pooled.
- ``replay_jitter_ms``: |send interval - 1/rate_hz| between consecutive frames of a
  stream: the accuracy of the evaluator's clock (camera-rate mode only).
- ``stray_messages``: answers credited to no frame (unknown stamp, a frame already given up,
  a repeat); ``misattributed``: answers carrying a class id outside their frame's set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from probench.cache.trace import ANSWERED, MISATTRIBUTED, STRAY, latest_frames
from probench.stats import summarize


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {k: None if v is None else round(v, 4) for k, v in summarize(values).items()}


def _round(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(float(v), nd)


def _streams(recs: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Uninterrupted streams: one formulation within one session, in send order."""
    by: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in recs:
        by.setdefault((str(r["formulation"]), int(r.get("session", 0))), []).append(r)
    return list(by.values())


def _rate(times_per_stream: Iterable[Sequence[int]]) -> float | None:
    """Events per second: intervals over their total duration, pooled over streams."""
    n, span = 0, 0
    for times in times_per_stream:
        if len(times) >= 2:
            n += len(times) - 1
            span += max(times) - min(times)
    return round(n / (span / 1e9), 3) if n and span > 0 else None


def figures(
    recs: Sequence[Mapping[str, Any]], *, budget_ms: float, rate_hz: float, mode: str
) -> dict[str, Any]:
    """The figures of one set of frame records (a formulation, or the whole run)."""
    recs = sorted(recs, key=lambda r: int(r["sent_ns"]))
    answered = [r for r in recs if r.get("status") == ANSWERED]
    warm = [r for r in recs if r.get("warmup")]
    measured = [r for r in recs if not r.get("warmup")]
    lat = [float(r["latency_ms"]) for r in measured if r.get("status") == ANSWERED]
    streams = _streams(measured)
    send_times = [[int(r["sent_ns"]) for r in s] for s in streams]
    recv_times = [sorted(int(r["received_ns"]) for r in s if r.get("status") == ANSWERED) for s in streams]
    send_intervals = [np.diff(t) / 1e6 for t in send_times if len(t) >= 2]
    recv_intervals = [np.diff(t) / 1e6 for t in recv_times if len(t) >= 2]
    output_jitter = [float(v) for iv in recv_intervals if len(iv) >= 2 for v in np.abs(np.diff(iv))]
    replay_jitter: list[float] = []
    if mode == "camera-rate":
        period_ms = 1000.0 / rate_hz
        replay_jitter = [float(v) for iv in send_intervals for v in np.abs(iv - period_ms)]
    first = recs[0] if recs else None
    within = sum(1 for v in lat if v <= budget_ms)
    span = (int(measured[-1]["sent_ns"]) - int(measured[0]["sent_ns"])) / 1e9 if measured else 0.0
    out_jitter = _stats(output_jitter)
    return {
        "frames_sent": len(recs),
        "frames_received": len(answered),
        "frames_missed": len(recs) - len(answered),
        "within_budget": round(within / len(measured), 6) if measured else None,
        "latency_ms": _stats(lat),
        "first_latency_ms": _round(first.get("latency_ms")) if first else None,
        "warmup": {
            "frames": len(warm),
            "received": sum(1 for r in warm if r.get("status") == ANSWERED),
            "latency_ms": [_round(r.get("latency_ms")) for r in warm],
        },
        "output_rate_hz": _rate(recv_times),
        "output_jitter_ms": out_jitter,
        "jitter_ms": dict(out_jitter),
        "achieved_send_rate_hz": _rate(send_times),
        "replay_jitter_ms": _stats(replay_jitter),
        "n_send_intervals": sum(len(iv) for iv in send_intervals),
        "span_s": round(span, 3),
    }


def realtime_summary(
    records: Iterable[Mapping[str, Any]], *, budget_ms: float, rate_hz: float, mode: str, warmup_frames: int
) -> dict[str, Any]:
    """``realtime.json`` (docs/FORMATS.md; ``realtime`` in metrics.json) from the trace
    records: overall and per formulation (module doc and docs/EVALUATION.md, "Real-time
    figures", for the definitions)."""
    records = list(records)
    recs = latest_frames(records)
    formulations = list(dict.fromkeys(str(r["formulation"]) for r in recs))
    budget_ms, rate_hz = float(budget_ms), float(rate_hz)

    def of(subset: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return figures(subset, budget_ms=budget_ms, rate_hz=rate_hz, mode=mode)

    out: dict[str, Any] = {"budget_ms": budget_ms, "rate_hz": rate_hz, "mode": mode,
                           "warmup_frames": int(warmup_frames), **of(recs)}
    out["jitter_of"] = "output: |difference of consecutive answer arrival intervals|"
    out["stray_messages"] = sum(1 for r in records if r.get("kind") == STRAY)
    out["misattributed"] = sum(1 for r in recs if r.get("status") == MISATTRIBUTED)
    out["by_formulation"] = {f: of([r for r in recs if r["formulation"] == f]) for f in formulations}
    return out
