"""The transport-loss figure of the grounding node (pure rules: stamp gaps against the
camera's own period, the middleware's lost-message counts, the window and the warning)."""

from __future__ import annotations

import random

from probench.realtime.grounding_stats import (
    Health,
    TransportLoss,
    diagnostic_level,
    loss_hint,
    loss_warning,
)

PERIOD_NS = 33_333_333  # 30 Hz


def _feed(loss: TransportLoss, stamps_ns: list[int], kind: str = "raw") -> None:
    for s in stamps_ns:
        loss.arrived(kind, s, now=100.0 + s / 1e9)


def test_no_loss_at_camera_rate() -> None:
    loss = TransportLoss()
    _feed(loss, [i * PERIOD_NS for i in range(90)])
    snap = loss.snapshot(now=103.0)
    assert snap["transport_lost"] == 0 and snap["transport_loss"] == 0.0
    assert abs(snap["camera_period_ms"] - 33.333) < 0.01
    assert loss_warning(snap, "/image") == ""


def test_gaps_in_stamps_count_the_missing_frames() -> None:
    rng = random.Random(1)
    kept = [i for i in range(300) if i % 3 == 0 or rng.random() < 0.2]  # ~47% of 300 frames arrive
    loss = TransportLoss()
    _feed(loss, [i * PERIOD_NS + rng.randrange(-2_000_000, 2_000_000) for i in kept])  # jittered stamps
    snap = loss.snapshot(now=100.0 + 300 * PERIOD_NS / 1e9)
    missing = 300 - len(kept) - (kept[0] - 0) - (299 - kept[-1])
    # the first few gaps come before the period is trusted
    assert missing - 20 <= loss.lost_gaps <= missing
    assert 0.35 < snap["transport_loss"] < 0.6
    warning = loss_warning(snap, "/image")
    assert "of camera frames lost in transport" in warning and "/image" in warning


def test_irregular_stamps_are_not_judged() -> None:
    rng = random.Random(2)
    t, stamps = 0, []
    for _ in range(100):
        t += rng.randrange(10_000_000, 90_000_000)  # a replay with no fixed period
        stamps.append(t)
    loss = TransportLoss()
    _feed(loss, stamps)
    assert loss.lost_gaps == 0 and loss.snapshot(now=110.0)["camera_period_ms"] == 0.0


def test_a_paused_camera_is_not_loss() -> None:
    loss = TransportLoss()
    _feed(loss, [i * PERIOD_NS for i in range(30)] + [10 * 10**9 + i * PERIOD_NS for i in range(30)])
    assert loss.lost_gaps == 0


def test_streams_are_apart() -> None:
    loss = TransportLoss()
    for i in range(60):  # raw and compressed twins of the same frames: no gap between them
        loss.arrived("raw", i * PERIOD_NS, now=100.0)
        loss.arrived("compressed", i * PERIOD_NS, now=100.0)
    assert loss.lost_gaps == 0


def test_middleware_events_and_the_window() -> None:
    loss = TransportLoss(window_s=10.0)
    loss.events_reported = True
    loss.arrived("raw", 0, now=100.0)
    loss.arrived("raw", 40 * PERIOD_NS, now=101.0)
    loss.lost(108, now=101.0)
    snap = loss.snapshot(now=102.0)
    assert snap["transport_lost"] == 108 and snap["transport_received"] == 2
    assert snap["transport_loss"] == round(108 / 110, 4) and snap["transport_lost_events"] == 108
    assert snap["transport_witness"] == "events"
    assert loss_warning(snap, "/image").startswith("98% of camera frames lost in transport")
    later = loss.snapshot(now=112.0)  # out of the window: the figure recovers, the total stays
    assert later["transport_lost"] == 0 and later["transport_lost_events"] == 108
    loss.lost(0)
    assert loss.lost_events == 108


def test_where_the_middleware_reports_losses_stamp_gaps_do_not_warn() -> None:
    """A camera that slows from 30 to 15 Hz (auto-exposure) leaves gaps of two periods that
    look like loss until the period is re-estimated; the middleware, which reports lost
    messages, counts none, and its count is the figure."""
    stamps = [i * PERIOD_NS for i in range(60)] + [60 * PERIOD_NS + 2 * i * PERIOD_NS for i in range(60)]
    by_stamps, by_events = TransportLoss(), TransportLoss()
    by_events.events_reported = True
    _feed(by_stamps, stamps)
    _feed(by_events, stamps)
    now = 100.0 + stamps[-1] / 1e9
    assert by_stamps.lost_gaps > 10 and by_events.lost_gaps == by_stamps.lost_gaps  # both counted
    assert loss_warning(by_stamps.snapshot(now=now), "/image")  # stamps alone: a (transient) warning
    snap = by_events.snapshot(now=now)
    assert snap["transport_lost"] == 0 and snap["transport_witness"] == "events"
    assert loss_warning(snap, "/image") == ""


def test_a_few_drops_are_not_a_warning() -> None:
    loss = TransportLoss()
    loss.events_reported = True
    _feed(loss, [i * PERIOD_NS for i in range(20)])
    loss.lost(9, now=100.5)
    assert loss_warning(loss.snapshot(now=101.0), "/image") == ""  # 31% but only 9 frames


def test_loss_outranks_silence_in_the_diagnostics() -> None:
    h = Health(state="active", n_prompts=1, new_processed=0, new_errors=0, rate_hz=0.0, silent_s=9.0,
               camera_timeout=3.0, transport="98% of camera frames lost in transport")
    assert diagnostic_level(h) == ("WARN", "98% of camera frames lost in transport")
    assert diagnostic_level(Health(**{**h.__dict__, "state": "inactive"}))[1] == "inactive: not processing"


def test_hint_names_the_variable_or_not() -> None:
    hint = loss_hint("/opt/x/config/fastdds.xml")
    assert "FASTDDS_DEFAULT_PROFILES_FILE=/opt/x/config/fastdds.xml" in hint and "docs/SETUP.md" in hint
    assert "FASTDDS" not in loss_hint(None) and "docs/SETUP.md" in loss_hint(None)
