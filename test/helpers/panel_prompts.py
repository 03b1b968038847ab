"""Prompts whose ``test-instant`` boxes lie inside the panels of the synthetic RGB-D camera's
known scene (probench.spatial.rgbd_scene): the scripted detector's box depends only on the
prompt text, so these prompts put a box on a panel of known depth."""

from __future__ import annotations

import numpy as np


def prompts_on_panels(width: int = 640, height: int = 480, margin: float = 3.0,
                      ) -> dict[str, tuple[np.ndarray, float]]:
    """prompt -> (its test-instant box, the depth of the panel holding it), one per panel found
    (at least two)."""
    from probench.models.testing import ScriptedDetector
    from probench.spatial.rgbd_scene import PANELS, camera_scene

    panels = camera_scene(width, height).boxes()
    det = ScriptedDetector()
    found: dict[int, tuple[str, np.ndarray]] = {}
    for i in range(3000):
        text = f"object {i}"
        det.set_prompts([text])
        b = det.detect(np.zeros((height, width, 3), np.uint8), [text]).xyxy[0]
        for j, p in enumerate(panels):
            inside = (b[0] >= p[0] + margin and b[1] >= p[1] + margin and b[2] <= p[2] - margin
                      and b[3] <= p[3] - margin)
            if j not in found and inside:
                found[j] = (text, b)
    assert len(found) >= 2, found
    return {text: (box, PANELS[j][3]) for j, (text, box) in sorted(found.items())}
