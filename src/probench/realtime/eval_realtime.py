"""The real-time figures of a replay, from its per-frame trace (``realtime_frames.jsonl``).

Meanings follow NVIDIA ros2_benchmark's basic performance calculator; docs/EVALUATION.md,
"Real-time figures", puts each formula next to its ros2_benchmark counterpart. Times are
the evaluator's monotonic clock: a frame's latency is the arrival of its Detection2DArray
(taken on the raw bytes) minus the moment its image was published. A *stream* is one
formulation within one session (and one video, on a sequence bag), sent without a pause;
rates and spans are pooled over streams (intervals over summed spans), never over the gaps
between them.

- ``frames_sent`` / ``frames_received`` / ``frames_missed`` / ``missed_share``: measured
  frames published; answered and credited; the rest (dropped by the node's newest-frame
  mailbox, not answered within ``answer_timeout``, or answered with class ids outside the
  frame's set); missed / sent.
- ``warmup``: the session's discarded trial (``frames``, ``received``, ``latency_ms``), and
  ``cold_start_ms``, the latency of its first frame: in no other figure, scored nowhere.
- ``achieved_send_rate_hz``: (n - 1) / send span per stream, pooled.
- ``delivered_rate_hz``: frames_received / frames_sent x achieved_send_rate_hz: the rate
  of answered frames, never above the send rate (the headline).
- ``output_rate_hz``: the answer spacing, (n - 1) / (last - first arrival) per stream,
  pooled (ros2_benchmark's mean frame rate; it moves with latency drift and does not see
  frames missed at the end of a stream).
- ``output_jitter_ms``: |difference of consecutive arrival intervals| (ros2_benchmark's
  frame-to-frame jitter); ``jitter_ms`` is the same figure under its original name.
- ``replay_jitter_ms``: |send interval - 1/rate_hz| (camera-rate mode only).
- ``first_sent_to_received_ms`` / ``last_sent_to_received_ms``: first arrival minus first
  send, last arrival minus last send, of each stream; the mean over streams.
- ``span_s``: the summed send spans the send and delivered rates are computed over;
  ``received_span_s``: the summed arrival spans of the output rate.
- ``within_budget``: share of the measured frames answered within ``budget_ms``.
- ``latency_ms``: percentiles of the answered measured frames' latencies.
- ``stray_messages``: answers credited to no frame (unknown stamp, a frame already given up,
  a repeat); ``misattributed``: answers carrying a class id outside their frame's set.
- ``frames_failed`` / ``first_error``: frames whose model call raised (trace status
  ``failed``), counted apart from the missed ones, and the first one's error; in the file
  only when a frame failed.

The figures are :class:`probench.cache.records.RealtimeRecord` (realtime.json).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from probench.cache.records import RealtimeFigures, RealtimeRecord, Stats, Warmup
from probench.cache.trace import ANSWERED, FAILED, MISATTRIBUTED, STRAY, latest_frames
from probench.cache.trace import warmup_frames as warmup_records
from probench.stats import summarize


def _stats(values: Sequence[float]) -> Stats:
    return Stats(**{k: None if v is None else round(v, 4) for k, v in summarize(values).items()})


def _round(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(float(v), nd)


def _streams(recs: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Uninterrupted streams: one formulation within one session (and one video, on a
    sequence bag: each is streamed on its own), in send order."""
    by: dict[tuple[str, int, int], list[Mapping[str, Any]]] = {}
    for r in recs:
        key = (str(r["formulation"]), int(r.get("session", 0)), int(r.get("video_id", -1)))
        by.setdefault(key, []).append(r)
    return list(by.values())


def _rate(times_per_stream: Iterable[Sequence[int]]) -> float | None:
    """Events per second: intervals over their total duration, pooled over streams."""
    n, span = 0, 0
    for times in times_per_stream:
        if len(times) >= 2:
            n += len(times) - 1
            span += max(times) - min(times)
    return round(n / (span / 1e9), 3) if n and span > 0 else None


def _mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None


