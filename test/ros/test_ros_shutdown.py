"""probench.ros.shutdown in this process: the first SIGINT/SIGTERM is a request, repeats are
ignored, and only an interruptible step is abandoned (the subprocess tests with random
signals are in test_ros_node_signals.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from probench.ros.shutdown import SIGNALS, ShutdownRequested, SignalShutdown


@pytest.fixture
def shutdown() -> Iterator[SignalShutdown]:
    saved = {sig: signal.getsignal(sig) for sig in SIGNALS}
    try:
        yield SignalShutdown.install()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_first_signal_is_a_request_and_repeats_are_ignored(shutdown: SignalShutdown) -> None:
    assert not shutdown.requested
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before kill() returns to Python code
    assert shutdown.requested and shutdown.signal_name == "SIGTERM"
    for sig in (signal.SIGINT, signal.SIGINT, signal.SIGTERM):  # launch's forwarded Ctrl-C, escalation
        os.kill(os.getpid(), sig)
    assert shutdown.signal_name == "SIGTERM"  # nothing raised, nothing changed
    assert shutdown.wait(0.0)


def test_an_interruptible_step_is_abandoned_once(shutdown: SignalShutdown) -> None:
    reached = []
    with pytest.raises(ShutdownRequested, match="SIGINT"), shutdown.interruptible():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after the signal")  # never: the step is abandoned
    assert reached == [] and shutdown.requested
    os.kill(os.getpid(), signal.SIGINT)  # during clean-up: ignored, not raised
    # a step that begins after the request does not run
    with pytest.raises(ShutdownRequested), shutdown.interruptible():
        reached.append("step")
    assert reached == []


def test_a_step_outside_interruptible_runs_to_its_end(shutdown: SignalShutdown) -> None:
    done = []
    os.kill(os.getpid(), signal.SIGINT)
    done.append("clean-up step")
    assert done == ["clean-up step"] and shutdown.requested


def test_shutdown_requested_is_not_an_exception() -> None:
    """`except Exception` (model adapters, rclpy's lifecycle callbacks) must not swallow it."""
    assert not issubclass(ShutdownRequested, Exception)


def test_ignored_for_the_last_moments(shutdown: SignalShutdown) -> None:
    shutdown.ignore_from_now()
    assert all(signal.getsignal(sig) == signal.SIG_IGN for sig in SIGNALS)
    os.kill(os.getpid(), signal.SIGINT)  # neither raised nor recorded
    assert not shutdown.requested
