"""The documented ranges of probench's numeric settings (docs/SECURITY.md): rates, periods,
timeouts, threads. The node parameter tables (:mod:`probench.realtime.node_spec`) take their bounds
from here and every command's numeric flags are checked with :func:`check_flag`, so a flag
and the parameter it sets accept the same values, at start-up and live alike.

A bottom module: it imports only :mod:`probench.errors`.
"""

from __future__ import annotations

import math

from probench.errors import UsageError

__all__ = ["MAX_PERIOD_S", "MAX_RATE_HZ", "MAX_THREADS", "MAX_TIMEOUT_S", "MIN_PERIOD_S", "MIN_RATE_HZ",
           "THREADS_DEFAULT", "check_flag"]

MIN_RATE_HZ = 0.1  # a camera or replay rate: one frame every 10 s at the slowest
MAX_RATE_HZ = 1000.0  # ... and a frame every millisecond at the fastest
MIN_PERIOD_S = 0.01  # a timer period (diagnostics): at most 100 messages a second
MAX_PERIOD_S = 3600.0
MAX_TIMEOUT_S = 86_400.0  # a timeout or wait: a day at most (a typo of units, not a wish)
MAX_THREADS = 256  # CPU threads of the model work (the `threads` setting) ...
THREADS_DEFAULT = 0  # ... whose default, 0, is half the usable CPUs (probench.models.threads)


def check_flag(flag: str, value: float | int | None, *, low: float | None = None, high: float | None = None,
               low_open: bool = False) -> None:
    """A :class:`UsageError` (exit 2, one line) unless ``value`` is None or a finite number
    in the range (``low_open``: ``> low``, else ``>= low``; ``<= high``)."""
    if value is None:
        return
    v = float(value)
    problem = None
    if not math.isfinite(v):
        problem = "a finite number"
    elif low is not None and (v <= low if low_open else v < low):
        problem = "positive" if low == 0 and low_open else f"{'>' if low_open else '>='} {low:g}"
    elif high is not None and v > high:
        problem = f"<= {high:g}"
    if problem is not None:
        raise UsageError(f"{flag} must be {problem}, got {value:g}" if isinstance(value, (int, float))
                         else f"{flag} must be {problem}")
