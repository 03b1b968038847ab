"""The fake grounding node with operator prompts (a sequence bag's replay,
realtime/eval_sequence.py), and the example plugin's colour detector that finds the
synthetic sequences' shapes (their prompts name the colour)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from probench.realtime.fake_link import FakeGroundingLink
from probench.realtime.grounding_worker import Prompts

EXAMPLE_SRC = Path(__file__).resolve().parents[2] / "examples" / "probench-example-plugin" / "src"


def colour_detector() -> Any:
    """The example plugin's ColourDetector (boxes the pixels of the colour a prompt names)."""
    if str(EXAMPLE_SRC) not in sys.path:
        sys.path.insert(0, str(EXAMPLE_SRC))
    from probench_example_plugin.detector import ColourDetector

    return ColourDetector(device="cpu", score_threshold=0.0)


class OperatorFakeLink(FakeGroundingLink):
    """FakeGroundingLink that also takes operator prompts: a frame without a stamped set is
    answered with the operator's set of the moment (the node's rule), each prompt is
    acknowledged ``ack_s`` after it was sent."""

    def __init__(self, *, ack_s: float = 0.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.operator: Prompts | None = None
        self.ack_s = ack_s
        self._ack: Callable[[tuple[str, ...], int], object] | None = None
        self.prompts_sent: list[tuple[int, tuple[str, ...]]] = []  # (time, texts)
        self.ready_calls = 0

    def set_prompts(self, texts: Sequence[str]) -> None:
        now = self._now()
        self.operator = tuple(texts)
        self.prompts_sent.append((now, tuple(texts)))
        if self._ack is not None:
            self._ack(tuple(texts), now + round(self.ack_s * 1e9))

    def set_ack_handler(self, handler: Callable[[tuple[str, ...], int], object]) -> None:
        self._ack = handler

    def ready_for_operator_prompts(self, timeout: float) -> None:
        self.ready_calls += 1

    def _stamped_set(self, stamp: int, start: int) -> tuple[Prompts | None, int]:
        if self.operator is not None and self.announced == 0:  # no stamped sets: the operator's
            return self.operator, 0
        return super()._stamped_set(stamp, start)


def build(spec: Any, *, preprocess: str = "device", **_options: Any) -> Any:
    """A one-off plugin model (``--model helpers.sequence_link:build``; the zoo's factory
    arguments, of which it needs only ``preprocess``): the colour detector."""
    det = colour_detector()
    det.preprocess = preprocess
    det.weights_source = "none (numpy colour rule)"
    return det
