"""Bad input: one line on stderr naming the problem (and the way out), exit 2 for usage
and 1 for bad data, no traceback, and nothing left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.camera_bags import CAMERA, write_camera_bag


def _fails(result: tuple[int, str, str], code: int, *words: str) -> str:
    rc, _, err = result
    assert rc == code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("probench ground: error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture
def no_model_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Input errors must be found before the (slow) model load."""
    import probench.models.zoo as zoo

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(zoo, "load_detector", refuse)


def _args(bag: Path, out: Path, *extra: object) -> list[object]:
    return ["--bag", bag, "--model", "test-instant", "--prompt", "a cup", "--out", out, *extra]


def test_truncated_and_not_a_bag(tmp_path: Path, ground, no_model_load) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=4)
    mcap = next(bag.glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])  # a copy that died half way
    _fails(ground(*_args(bag, tmp_path / "o")), 1, str(bag), "rosbag2")
    (tmp_path / "junk.mcap").write_bytes(b"not an mcap at all")
    _fails(ground(*_args(tmp_path / "junk.mcap", tmp_path / "o")), 1, "not a readable rosbag2")
    _fails(ground(*_args(tmp_path / "missing", tmp_path / "o")), 1, "no such bag")
    assert not (tmp_path / "o").exists()


def test_no_image_topic(tmp_path: Path, ground, no_model_load) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=2, raw=False, prompts=[(0, "a cup")])
    _fails(ground(*_args(bag, tmp_path / "o")), 1, "no image topic", "/grounding_node/prompt")


def test_unknown_encoding(tmp_path: Path, ground, no_model_load) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=2, encoding="32FC1")
    _fails(ground(*_args(bag, tmp_path / "o")), 1, f"{CAMERA} frame 0", "unsupported image encoding '32FC1'",
           "bgr8")


def test_topic_that_does_not_exist_lists_the_image_topics(tmp_path: Path, ground, no_model_load) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=3, compressed=True)
    line = _fails(ground(*_args(bag, tmp_path / "o", "--image-topic", "/camera/rgb")), 2,
                  "--image-topic /camera/rgb: no such topic")
    assert f"{CAMERA} (sensor_msgs/msg/Image, 3 msgs)" in line
    assert f"{CAMERA}/compressed (sensor_msgs/msg/CompressedImage, 3 msgs)" in line
    _fails(ground(*_args(bag, tmp_path / "o", "--prompt-topic", "/nope")), 2, "--prompt-topic /nope")


def test_two_cameras_need_a_choice(tmp_path: Path, ground, no_model_load) -> None:
    from helpers.rgbd_bags import SECOND_CAMERA, write_rgbd_bag

    # two colour cameras (and a depth topic, which is no camera to ground): a choice is needed
    bag = write_rgbd_bag(tmp_path / "bag", n=2, second_camera=True)
    _fails(ground(*_args(bag, tmp_path / "o")), 2, "2 image topics", SECOND_CAMERA, "--image-topic")


def test_outputs_that_exist(tmp_path: Path, ground, no_model_load) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=2)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "notes.txt").write_text("mine")
    _fails(ground(*_args(bag, tmp_path / "o")), 2, "exists already", "--overwrite")
    _fails(ground(*_args(bag, tmp_path / "o", "--overwrite")), 2, "not a rosbag2 folder")
    assert (tmp_path / "o" / "notes.txt").read_text() == "mine"  # never deleted
    _fails(ground(*_args(bag, bag, "--overwrite")), 2, "would overwrite the input bag")
    (tmp_path / "v.mp4").write_bytes(b"old")
    video = tmp_path / "v.mp4"
    _fails(ground(*_args(bag, tmp_path / "o2", "--video", video)), 2, "--video", "exists already")
    _fails(ground(*_args(bag, tmp_path / "o2", "--video", tmp_path / "v.avi")), 2, "must end in .mp4")


def test_usage_errors(tmp_path: Path, ground, no_model_load) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=2)
    out = tmp_path / "o"
    _fails(ground("--bag", bag, "--model", "test-instant", "--out", out), 2, "no prompts", "--prompt")
    _fails(ground("--bag", bag, "--model", "test-instant", "--out", out, "--prompt", " ; "), 2,
           "--prompt: empty or whitespace-only")
    _fails(ground(*_args(bag, out, "--score-threshold", "2")), 2, "--score-threshold")
    _fails(ground(*_args(bag, out, "--prefix", "ground out")), 2, "--prefix")
    _fails(ground("--bag", bag, "--model", "no-such-model", "--prompt", "a", "--out", out), 2,
           "no-such-model")
    schedule = tmp_path / "s.txt"
    schedule.write_text("1 a cup\n0.5 a door\n")
    _fails(ground(*_args(bag, out, "--prompt-schedule", schedule)), 2, "s.txt:2")


def test_a_corrupt_frame_mid_bag_leaves_nothing_behind(tmp_path: Path, ground) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=5, bad_frame=3)
    out, video, jsonl = tmp_path / "o", tmp_path / "o.mp4", tmp_path / "o.jsonl"
    _fails(ground(*_args(bag, out, "--video", video, "--jsonl", jsonl)), 1, f"{CAMERA} frame 3",
           "image data truncated")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag"]  # no output, no staging files


def test_console_script_prints_one_line(tmp_path: Path, ros_env: dict[str, str], repo_root: Path) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=2, encoding="32FC1")
    env = dict(ros_env, PYTHONPATH=str(repo_root / "src"))
    proc = subprocess.run(
        [sys.executable, "-m", "probench", "ground", "--bag", str(bag), "--model", "test-instant",
         "--prompt", "a cup", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "unsupported image encoding '32FC1'" in proc.stderr


def test_corrupt_sqlite_data_mid_bag(tmp_path: Path, ground) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=30, storage="sqlite3")
    db = next(bag.glob("*.db3"))
    data = bytearray(db.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 8192] = b"\xab" * 8192  # a damaged disk block
    db.write_bytes(bytes(data))
    _fails(ground(*_args(bag, tmp_path / "o", "--jsonl", tmp_path / "o.jsonl")), 1, "corrupt bag data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag"]
