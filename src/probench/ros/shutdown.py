"""SIGINT/SIGTERM as one orderly shutdown request, for the nodes' ``main`` (no rclpy).

rclpy's own handlers turn SIGINT into a KeyboardInterrupt at whatever line runs, every
time. Under ``ros2 launch`` a Ctrl-C reaches a node twice in quick succession (from the
terminal, to the whole process group, and from launch, which forwards SIGINT to its
children), so the second one used to land in the node's clean-up (``gc.collect()`` in
``_release``): a traceback, and launch reporting "process has died, exit code -2".

:class:`SignalShutdown` replaces both handlers (the nodes call ``rclpy.init`` with
``SignalHandlerOptions.NO``): the first signal records the request; the main loop sees
:attr:`~SignalShutdown.requested` and cleans up; every later signal is ignored. Only inside
an :meth:`~SignalShutdown.interruptible` block (a long step with no loop to poll, like
loading a model) does the first signal also raise :class:`ShutdownRequested` there, so that
the step is abandoned at once. The process then exits 0: it did what it was asked.

When ``main`` is done, :meth:`~SignalShutdown.ignore_from_now` sets both signals to
SIG_IGN: while the interpreter finalizes it puts the default action back for any signal
with a Python handler, so a late repeat would otherwise still kill the exiting process
("exit code -2"); an ignored signal stays ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ShutdownRequested(BaseException):
    """Raised inside :meth:`SignalShutdown.interruptible` by the first SIGINT/SIGTERM.

    A BaseException, so that ``except Exception`` around a step (a model adapter, rclpy's
    lifecycle callbacks) does not swallow it."""


class SignalShutdown:
    """The process's shutdown request, set by the first SIGINT or SIGTERM."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._interruptible = False
        self.signal_name = ""

    @classmethod
    def install(cls) -> SignalShutdown:
        """Handle SIGINT and SIGTERM from now on (main thread only)."""
        shutdown = cls()
        for sig in SIGNALS:
            signal.signal(sig, shutdown._handle)
        return shutdown

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._event.is_set():
            return  # a repeat (launch forwards the terminal's Ctrl-C): clean-up goes on
        self.signal_name = signal.Signals(signum).name
        self._event.set()
        if self._interruptible:
            self._interruptible = False
            raise ShutdownRequested(self.signal_name)

    def ignore_from_now(self) -> None:
        """Ignore SIGINT/SIGTERM for the rest of the process (its last moments: called when
        ``main`` has cleaned up, before the interpreter finalizes)."""
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """A step that the first signal abandons (raising :class:`ShutdownRequested` in it);
        raises at once when shutdown was requested before the step began."""
        if self._event.is_set():
            raise ShutdownRequested(self.signal_name)
        self._interruptible = True
        try:
            yield
        finally:
            self._interruptible = False
