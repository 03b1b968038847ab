"""The fake grounding node with operator prompts (a sequence bag's replay,
realtime/eval_sequence.py), and the example plugin's colour detector that finds the
synthetic sequences' shapes (their prompts name the colour)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from probench.realtime.fake_link import FakeGroundingLink

EXAMPLE_SRC = Path(__file__).resolve().parents[2] / "examples" / "probench-example-plugin" / "src"


def colour_detector() -> Any:
    """The example plugin's ColourDetector (boxes the pixels of the colour a prompt names)."""
    if str(EXAMPLE_SRC) not in sys.path:
        sys.path.insert(0, str(EXAMPLE_SRC))
    from probench_example_plugin.detector import ColourDetector

    return ColourDetector(device="cpu", score_threshold=0.0)


# The fake link takes operator prompts itself (set_prompts, acknowledged when its worker has
# made them ready, ``ack_s`` later on the evaluator's side), as the grounding node does.
OperatorFakeLink = FakeGroundingLink


def build(spec: Any, *, preprocess: str = "device", **_options: Any) -> Any:
    """A one-off plugin model (``--model helpers.sequence_link:build``; the zoo's factory
    arguments, of which it needs only ``preprocess``): the colour detector."""
    det = colour_detector()
    det.preprocess = preprocess
    det.weights_source = "none (numpy colour rule)"
    return det
