"""A :class:`~probench.realtime.grounding_worker.WaitClock` whose time moves only while a
:class:`~probench.realtime.grounding_worker.StampedMap` waits: tests of the waits step it
instead of sleeping on the wall clock."""

from __future__ import annotations

import threading
from typing import Any


class SteppedClock:
    """A wait ends at its timeout, or at the first scheduled arrival before it: the value is
    put then (:meth:`arrive`), as the executor thread would put it, notifying the waiter.
    ``waits`` holds every wait's timeout."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.arrivals: list[tuple[float, int, Any]] = []  # (time, stamp, value)
        self.map: Any = None  # the StampedMap the arrivals are put into
        self.waits: list[float] = []

    def arrive(self, after_s: float, stamp_ns: int, value: Any) -> None:
        """``value`` stamped ``stamp_ns`` is put ``after_s`` from now (during a wait)."""
        self.arrivals.append((self.now + after_s, stamp_ns, value))

    def monotonic(self) -> float:
        return self.now

    def wait(self, cond: threading.Condition, seconds: float) -> None:
        self.waits.append(seconds)
        due = sorted((a for a in self.arrivals if a[0] <= self.now + seconds), key=lambda a: a[0])
        if not due:
            self.now += seconds
            return
        self.arrivals.remove(due[0])
        self.now = due[0][0]
        self.map.put(due[0][1], due[0][2])  # under the map's (re-entrant) lock, as a notify