def figures(
    recs: Sequence[Mapping[str, Any]], *, budget_ms: float, rate_hz: float, mode: str,
    warmup: Sequence[Mapping[str, Any]] | None = None,
) -> RealtimeFigures:
    """The figures of one set of measured frame records (a formulation, or the whole run)
    and, apart, the warm-up records (module doc; None: none reported, a formulation's)."""
    recs = sorted(recs, key=lambda r: (int(r.get("session", 0)), int(r["sent_ns"])))
    warm = sorted(warmup or (), key=lambda r: (int(r.get("session", 0)), int(r["sent_ns"])))
    answered = [r for r in recs if r.get("status") == ANSWERED]
    failed = [r for r in recs if r.get("status") == FAILED]
    lat = [float(r["latency_ms"]) for r in answered]
    streams = _streams(recs)
    send_times = [[int(r["sent_ns"]) for r in s] for s in streams]
    recv_times = [sorted(int(r["received_ns"]) for r in s if r.get("status") == ANSWERED) for s in streams]
    send_intervals = [np.diff(t) / 1e6 for t in send_times if len(t) >= 2]
    recv_intervals = [np.diff(t) / 1e6 for t in recv_times if len(t) >= 2]
    output_jitter = [float(v) for iv in recv_intervals if len(iv) >= 2 for v in np.abs(np.diff(iv))]
    replay_jitter: list[float] = []
    if mode == "camera-rate":
        period_ms = 1000.0 / rate_hz
        replay_jitter = [float(v) for iv in send_intervals for v in np.abs(iv - period_ms)]
    first_to_first = [(r[0] - s[0]) / 1e6 for s, r in zip(send_times, recv_times, strict=True) if r]
    last_to_last = [(r[-1] - s[-1]) / 1e6 for s, r in zip(send_times, recv_times, strict=True) if r]
    within = sum(1 for v in lat if v <= budget_ms)
    send_rate = _rate(send_times)
    out_jitter = _stats(output_jitter)
    warm_answered = [r for r in warm if r.get("status") == ANSWERED]
    missed = len(recs) - len(answered) - len(failed)
    figs = RealtimeFigures(
        frames_sent=len(recs),
        frames_received=len(answered),
        frames_missed=missed,
        missed_share=round(missed / len(recs), 6) if recs else None,
        within_budget=round(within / len(recs), 6) if recs else None,
        latency_ms=_stats(lat),
        first_sent_to_received_ms=_mean(first_to_first),
        last_sent_to_received_ms=_mean(last_to_last),
        achieved_send_rate_hz=send_rate,
        delivered_rate_hz=round(send_rate * len(answered) / len(recs), 3) if send_rate and recs else None,
        output_rate_hz=_rate(recv_times),
        output_rate_of="answer spacing: (answers - 1) / (last - first arrival), per stream",
        output_jitter_ms=out_jitter,
        jitter_ms=out_jitter,
        replay_jitter_ms=_stats(replay_jitter),
        n_send_intervals=sum(len(iv) for iv in send_intervals),
        span_s=round(_span(send_times), 3),
        received_span_s=round(_span(recv_times), 3),
    )
    if failed:  # only then in the file: a run without failures keeps its bytes
        figs = figs.updated(frames_failed=len(failed), first_error=str(failed[0].get("error") or "?"))
    if warmup is None:  # a formulation's: the warm-up belongs to the session
        return figs
    return figs.updated(warmup=Warmup(frames=len(warm), received=len(warm_answered),
                                      latency_ms=[_round(r.get("latency_ms")) for r in warm]),
                        cold_start_ms=_round(warm[0].get("latency_ms")) if warm else None)


def _span(times_per_stream: Iterable[Sequence[int]]) -> float:
    return sum(max(t) - min(t) for t in times_per_stream if len(t) >= 2) / 1e9


def realtime_summary(
    records: Iterable[Mapping[str, Any]], *, budget_ms: float, rate_hz: float, mode: str, warmup_frames: int
) -> RealtimeRecord:
    """``realtime.json`` (docs/FORMATS.md; ``realtime`` in metrics.json) from the trace
    records: overall and per formulation (module doc and docs/EVALUATION.md, "Real-time
    figures", for the definitions)."""
    records = list(records)
    recs = latest_frames(records)
    warm = warmup_records(records)
    formulations = list(dict.fromkeys(str(r["formulation"]) for r in recs))
    budget_ms, rate_hz = float(budget_ms), float(rate_hz)

    def of(subset: Sequence[Mapping[str, Any]], warmup: Sequence[Mapping[str, Any]] | None = None
           ) -> RealtimeFigures:
        return figures(subset, budget_ms=budget_ms, rate_hz=rate_hz, mode=mode, warmup=warmup)

    return RealtimeRecord(
        **of(recs, warm).to_json(),
        budget_ms=budget_ms, rate_hz=rate_hz, mode=mode, warmup_frames=int(warmup_frames),
        jitter_of="output: |difference of consecutive answer arrival intervals|",
        stray_messages=sum(1 for r in records if r.get("kind") == STRAY),
        misattributed=sum(1 for r in recs if r.get("status") == MISATTRIBUTED),
        # the warm-up belongs to the session, not to a formulation: reported once, overall
        by_formulation={f: of([r for r in recs if r["formulation"] == f]) for f in formulations},
    )  # fmt: skip


# -- why a frame was missed: the node's own evidence ----------------------------------------
MAILBOX = "mailbox"  # the one excuse: dropped by the newest-frame mailbox behind a long frame
MAILBOX_IDLE = "mailbox while idle"  # replaced before the worker took it: the worker had no CPU


def explain_misses(
    records: Iterable[Mapping[str, Any]], node_frames: Iterable[Mapping[str, Any]], *, period_ms: float
) -> dict[int, tuple[str, str]]:
    """For every missed measured frame (by stamp): ``(cause, text)`` from the grounding
    node's own trace, never from the evaluator's latencies. ``node_frames``: one record per
    frame the node processed, with ``stamp_ns``, ``start_ns``, ``end_ns``,
    ``prompt_wait_ms`` (waiting for its stamped prompt set), ``bound`` (answered with its
    own set) and ``replaced`` (the stamps replaced in its mailbox meanwhile); records
    ``{"replaced_idle": stamp}`` (replaced while no frame was in flight) may be among them.

    Causes: ``mailbox`` (replaced while the node processed a frame that took longer than a
    period, not counting any wait for a prompt set: the only miss a correct pipeline makes
    with a model slower than the camera), ``late prompt set`` (replaced while the node
    waited for a frame's stamped prompt set, a wait that made that frame outlast a period,
    or processed without its own set),
    ``mailbox within a period`` (replaced although the frame in flight took no longer than
    a period: the frames reached the node less than a period apart, a burst from the
    transport, the executor or the sender), ``mailbox while idle`` (replaced in the mailbox
    before the worker, idle, took it: its thread did not get the CPU) and ``no evidence``
    (the node never saw it, or did not say)."""
    node_frames = list(node_frames)
    idle = {int(f["replaced_idle"]) for f in node_frames if "replaced_idle" in f}
    by_stamp = {int(f["stamp_ns"]): f for f in node_frames if "stamp_ns" in f}
    replaced_by = {int(s): f for f in by_stamp.values() for s in f.get("replaced", ())}
    out: dict[int, tuple[str, str]] = {}
    for r in latest_frames(records):
        if r.get("status") == ANSWERED:
            continue
        stamp = int(r["stamp_ns"])
        own = by_stamp.get(stamp)
        flight = replaced_by.get(stamp)
        if own is not None and not own.get("bound", True):
            out[stamp] = ("late prompt set", "the node processed it without its stamped prompt set")
        elif flight is not None:
            wait = float(flight.get("prompt_wait_ms") or 0.0)
            busy = (int(flight["end_ns"]) - int(flight["start_ns"])) / 1e6 - wait
            # the node measures every frame's wait, a few microseconds when its set was there:
            # a wait is the cause only when it made the frame in flight outlast a period
            if busy > period_ms:
                out[stamp] = (MAILBOX, f"replaced while the node processed frame {flight['stamp_ns']} for "
                              f"{busy:.1f} ms (> a period of {period_ms:.1f} ms)")
            elif busy + wait > period_ms or not flight.get("bound", True):
                out[stamp] = ("late prompt set", f"replaced while the node waited {wait:.1f} ms for the "
                              f"stamped prompt set of frame {flight['stamp_ns']}")
            else:
                out[stamp] = ("mailbox within a period", f"replaced while the node processed frame "
                              f"{flight['stamp_ns']} for only {busy:.1f} ms: frames reached the node "
                              "less than a period apart")
        elif stamp in idle:
            out[stamp] = (MAILBOX_IDLE, "replaced in the node's mailbox before its worker, idle, took it")
        else:
            out[stamp] = ("no evidence", "the node's trace neither processed nor replaced it")
    return out
