"""``probench ground`` on recorded RGB-D bags: /ground/detections_3d, track ids, the summary's
tracking and 3D figures (bags from helpers/rgbd_bags.py, a synthetic scene with known 3D)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers.camera_bags import CAMERA, PERIOD, STAMP_OFFSET, T0, read_output, write_camera_bag
from helpers.rgbd_bags import DEPTH, INFO, K, write_rgbd_bag
from probench.detections import Detections
from probench.spatial.synthetic import moving_scene

PROMPTS = ["a green box", "a teal box", "a purple box"]


class ColourOracle:
    """A 'detector' that finds the synthetic objects by their colour: prompt i = object i."""

    def set_prompts(self, prompts) -> None:
        self.prompts = tuple(prompts)

    def detect(self, rgb: np.ndarray, prompts) -> Detections:
        boxes, pidx = [], []
        for i, obj in enumerate(moving_scene(0, 3, K).objects):
            ys, xs = np.nonzero(np.all(rgb == np.array(obj.colour, np.uint8), axis=2))
            if len(xs):
                boxes.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
                pidx.append(i)
        return Detections.from_arrays(
            np.array(boxes, dtype=np.float64).reshape(-1, 4),
            np.full(len(boxes), 0.9),
            pidx,
            timings_ms={"forward": 0.1},
        )


def _plan(bag: Path, out: Path, **kw):
    from probench.ground.run import GroundPlan

    return GroundPlan(bag=bag, out=out, model="colour-oracle", prompts=tuple(PROMPTS), progress=False, **kw)


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
def test_3d_centres_and_stable_ids_from_a_recorded_rgbd_bag(tmp_path: Path, encoding: str) -> None:
    from probench.ground.run import ground_bag

    n = 30
    bag = write_rgbd_bag(tmp_path / "rgbd", n=n, encoding=encoding)
    summary = ground_bag(_plan(bag, tmp_path / "out", track=True, jsonl=tmp_path / "o.jsonl"), ColourOracle)
    res = read_output(tmp_path / "out")
    assert res.msgtypes["/ground/detections_3d"] == "vision_msgs/msg/Detection3DArray"
    d3, d2 = res.topics["/ground/detections_3d"], res.topics["/ground/detections"]
    assert len(d3) == len(d2) == n
    errors = []
    for i, ((t3, m3), (_, m2)) in enumerate(zip(d3, d2, strict=True)):
        assert t3 == T0 + i * PERIOD and m3.header == m2.header  # the colour frame's time and header
        truth = moving_scene(i, 3, K).centres()
        assert len(m3.detections) == 3
        for d in m3.detections:
            c = d.bbox.center.position
            j = PROMPTS.index(d.results[0].hypothesis.class_id)
            errors.append(np.linalg.norm([c.x, c.y, c.z] - truth[j]) / np.linalg.norm(truth[j]))
        ids2 = {d.results[0].hypothesis.class_id: d.id for d in m2.detections}
        ids3 = {d.results[0].hypothesis.class_id: d.id for d in m3.detections}
        assert ids2 == ids3
        if i == 0:
            first_ids = ids2
        # ids from the first frame on (the tracker's first: confirmed at once), the same on every frame
        assert ids2 == first_ids and len(set(ids2.values())) == 3 and all(ids2.values())
    # objects partly hidden by each other's boxes: the box's visible pixels still give the object
    assert max(errors) <= 0.05 and np.median(errors) <= 0.02
    d = summary.as_dict()
    assert d["id_switches_per_100_frames"] == 0.0 and d["tracks"] == 3
    assert d["mean_track_length_frames"] == n  # every frame, the first included
    assert d["coverage_3d"] == 1.0 and d["depth_topic"] == DEPTH
    line = json.loads((tmp_path / "o.jsonl").read_text().splitlines()[5])
    assert all(det["track_id"] is not None and len(det["xyz_m"]) == 3 for det in line["detections"])
    assert "depth_3d" in line["timings_ms"] and "track" in line["timings_ms"]
    stored = json.loads(res.custom_data["probench.ground.summary"])
    assert stored["coverage_3d"] == 1.0


def _cup(ground, bag: Path, out: Path, *extra: object) -> tuple[int, str, str]:
    """``probench ground`` with test-instant and the prompt "a cup"."""
    return ground("--bag", bag, "--model", "test-instant", "--prompt", "a cup", "--out", out, *extra)


def test_cli_done_when_depth_topic_and_track(tmp_path: Path, ground) -> None:
    import cv2

    bag = write_rgbd_bag(tmp_path / "rgbd", n=8, skip_depth=(6,))
    out, video = tmp_path / "g", tmp_path / "g.mp4"
    rc, stdout, err = ground("--bag", bag, "--model", "test-instant", "--prompt", "a cup; a door",
                             "--depth-topic", DEPTH, "--camera-info-topic", INFO, "--track",
                             "--score-threshold", "0", "--min-depth-pixels", "5", "--out", out,
                             "--video", video)
    assert rc == 0, err
    res = read_output(out)
    d3 = res.topics["/ground/detections_3d"]
    assert [len(m.detections) for _, m in d3] == [2, 2, 2, 2, 2, 2, 0, 2]  # frame 6 has no depth
    ids = [[d.id for d in m.detections] for _, m in res.topics["/ground/detections"]]
    assert all(i == ids[0] for i in ids) and all(ids[0])  # from the first frame on (confirmed at once)
    assert "no 3D output: no depth image within 0.02 s" in err and err.count("no 3D output") == 1
    assert "id switches 0.00 per 100 frames" in stdout
    assert f"3D from {DEPTH}: 87.5% of detections" in stdout
    _docs_reading_hint_runs(out)
    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    assert ok and frame.shape == (K.height, K.width, 3)


def _docs_reading_hint_runs(out: Path) -> None:
    """GROUND.md's Python reading of an output bag (its hint failed with KeyError:
    'vision_msgs/msg/Detection3DArray'), run as written on ``out``."""
    import contextlib
    import io

    doc = (Path(__file__).resolve().parents[2] / "docs" / "GROUND.md").read_text(encoding="utf-8")
    lines = doc.splitlines()
    start = lines.index("    from rosbags.rosbag2 import Reader")
    block = []
    for line in lines[start:]:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec("\n".join(block).replace('"OUT"', repr(str(out))), {})  # the docs' own code
    text = printed.getvalue()
    assert " /ground/detections_3d vision_msgs__msg__Detection3DArray" in text, text[:500]


def test_auto_detected_topics_and_a_depth_topic_is_no_camera(tmp_path: Path, ground) -> None:
    bag = write_rgbd_bag(tmp_path / "rgbd", n=3)
    rc, stdout, err = _cup(ground, bag, tmp_path / "a")
    assert rc == 0, err
    res = read_output(tmp_path / "a")
    assert len(res.topics["/ground/detections_3d"]) == 3 and f"3 frames from {CAMERA}" in stdout
    rc, _, err = _cup(ground, bag, tmp_path / "b", "--depth-topic", "none")
    assert rc == 0 and "/ground/detections_3d" not in read_output(tmp_path / "b").topics
    # a colour camera beside a depth topic without CameraInfo: the camera is grounded, no 3D
    plain = write_camera_bag(tmp_path / "plain", n=2, extra_camera=True)
    rc, _, err = _cup(ground, plain, tmp_path / "c")
    assert rc == 0, err
    got = read_output(tmp_path / "c")
    assert "/ground/detections_3d" not in got.topics
    stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
              for _, m in got.topics["/ground/detections"]]
    assert stamps == [T0 - STAMP_OFFSET, T0 + PERIOD - STAMP_OFFSET]


def test_bad_depth_inputs(tmp_path: Path, ground) -> None:
    bag = write_rgbd_bag(tmp_path / "k0", n=3, k_zero=True)
    rc, _, err = _cup(ground, bag, tmp_path / "a")
    assert rc == 0, err
    assert err.count("CameraInfo unusable: K has no usable focal length") == 1
    res = read_output(tmp_path / "a")
    assert [len(m.detections) for _, m in res.topics["/ground/detections_3d"]] == [0, 0, 0]
    assert [len(m.detections) for _, m in res.topics["/ground/detections"]] == [1, 1, 1]  # 2D goes on
    small = write_rgbd_bag(tmp_path / "small", n=2, depth_size=(48, 64))
    rc, _, err = _cup(ground, small, tmp_path / "b")
    assert rc == 0 and "sizes differ: colour 128x96, depth 64x48, CameraInfo 128x96" in err
    rc, _, err = _cup(ground, bag, tmp_path / "c", "--depth-topic", "/nope")
    assert rc == 2 and "--depth-topic /nope: no such topic" in err and DEPTH in err
    rc, _, err = _cup(ground, bag, tmp_path / "c", "--depth-topic", DEPTH, "--camera-info-topic", CAMERA)
    assert rc == 2 and "not a sensor_msgs/msg/CameraInfo topic" in err
    rc, _, err = _cup(ground, bag, tmp_path / "c", "--depth-tolerance", "5")
    assert rc == 2 and "--depth-tolerance" in err


def test_max_depth_as_the_nodes(tmp_path: Path, ground) -> None:
    """``--max-depth``: the scene's depths (a few metres) beyond it are invalid, so no box gets
    a 3D estimate; the node's range check applies (docs/SECURITY.md)."""
    bag = write_rgbd_bag(tmp_path / "rgbd", n=3)
    common = ("--bag", bag, "--model", "test-instant", "--prompt", "a cup", "--score-threshold", "0",
              "--min-depth-pixels", "5")
    rc, stdout, err = ground(*common, "--out", tmp_path / "far")
    assert rc == 0 and f"3D from {DEPTH}: 100.0% of detections" in stdout, (stdout, err)
    rc, stdout, err = ground(*common, "--max-depth", "0.5", "--out", tmp_path / "near")
    assert rc == 0 and f"3D from {DEPTH}: 0.0% of detections" in stdout, (stdout, err)
    rc, _, err = ground(*common, "--max-depth", "-1", "--out", tmp_path / "bad")
    assert rc == 2 and "--max-depth" in err
