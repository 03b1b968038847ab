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
    transport: str = ""  # many frames lost in transport (:func:`loss_warning`), else ""
    configure_error: str = ""  # why the last configure failed, "" once one worked


def diagnostic_level(h: Health) -> tuple[str, str]:
    """(level, message) of the node's DiagnosticStatus, first match wins:

    1. not active: WARN;
    2. many frames lost in transport: WARN (a camera without the profile: its silence or low
       rate has this cause, so it is named first);
    3. active but no frame for ``camera_timeout`` s: WARN (a dead or disconnected camera);
    4. frames arrive but every one since the last report failed: ERROR;
    5. no prompts: WARN; 6. some frames failed: WARN; else OK with the rate.
    """
    if h.state != "active":
        failed = f" ({h.configure_error})" if h.configure_error and h.state == "unconfigured" else ""
        return "WARN", f"{h.state}: not processing{failed}"
    if h.transport:
        return "WARN", h.transport
    if h.silent_s >= h.camera_timeout:
        return "WARN", (f"no image for {h.silent_s:.1f} s on {h.topics} "
                        f"(camera_timeout {h.camera_timeout:g} s)")
    why = f": {h.last_error}" if h.last_error else ""
    if h.new_errors and not h.new_processed:
        return "ERROR", f"every frame fails ({h.new_errors} since last report){why}"
    if not h.n_prompts:
        return "WARN", "active, no prompts"
    if h.new_errors:
        return "WARN", f"{h.new_errors} frame errors since last report{why}"
    return "OK", f"{h.rate_hz:.1f} Hz"


# -- frames lost in transport ---------------------------------------------------------------
LOSS_WINDOW_S = 10.0  # the loss figure covers the frames of the last 10 s
LOSS_WARN_SHARE = 0.2  # /diagnostics WARNs from 20% of the frames lost ...
LOSS_WARN_MIN = 10  # ... and at least this many lost in the window (a few drops are noise)
_MAX_GAP_S = 2.0  # a longer gap between stamps is a paused camera, not lost frames
_REGULAR_SHARE = 0.8  # stamps are periodic when this share of gaps is a whole number of periods
_WHOLE_TOLERANCE = 0.15  # ... within this fraction of a period (camera jitter)
_NEXT_SHARE = 0.15  # ... and this share of gaps is one period (consecutive frames)
_STAMPS_FOR_PERIOD = 16  # gaps needed before the period is trusted


