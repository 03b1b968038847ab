"""`probench ground` on robot bags written by rosbags itself: the issue's done-when case."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from helpers.camera_bags import CAMERA, PERIOD, STAMP_OFFSET, T0, read_output, write_camera_bag

PROMPTS = ["a red backpack", "a door handle"]


def _stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


def test_done_when_tiny_owlv2_bgr8_bag(tmp_path: Path, ground) -> None:
    import cv2

    bag = write_camera_bag(tmp_path / "robot", n=5)
    out, video = tmp_path / "grounded", tmp_path / "grounded.mp4"
    rc, stdout, err = ground("--bag", bag, "--model", "tiny-owlv2", "--prompt", "; ".join(PROMPTS),
                             "--score-threshold", "0", "--out", out, "--video", video)
    assert rc == 0, err
    res = read_output(out)
    assert res.msgtypes["/ground/detections"] == "vision_msgs/msg/Detection2DArray"
    dets = res.topics["/ground/detections"]
    assert len(dets) == 5  # one per input frame
    for i, (t, msg) in enumerate(dets):
        assert t == T0 + i * PERIOD  # at the input frame's log time
        assert _stamp_ns(msg) == t - STAMP_OFFSET  # and with the input frame's header
        assert msg.header.frame_id == "camera_color_optical"
        for d in msg.detections:
            assert d.header.frame_id == "camera_color_optical"
            assert 0.0 <= d.results[0].hypothesis.score <= 1.0
    class_ids = {c for frame in res.class_ids() for c in frame}
    assert class_ids and class_ids <= set(PROMPTS)  # class ids are the prompt texts
    labels = res.topics["/ground/label_info"]
    assert [vc.class_name for vc in labels[0][1].class_map] == PROMPTS
    annotated = res.topics["/ground/debug_image/compressed"]
    assert len(annotated) == 5
    first = cv2.imdecode(np.asarray(annotated[0][1].data), cv2.IMREAD_COLOR)
    assert first.shape == (48, 64, 3)
    assert _stamp_ns(annotated[0][1]) == T0 - STAMP_OFFSET
    cap = cv2.VideoCapture(str(video))
    frames = 0
    while cap.read()[0]:
        frames += 1
    assert frames == 5 and abs(cap.get(cv2.CAP_PROP_FPS) - 30.0) < 0.1
    summary = json.loads(res.custom_data["probench.ground.summary"])
    assert summary["frames"] == 5 and summary["grounded"] == 5 and summary["dropped"] == 0
    assert summary["processing_ms"]["p50"] > 0
    assert "5 frames from /camera/color/image_raw" in stdout and "latency ms" in stdout


def _scores(out: Path) -> list[list[tuple[str, float]]]:
    return [[(d.results[0].hypothesis.class_id, d.results[0].hypothesis.score) for d in msg.detections]
            for _, msg in read_output(out).topics["/ground/detections"]]


def test_runtime_compiled_with_a_warmup_grounds_as_torch(tmp_path: Path, ground) -> None:
    """``--runtime compiled --warmup-size``: the same detections as eager (fp32, within
    1e-4 in score); a malformed size is refused in one line before anything runs."""
    bag = write_camera_bag(tmp_path / "robot", n=3)
    flags = ["--bag", bag, "--model", "tiny-owlvit", "--prompt", "; ".join(PROMPTS), "--score-threshold", "0"]
    rc, _, err = ground(*flags, "--out", tmp_path / "eager")
    assert rc == 0, err
    rc, _, err = ground(*flags, "--out", tmp_path / "compiled", "--runtime", "compiled",
                        "--warmup-size", "64x48")
    assert rc == 0, err
    want, got = _scores(tmp_path / "eager"), _scores(tmp_path / "compiled")
    assert len(got) == 3 and [[c for c, _ in f] for f in got] == [[c for c, _ in f] for f in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose([s for _, s in g], [s for _, s in w], atol=1e-4, rtol=0)
    rc, _, err = ground(*flags, "--out", tmp_path / "bad", "--warmup-size", "64")
    assert rc != 0 and "--warmup-size must be WIDTHxHEIGHT" in err and not (tmp_path / "bad").exists()


def test_compressed_twin_raw_is_picked_and_compressed_on_request(tmp_path: Path, ground) -> None:
    bag = write_camera_bag(tmp_path / "twin", n=4, raw=True, compressed=True)
    rc, stdout, err = ground("--bag", bag, "--model", "test-instant", "--prompt", "a cup",
                             "--out", tmp_path / "a", "--score-threshold", "0")
    assert rc == 0, err
    assert f"from {CAMERA}," in stdout  # the raw one of the twins
    rc, stdout, err = ground("--bag", bag, "--model", "test-instant", "--prompt", "a cup",
                             "--image-topic", f"{CAMERA}/compressed", "--out", tmp_path / "b",
                             "--score-threshold", "0", "--keep-images")
    assert rc == 0, err
    res = read_output(tmp_path / "b")
    dets = res.topics["/ground/detections"]
    assert [_stamp_ns(m) for _, m in dets] == [T0 + i * PERIOD - STAMP_OFFSET for i in range(4)]
    assert res.class_ids() == [["a cup"]] * 4
    kept = res.topics[f"{CAMERA}/compressed"]  # --keep-images: the input topic as recorded
    assert len(kept) == 4 and res.msgtypes[f"{CAMERA}/compressed"] == "sensor_msgs/msg/CompressedImage"


def test_sqlite3_input_and_jsonl(tmp_path: Path, ground) -> None:
    bag = write_camera_bag(tmp_path / "db", n=3, storage="sqlite3")
    assert list(bag.glob("*.db3"))
    jsonl = tmp_path / "dets.jsonl"
    rc, _, err = ground("--bag", bag, "--model", "test-instant", "--prompt", "a cup; a door",
                        "--out", tmp_path / "o", "--jsonl", jsonl, "--score-threshold", "0")
    assert rc == 0, err
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert [x["frame"] for x in lines] == [0, 1, 2]
    assert lines[1]["t_ns"] == T0 + PERIOD
    assert lines[1]["stamp"] == {"sec": (T0 + PERIOD - STAMP_OFFSET) // 10**9,
                                 "nanosec": (T0 + PERIOD - STAMP_OFFSET) % 10**9}
    assert sorted(d["class_id"] for d in lines[0]["detections"]) == ["a cup", "a door"]
    assert all(not x["dropped"] for x in lines)
    assert len(read_output(tmp_path / "o").topics["/ground/detections"]) == 3


def test_prefix_and_overwrite(tmp_path: Path, ground) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=2)
    out = tmp_path / "o"
    rc, _, err = ground("--bag", bag, "--model", "test-instant", "--prompt", "a cup", "--out", out)
    assert rc == 0, err
    rc, _, err = ground("--bag", bag, "--model", "test-instant", "--prompt", "a cup", "--out", out,
                        "--prefix", "", "--overwrite")
    assert rc == 0, err
    res = read_output(out)
    assert set(res.topics) >= {"/detections", "/debug_image/compressed"}  # the node's own names
    assert "/ground/detections" not in res.topics
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind
