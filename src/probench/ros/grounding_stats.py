"""Counters and latency window of the grounding node (pure Python, thread-safe, no rclpy)."""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np


class GroundingStats:
    """What /diagnostics reports: frame counters and a sliding window of per-frame latency
    (arrival of the image message -> detections published, in ms)."""

    def __init__(self, window: int = 200) -> None:
        self._lock = threading.Lock()
        self.received = 0
        self.processed = 0
        self.skipped = 0  # replaced in the mailbox before processing, or dropped by a prompt change
        self.errors = 0  # bad images, model failures
        self.prompts_rejected = 0
        self._latency_ms: deque[float] = deque(maxlen=window)
        self._done: deque[float] = deque(maxlen=window)

    def count(self, field: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + n)

    def record_frame(self, latency_ms: float, now: float | None = None) -> None:
        with self._lock:
            self.processed += 1
            self._latency_ms.append(float(latency_ms))
            self._done.append(time.monotonic() if now is None else now)

    def snapshot(self, now: float | None = None, stale_after_s: float = 2.0) -> dict[str, float | int]:
        """Counters, processing rate (Hz, 0 when nothing finished within ``stale_after_s``)
        and latency p50/p95/max (ms) over the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            lat = np.array(self._latency_ms, dtype=np.float64)
            done = list(self._done)
            out: dict[str, float | int] = {
                "frames_received": self.received,
                "frames_processed": self.processed,
                "frames_skipped": self.skipped,
                "errors": self.errors,
                "prompts_rejected": self.prompts_rejected,
            }
        rate = 0.0
        if len(done) >= 2 and now - done[-1] <= stale_after_s and done[-1] > done[0]:
            rate = (len(done) - 1) / (done[-1] - done[0])
        out["rate_hz"] = float(rate)
        if len(lat):
            p50, p95 = np.percentile(lat, [50, 95])
            out.update(latency_p50_ms=float(p50), latency_p95_ms=float(p95), latency_max_ms=float(lat.max()))
        else:
            out.update(latency_p50_ms=0.0, latency_p95_ms=0.0, latency_max_ms=0.0)
        return out


def diagnostic_level(state: str, n_prompts: int, new_errors: int, rate_hz: float) -> tuple[str, str]:
    """(level, message) of the node's DiagnosticStatus."""
    if state != "active":
        return "WARN", f"{state}: not processing"
    if not n_prompts:
        return "WARN", "active, no prompts"
    if new_errors:
        return "WARN", f"{new_errors} frame errors since last report"
    return "OK", f"{rate_hz:.1f} Hz"
