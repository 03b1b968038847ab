"""The metric suite (docs/METRICS.md): COCO AP on label spaces, the IoU sweep, prompt
robustness (deltas, PCR, PLC) and breakdowns, on a vectorised numpy engine.
Definitions: docs/METRICS.md."""

from probench.scoring.streaming import StreamingScorer
from probench.scoring.suite import score, score_run

__all__ = ["StreamingScorer", "score", "score_run"]
