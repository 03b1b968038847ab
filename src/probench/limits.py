"""The documented ranges of probench's numeric settings (docs/SECURITY.md): rates, periods,
timeouts, threads, counts. The node parameter tables (:mod:`probench.realtime.node_spec`)
take their bounds from here; every command's float flags are checked with :func:`check_flag`
and every integer flag is parsed by an :class:`IntRange` (a test walks the parsers for one
without), so a flag and the parameter it sets accept the same values, at start-up and live
alike.

A bottom module: it imports only :mod:`probench.errors`.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from probench.errors import UsageError

__all__ = ["INT64_MAX", "MAX_COUNT", "MAX_DOMAIN_ID", "MAX_PERIOD_S", "MAX_PORT", "MAX_RATE_HZ",
           "MAX_RESAMPLES", "MAX_SEED", "MAX_THREADS", "MAX_TIMEOUT_S", "MIN_PERIOD_S", "MIN_RATE_HZ",
           "MIN_RESAMPLES", "THREADS_DEFAULT", "IntRange", "check_flag"]

MIN_RATE_HZ = 0.1  # a camera or replay rate: one frame every 10 s at the slowest
MAX_RATE_HZ = 1000.0  # ... and a frame every millisecond at the fastest
MIN_PERIOD_S = 0.01  # a timer period (diagnostics): at most 100 messages a second
MAX_PERIOD_S = 3600.0
MAX_TIMEOUT_S = 86_400.0  # a timeout or wait: a day at most (a typo of units, not a wish)
MAX_THREADS = 256  # CPU threads of the model work (the `threads` setting) ...
THREADS_DEFAULT = 0  # ... whose default, 0, is half the usable CPUs (probench.models.threads)
MAX_COUNT = 1_000_000_000  # a count of images, passes, workers, frames: a typo beyond, not a wish
MAX_SEED = 2**32 - 1  # a random seed: numpy's classic seed range
INT64_MAX = 2**63 - 1  # what a ROS integer (parameter, std_msgs/Int64) carries
MAX_DOMAIN_ID = 232  # ROS_DOMAIN_ID: the highest a DDS participant may use on Linux
MAX_PORT = 65_535
# Bootstrap resamples (``--bootstrap``): a 95% percentile interval is read from its two 2.5%
# tails, so fewer than 40 resamples leave a tail without one resample (40 x 0.025 = 1) and
# the "interval" is a few draws that may exclude the point value itself.
MIN_RESAMPLES = 40
MAX_RESAMPLES = 100_000


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


@dataclass(frozen=True)
class IntRange:
    """The argparse ``type`` of an integer flag: a whole number in ``low..high``, or ``off``
    (a value outside the range that turns the thing off, e.g. ``--bootstrap 0``). Anything
    else is argparse's one-line usage error (exit 2), never an exception further in."""

    low: int
    high: int
    off: int | None = None

    def __call__(self, text: str) -> int:
        try:
            value = int(text.strip())  # (a 5000-digit string is a ValueError too)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if value != self.off and not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"must be {self.text()}, got {str(value)[:40]}")
        return value

    def text(self) -> str:
        """The accepted values in words: ``0 (off) or 40..100000``, ``>= 1``."""
        span = f"{self.low}..{self.high}"
        return span if self.off is None else f"{self.off} (off) or {span}"
