"""3D estimates from depth on a synthetic RGB-D scene with known 3D objects (probench.spatial)."""

from __future__ import annotations

import numpy as np
import pytest

from probench.detections import Detections
from probench.spatial.depth import (
    Detections3D,
    Intrinsics,
    depth_from_bytes,
    depth_image,
    estimate_3d,
    robust_depth,
)
from probench.spatial.errors import DepthEncodingError, IntrinsicsError, SpatialError
from probench.spatial.synthetic import DEFAULT_K, Box3D, Scene, degrade, encode

# fronto-parallel and turned objects at 1.5 to 4.5 m, none hiding another
SCENE = Scene((
    Box3D((0.0, 0.0, 1.5), 0.3, 0.3),
    Box3D((0.9, -0.4, 2.5), 0.5, 0.4, yaw_deg=30.0),
    Box3D((-1.1, 0.3, 3.0), 0.6, 0.5, yaw_deg=-40.0),
    Box3D((-0.2, -1.0, 4.5), 0.8, 0.6, yaw_deg=20.0),
    Box3D((1.6, 0.9, 4.0), 0.5, 0.5),
))


def _dets(scene: Scene) -> Detections:
    boxes = scene.boxes()
    return Detections(boxes, np.full(len(boxes), 0.9), np.zeros(len(boxes), np.int64))


def _relative_errors(scene: Scene, est: Detections3D) -> np.ndarray:
    truth = scene.centres()[est.index]
    return np.linalg.norm(est.centre - truth, axis=1) / np.linalg.norm(truth, axis=1)


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
def test_noise_free_centres_within_2_percent_of_range(encoding):
    _, depth_m = SCENE.render()
    est = estimate_3d(_dets(SCENE), depth_image(encode(depth_m, encoding), encoding), SCENE.k)
    assert list(est.index) == [0, 1, 2, 3, 4] and est.without_depth == 0
    assert _relative_errors(SCENE, est).max() <= 0.02
    # the fronto-parallel ones: their size too (width, height at the depth; no depth spread)
    for i in (0, 4):
        obj = SCENE.objects[i]
        assert est.size[i, :2] == pytest.approx([obj.width, obj.height], rel=0.02)
        assert est.size[i, 2] == pytest.approx(0.0, abs=0.002)


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noise_and_30_percent_holes_within_5_percent(encoding, seed):
    _, depth_m = SCENE.render()
    noisy = degrade(depth_m, noise_rel=0.01, invalid_share=0.3, seed=seed)
    assert np.isnan(noisy).mean() == pytest.approx(0.3, abs=0.01)
    est = estimate_3d(_dets(SCENE), depth_image(encode(noisy, encoding), encoding), SCENE.k)
    assert len(est) == 5
    assert _relative_errors(SCENE, est).max() <= 0.05


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
def test_an_object_behind_another_keeps_its_own_depth(encoding):
    back = Box3D((0.0, 0.0, 3.0), 1.0, 0.8)
    # the nearer object hides about 40% of the back one's box
    front = Box3D((-0.1, 0.0, 1.5), 0.2, 0.6, colour=(40, 200, 40))
    scene = Scene((back, front))
    _, depth_m = scene.render()
    boxes = scene.boxes()
    hidden = np.zeros(depth_m.shape, bool)
    x1, y1, x2, y2 = boxes[0].astype(int)
    hidden[y1:y2, x1:x2] = depth_m[y1:y2, x1:x2] < 2.0
    share = hidden.sum() / ((x2 - x1) * (y2 - y1))
    assert 0.3 < share < 0.5  # the case the test is about: a large part hidden, most still visible
    # the nearest depth mode (or a low percentile) of the box would be the nearer object's 1.5 m
    clean = estimate_3d(_dets(scene), depth_image(encode(depth_m, encoding), encoding), scene.k)
    assert list(clean.index) == [0, 1]
    assert _relative_errors(scene, clean).max() <= 0.02
    noisy = degrade(depth_m, noise_rel=0.01, invalid_share=0.3, seed=3)
    est = estimate_3d(_dets(scene), depth_image(encode(noisy, encoding), encoding), scene.k)
    assert list(est.index) == [0, 1]
    assert est.centre[0, 2] > 2.8  # not the nearer one's 1.5 m
    assert _relative_errors(scene, est).max() <= 0.05


def test_robust_depth_takes_the_largest_cluster_and_its_median():
    vals = np.concatenate([np.full(40, 1.5), np.linspace(2.9, 3.1, 60)]).astype(np.float32)
    depth, spread, n = robust_depth(vals)
    assert depth == pytest.approx(3.0, abs=0.01) and n == 60
    assert spread == pytest.approx(0.18, abs=0.02)
    assert robust_depth(np.zeros(0, np.float32)) is None


