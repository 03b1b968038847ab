"""A scripted detector whose model call raises on chosen frames, as a real model's does (the
tiny Grounding DINO's GroupNorm on a 512x512 image: ``ValueError: Expected more than 1 value
per channel when training``): the frame fails, the caller goes on."""

from __future__ import annotations

from typing import Any

import numpy as np

from probench.detections import Detections
from probench.models.testing import ScriptedDetector

ERROR = "Expected more than 1 value per channel when training, got input size torch.Size([1, 256])"


class FailingDetector(ScriptedDetector):
    """``test-instant`` that raises ``ValueError(ERROR)`` on calls ``fail_calls`` (0-based,
    counted over every detect call) and on images ``fail_width`` pixels wide."""

    def __init__(self, fail_calls: set[int] | frozenset[int] = frozenset(),
                 fail_width: int | None = None) -> None:
        super().__init__("test-instant")
        self.fail_calls, self.fail_width = set(fail_calls), fail_width
        self.calls = 0

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        call, self.calls = self.calls, self.calls + 1
        if call in self.fail_calls or image.shape[1] == self.fail_width:
            raise ValueError(ERROR)
        return super()._run(image, text_state)


FAIL_CALLS = frozenset({1, 3})  # the plugin's: its second and fourth frames fail


def build(spec: Any, **_options: Any) -> FailingDetector:
    """A one-off plugin model (``--model helpers.failing_detector:build``, the zoo's factory
    signature): ``test-instant`` whose model call raises on its 2nd and 4th frame."""
    det = FailingDetector(FAIL_CALLS)
    det.weights_source = "none (scripted, raises on chosen frames)"
    return det
