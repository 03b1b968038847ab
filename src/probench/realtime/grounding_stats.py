"""Counters, latency windows and health of the grounding node (pure Python, thread-safe, no
rclpy), so the rules of its /diagnostics are unit-tested directly."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

# The node's own stage: a serialized Image/CompressedImage -> the RGB array the model gets.
DECODE_STAGE = "decode"
# The counters GroundingStats.count adds to (its attributes of these names); received and
# processed have their own methods (frame_arrived, record_frame).
Counter = Literal["skipped", "errors", "prompts_rejected"]


class GroundingStats:
    """What /diagnostics reports: frame counters, a sliding window of per-frame latency
    (arrival of the image message -> detections published, in ms), one window per stage
    (``decode``, then the detector's own stages from ``Detections.timings_ms``), and when
    the last frame arrived."""

    def __init__(self, window: int = 200) -> None:
        self._lock = threading.Lock()
        self._window = window
        self.received = 0
        self.processed = 0
        self.skipped = 0  # replaced in the mailbox before processing, or dropped by a prompt change
        self.errors = 0  # bad images, model failures
        self.prompts_rejected = 0
        self.last_arrival: float | None = None  # monotonic time of the last frame received
        self._latency_ms: deque[float] = deque(maxlen=window)
        self._done: deque[float] = deque(maxlen=window)
        self._stages: dict[str, deque[float]] = {}

    def count(self, field: Counter, n: int = 1) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + n)

    def frame_arrived(self, now: float | None = None) -> None:
        with self._lock:
            self.received += 1
            self.last_arrival = time.monotonic() if now is None else now

    def record_frame(self, latency_ms: float, now: float | None = None,
                     stages_ms: Mapping[str, float] | None = None) -> None:
        """One frame answered: its latency and, optionally, its per-stage times."""
        with self._lock:
            self.processed += 1
            self._latency_ms.append(float(latency_ms))
            self._done.append(time.monotonic() if now is None else now)
            for name, ms in (stages_ms or {}).items():
                stage = self._stages.get(name)
                if stage is None:
                    stage = self._stages[name] = deque(maxlen=self._window)
                stage.append(float(ms))

    def snapshot(self, now: float | None = None, stale_after_s: float = 2.0) -> dict[str, float | int]:
        """Counters, processing rate (Hz, 0 when nothing finished within ``stale_after_s``),
        latency p50/p95/max (ms) over the window, and p50/p95 of each stage
        (``stage_<name>_p50_ms``; ``decode`` first)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            lat = np.array(self._latency_ms, dtype=np.float64)
            done = list(self._done)
            stages = {name: np.array(v, dtype=np.float64) for name, v in self._stages.items()}
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
        for name in sorted(stages, key=lambda n: (n != DECODE_STAGE, n)):
            p50, p95 = np.percentile(stages[name], [50, 95])
            out[f"stage_{name}_p50_ms"], out[f"stage_{name}_p95_ms"] = float(p50), float(p95)
        return out


@dataclass(frozen=True)
class Health:
    """What the node's DiagnosticStatus level is decided from, for one report period."""

    state: str  # lifecycle state label
    n_prompts: int  # the operator's active prompt set
    new_processed: int  # frames answered since the last report
    new_errors: int  # frames that failed since the last report
    rate_hz: float
    silent_s: float  # seconds without a frame (since activation when none came yet)
    camera_timeout: float  # the node's camera_timeout parameter
    topics: str = "image"  # where frames are expected, for the message
    last_error: str = ""


def diagnostic_level(h: Health) -> tuple[str, str]:
    """(level, message) of the node's DiagnosticStatus, first match wins:

    1. not active: WARN;
    2. active but no frame for ``camera_timeout`` s: WARN (a dead or disconnected camera);
    3. frames arrive but every one since the last report failed: ERROR;
    4. no prompts: WARN; 5. some frames failed: WARN; else OK with the rate.
    """
    if h.state != "active":
        return "WARN", f"{h.state}: not processing"
    if h.silent_s >= h.camera_timeout:
        return "WARN", (f"no image for {h.silent_s:.1f} s on {h.topics} "
                        f"(camera_timeout {h.camera_timeout:g} s)")
    if h.new_errors and not h.new_processed:
        why = f": {h.last_error}" if h.last_error else ""
        return "ERROR", f"every frame fails ({h.new_errors} since last report){why}"
    if not h.n_prompts:
        return "WARN", "active, no prompts"
    if h.new_errors:
        return "WARN", f"{h.new_errors} frame errors since last report"
    return "OK", f"{h.rate_hz:.1f} Hz"
