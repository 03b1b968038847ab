"""The metric suite (docs/METRICS.md): COCO AP on label spaces, the IoU sweep, prompt
robustness (deltas, PCR, PLC) and breakdowns, on a vectorised numpy engine.
Definitions: docs/METRICS.md.

The names below are imported on first use, so that ``probench score``'s argument parser
(``probench.scoring.cli``) is built without importing numpy and the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probench.scoring.streaming import StreamingScorer
    from probench.scoring.suite import score, score_run

__all__ = ["StreamingScorer", "score", "score_run"]


def __getattr__(name: str) -> Any:
    if name == "StreamingScorer":
        from probench.scoring.streaming import StreamingScorer

        return StreamingScorer
    if name in ("score", "score_run"):
        from probench.scoring import suite

        return getattr(suite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
