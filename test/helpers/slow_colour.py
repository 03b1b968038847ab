"""A one-off plugin model (``--model helpers.slow_colour:build``): the example plugin's colour
detector, sleeping ``DELAY_S`` per frame (a model slower than the camera): the sequence
tests' detector through the ROS 2 graph."""

from __future__ import annotations

import time
from typing import Any

from helpers.sequence_link import build as colour

DELAY_S = 0.15


def build(spec: Any, **options: Any) -> Any:
    """The zoo's factory signature (docs/MODELS.md, "Plugin models")."""
    det = colour(spec, **options)
    run = det._run

    def slow_run(image: Any, text_state: object) -> Any:
        time.sleep(DELAY_S)
        return run(image, text_state)

    det._run = slow_run
    det.weights_source = "none (numpy colour rule, 150 ms sleep)"
    return det