def test_too_few_valid_pixels_gives_no_estimate_and_is_counted():
    _, depth_m = SCENE.render()
    depth_m = depth_m.copy()
    x1, y1, x2, y2 = SCENE.boxes()[0].astype(int)
    depth_m[y1 - 1: y2 + 2, x1 - 1: x2 + 2] = np.nan  # object 0 has no valid depth at all
    est = estimate_3d(_dets(SCENE), depth_image(encode(depth_m, "32FC1"), "32FC1"), SCENE.k, min_pixels=50)
    assert 0 not in est.index and len(est) == 4 and est.without_depth == 1
    # min_pixels counts valid pixels: a box of 100 valid pixels passes 100, fails 101
    small = Detections(np.array([[10.0, 10.0, 20.0, 20.0]]), np.array([0.9]), np.array([0]))
    flat = depth_image(np.full((480, 640), 2000, np.uint16), "16UC1")
    assert len(estimate_3d(small, flat, DEFAULT_K, min_pixels=100)) == 1
    assert estimate_3d(small, flat, DEFAULT_K, min_pixels=101).without_depth == 1


def test_track_ids_follow_their_detections():
    _, depth_m = SCENE.render()
    ids = np.array([7, 8, 9, 10, 11])
    tracked = _dets(SCENE).with_tracker_id(ids)
    est = estimate_3d(tracked, depth_image(encode(depth_m, "32FC1"), "32FC1"), SCENE.k)
    assert list(est.track_id) == list(ids[est.index])
    assert est.distance == pytest.approx(np.linalg.norm(est.centre, axis=1))


def test_masks_limit_the_pixels_read():
    _, depth_m = SCENE.render()
    dets = _dets(SCENE).filter(np.array([2]))
    mask = np.zeros((1, 480, 640), bool)
    x1, y1, x2, y2 = dets.xyxy[0].astype(int)
    mask[0, y1:y2, x1:x2] = np.abs(depth_m[y1:y2, x1:x2] - 3.0) < 0.5  # the object's own pixels
    with_mask = Detections(dets.xyxy, dets.scores, dets.prompt_index, masks=mask)
    est = estimate_3d(with_mask, depth_image(encode(depth_m, "32FC1"), "32FC1"), SCENE.k)
    assert est.centre[0, 2] == pytest.approx(3.0, rel=0.02)


def test_bad_input_is_one_clear_error():
    with pytest.raises(DepthEncodingError, match="16UC1"):
        depth_image(np.zeros((4, 4), np.uint8), "mono8")
    with pytest.raises(DepthEncodingError, match="float32"):
        depth_image(np.zeros((4, 4), np.uint16), "32FC1")
    with pytest.raises(IntrinsicsError, match="not calibrated"):
        Intrinsics.from_k([0.0] * 9, 640, 480)
    with pytest.raises(IntrinsicsError, match="9 values"):
        Intrinsics.from_k([1.0] * 4, 640, 480)
    with pytest.raises(IntrinsicsError, match="size"):
        Intrinsics.from_k([525, 0, 320, 0, 525, 240, 0, 0, 1], 0, 480)
    flat = depth_image(np.ones((240, 320), np.float32), "32FC1")
    with pytest.raises(SpatialError, match="320x240 but CameraInfo says 640x480"):
        estimate_3d(_dets(SCENE), flat, DEFAULT_K)


def test_depth_from_message_bytes():
    mm = np.arange(12, dtype=np.uint16).reshape(3, 4) + 1000
    padded = np.zeros((3, 10), np.uint8)
    padded[:, :8] = mm.view(np.uint8).reshape(3, 8)
    img = depth_from_bytes(padded.tobytes(), 3, 4, 10, "16UC1")
    assert np.array_equal(img.data, mm) and img.scale == 0.001
    big = depth_from_bytes(mm.astype(">u2").tobytes(), 3, 4, 8, "16UC1", big_endian=True)
    assert np.array_equal(big.data, mm)
    odd = depth_image(np.array([[0.0, np.nan], [1.0, -2.0]], np.float32), "32FC1")
    assert np.isnan(odd.metres()).sum() == 3
    with pytest.raises(SpatialError, match="expected step x height"):
        depth_from_bytes(b"\x00" * 10, 3, 4, 8, "16UC1")
    with pytest.raises(DepthEncodingError):
        depth_from_bytes(b"\x00" * 96, 3, 4, 8, "rgb8")