class TransportLoss:
    """Frames lost between the camera and the node (pure Python, thread-safe).

    Two witnesses, per camera stream (``raw``, ``compressed``):

    - the middleware's message-lost event (:meth:`lost`; Fast DDS reports sequence numbers
      that never arrived), where the middleware reports it;
    - gaps in the frames' header stamps against the camera's own period, estimated from the
      stamps (:meth:`arrived`): the median of the gaps near the smallest one, trusted only
      after 16 gaps, when 15% of them are one period and most are whole multiples of
      it (a periodic camera; replays with irregular stamps are not judged). Gaps over 2 s
      are a paused camera, not loss.

    Both are counted and reported. The loss figure, ``lost / (lost + received)`` over the
    last :data:`LOSS_WINDOW_S` seconds, comes from the middleware's count where it reports
    lost messages (``events_reported``, set by the node when the event could be
    subscribed), else from the stamp gaps: a gap in the stamps can also be a frame the
    driver never sent, or a camera that slowed down (auto-exposure), which the middleware
    rightly does not count as lost.
    """

    def __init__(self, window_s: float = LOSS_WINDOW_S) -> None:
        self._lock = threading.Lock()
        self.window_s = window_s
        self.events_reported = False  # the middleware reports lost messages on the camera topics
        self.received = 0
        self.lost_events = 0  # total reported by the middleware
        self.lost_gaps = 0  # total inferred from stamp gaps
        self._last_stamp: dict[str, int] = {}
        self._gaps: dict[str, deque[int]] = {}  # recent positive stamp gaps (ns), per stream
        # (monotonic time, received, lost by events, lost by gaps) per arrival or event
        self._recent: deque[tuple[float, int, int, int]] = deque()

    def arrived(self, kind: str, stamp_ns: int | None, now: float | None = None) -> None:
        """A frame of stream ``kind`` arrived, stamped ``stamp_ns`` (None: unreadable)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self.received += 1
            missing = 0
            if stamp_ns is not None:
                previous = self._last_stamp.get(kind)
                self._last_stamp[kind] = stamp_ns
                gap = 0 if previous is None else stamp_ns - previous
                if 0 < gap <= _MAX_GAP_S * 1e9:
                    gaps = self._gaps.setdefault(kind, deque(maxlen=64))
                    gaps.append(gap)
                    period = self._period(gaps)
                    if period is not None:
                        missing = max(0, round(gap / period) - 1)
            self.lost_gaps += missing
            self._add(now, 1, 0, missing)

    def lost(self, count: int, now: float | None = None) -> None:
        """The middleware reported ``count`` more messages lost on a camera subscription."""
        if count <= 0:
            return
        with self._lock:
            self.lost_events += count
            self._add(time.monotonic() if now is None else now, 0, count, 0)

    @staticmethod
    def _period(gaps: deque[int]) -> float | None:
        """The camera's period (ns) from recent stamp gaps, or None while not trusted."""
        if len(gaps) < _STAMPS_FOR_PERIOD:
            return None
        base = min(gaps)
        close = [g for g in gaps if g < 1.5 * base]
        if len(close) < _NEXT_SHARE * len(gaps):
            return None
        period = float(np.median(close))
        whole = sum(1 for g in gaps if abs(g / period - round(g / period)) < _WHOLE_TOLERANCE)
        return period if whole >= _REGULAR_SHARE * len(gaps) else None

    def _add(self, now: float, received: int, events: int, gaps: int) -> None:
        self._recent.append((now, received, events, gaps))
        while self._recent and self._recent[0][0] < now - self.window_s:
            self._recent.popleft()

    def snapshot(self, now: float | None = None) -> dict[str, float | int | str]:
        """``transport_loss`` (share of the last window's frames lost, 0..1),
        ``transport_lost`` (lost in the window), ``transport_witness`` (``events`` or
        ``stamps``: where the figure comes from), the totals ``transport_lost_events`` /
        ``transport_lost_gaps`` and ``camera_period_ms`` (0 while unknown)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            recent = [r for r in self._recent if r[0] >= now - self.window_s]
            periods = [p for p in (self._period(g) for g in self._gaps.values()) if p is not None]
            totals = self.lost_events, self.lost_gaps
        received = sum(r[1] for r in recent)
        lost = sum(r[2 if self.events_reported else 3] for r in recent)
        share = lost / (lost + received) if lost + received else 0.0
        return {"transport_loss": round(share, 4), "transport_lost": lost, "transport_received": received,
                "transport_witness": "events" if self.events_reported else "stamps",
                "transport_lost_events": totals[0], "transport_lost_gaps": totals[1],
                "camera_period_ms": round(min(periods) / 1e6, 3) if periods else 0.0}


def loss_warning(snapshot: Mapping[str, float | int | str], topics: str) -> str:
    """The one-line reason for a WARN when many frames are lost in transport, else ""."""
    lost, share = int(snapshot["transport_lost"]), float(snapshot["transport_loss"])
    if lost < LOSS_WARN_MIN or share < LOSS_WARN_SHARE:
        return ""
    return (f"{share:.0%} of camera frames lost in transport in the last {LOSS_WINDOW_S:g} s "
            f"({lost} lost, {int(snapshot['transport_received'])} received on {topics})")


def loss_hint(profile: str | None) -> str:
    """What to do about transport loss, in one line: the camera driver's environment
    (``profile``: the path of probench's Fast DDS profile; None when the middleware is not
    Fast DDS)."""
    where = "docs/SETUP.md#camera-frames-lost-in-transport"
    if profile:
        return (f"start the camera driver with FASTDDS_DEFAULT_PROFILES_FILE={profile} in its environment "
                f"(the sender's shared-memory segment is too small for its frames; see {where})")
    return f"the camera's middleware drops frames: check its transport settings (see {where})"
