"""3D is physically plausible (probench.spatial.depth): a depth beyond max_depth (3e38 m)
is no measurement, so no 3D estimate and no 3e38 m target; a K with an implausible focal
length (1e-300, 1e12 px) is refused as K = 0 is; the node's max_depth parameter has a
range and reaches the spatial stage."""

from __future__ import annotations

import numpy as np
import pytest

from probench.detections import Detections
from probench.realtime.node_spec import GROUNDING_PARAMS, GroundingConfig
from probench.realtime.spatial_stage import SpatialSettings
from probench.spatial.depth import DEFAULT_MAX_DEPTH_M, Intrinsics, depth_image, estimate_3d
from probench.spatial.errors import IntrinsicsError
from probench.spatial.synthetic import DEFAULT_K

BOX = Detections(np.array([[100.0, 100.0, 200.0, 200.0]]), np.array([0.9]), np.array([0]))


def _flat(metres: float) -> object:
    return depth_image(np.full((480, 640), metres, np.float32), "32FC1")


@pytest.mark.parametrize("metres", [3e38, 25.0, DEFAULT_MAX_DEPTH_M * 1.001])
def test_a_depth_beyond_the_range_gives_no_estimate(metres: float) -> None:
    est = estimate_3d(BOX, _flat(metres), DEFAULT_K)
    assert len(est) == 0 and est.without_depth == 1  # counted, never a 3e38 m pose


def test_the_range_is_a_setting() -> None:
    assert estimate_3d(BOX, _flat(DEFAULT_MAX_DEPTH_M), DEFAULT_K).centre[0, 2] == pytest.approx(20.0)
    est = estimate_3d(BOX, _flat(25.0), DEFAULT_K, max_depth=30.0)
    assert est.centre[0, 2] == pytest.approx(25.0)
    mm = depth_image(np.full((480, 640), 65535, np.uint16), "16UC1")  # 65.5 m: beyond 20 m
    assert len(estimate_3d(BOX, mm, DEFAULT_K)) == 0


@pytest.mark.parametrize(("fx", "fy"), [(1e-300, 500.0), (500.0, 1e12), (1.0, 1.0), (1e7, 1e7)])
def test_an_implausible_focal_length_is_refused_as_k_zero_is(fx: float, fy: float) -> None:
    k = [fx, 0.0, 320.0, 0.0, fy, 240.0, 0.0, 0.0, 1.0]
    with pytest.raises(IntrinsicsError, match="implausible focal length"):
        Intrinsics.from_k(k, 640, 480)
    with pytest.raises(IntrinsicsError, match="no usable focal length"):
        Intrinsics.from_k([0.0] * 9, 640, 480)
    assert Intrinsics.from_k([525.0, 0, 320, 0, 525.0, 240, 0, 0, 1], 640, 480).fx == 525.0


def test_max_depth_is_a_node_parameter_with_a_range() -> None:
    assert GROUNDING_PARAMS["max_depth"].default == DEFAULT_MAX_DEPTH_M
    assert GROUNDING_PARAMS.check("max_depth", 8.0) == 8.0
    for bad in (0.0, -1.0, 1e9, float("nan")):
        with pytest.raises(ValueError, match="max_depth"):
            GROUNDING_PARAMS.check("max_depth", bad)
    cfg = GROUNDING_PARAMS.to_config(GroundingConfig, GROUNDING_PARAMS.defaults())
    assert cfg.max_depth == DEFAULT_MAX_DEPTH_M
    assert SpatialSettings(depth=True, tracking=False).max_depth == DEFAULT_MAX_DEPTH_M


def test_the_spatial_stage_reports_both_in_its_diagnostics() -> None:
    """What the node's /diagnostics shows: an implausible K as the reason no 3D is made, the
    depth range in force."""
    from probench.realtime.spatial_stage import SpatialStage

    stage = SpatialStage(SpatialSettings(depth=True, tracking=False, max_depth=8.0, wait_s=0.0))
    line = stage.put_camera_info([1e-300, 0, 320, 0, 1e-300, 240, 0, 0, 1], 640, 480)
    assert line is not None and "implausible focal length" in line
    est, _, _ = stage.locate(BOX, 1, (480, 640))  # a frame: no usable K
    assert est is None and stage.counts["boxes_waiting_3d"] == 1
    diag = stage.diagnostics()
    assert diag["max_depth_m"] == 8.0 and "implausible focal length" in diag["waiting_3d"]
