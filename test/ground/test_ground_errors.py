"""Bad input: one line on stderr naming the problem (and the way out), exit 2 for usage
and 1 for bad data, no traceback, and nothing left behind."""

from __future__ import annotations

import json
import os
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


def test_out_that_cannot_be_created_is_refused_before_the_model_loads(
    tmp_path: Path, ground, no_model_load
) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=2)
    (tmp_path / "FILE").write_text("a file")
    # was "internal error: FileExistsError" after the model load
    _fails(ground(*_args(bag, tmp_path / "FILE" / "sub")), 2, "--out", "FILE is a file, not a folder")
    _fails(ground(*_args(bag, tmp_path / "FILE" / "a" / "b")), 2, "FILE is a file, not a folder")
    # nothing can be created under /proc, even as root (was "internal error: FileNotFoundError")
    _fails(ground(*_args(bag, Path("/proc/probench-out"))), 2, "--out /proc/probench-out",
           "nothing can be created in /proc")
    _fails(ground(*_args(bag, tmp_path / "o", "--jsonl", tmp_path / "FILE" / "o.jsonl")), 2, "--jsonl",
           "is a file, not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE", "bag"]


@pytest.mark.parametrize("seconds", ["1e308", "1e10", "9.3e9", "2147483648"])
def test_schedule_time_past_the_last_stamp_is_refused_naming_the_line(
    tmp_path: Path, ground, no_model_load, seconds: str
) -> None:
    bag = write_camera_bag(tmp_path / "bag", n=2)
    schedule = tmp_path / "s.txt"
    schedule.write_text(f"# times\n0 a cup\n{seconds} a door\n")
    # was "internal error: OverflowError" / "'i' format requires ..." (int32 stamp seconds)
    _fails(ground(*_args(bag, tmp_path / "o", "--prompt-schedule", schedule)), 2, "s.txt:3",
           f"time {seconds}", "past the last ROS time stamp")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_a_killed_run_are_removed_at_start_in_one_line(tmp_path: Path, ground) -> None:
    from probench.cache.atomic import replacing

    bag = write_camera_bag(tmp_path / "bag", n=2)
    out, video, jsonl = tmp_path / "o", tmp_path / "o.mp4", tmp_path / "o.jsonl"
    dead = _dead_pid()
    with replacing(jsonl) as tmp:  # the names a writer really uses, with its PID swapped for a dead one
        name = tmp.name
    jsonl.unlink()
    stale_jsonl = tmp_path / name.replace(f".{os.getpid()}.", f".{dead}.")
    stale_jsonl.write_text("{}\n")
    stale_video = tmp_path / f".o.{dead}.abc123.partial.mp4"
    stale_video.write_bytes(b"\0" * 10)
    stale_bag = tmp_path / f".o.partial-{dead}"
    (stale_bag / "o").mkdir(parents=True)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = tmp_path / f".o.partial-{alive.pid}"  # another ground still writing: kept
        running.mkdir()
        rc, _, err = ground(*_args(bag, out, "--video", video, "--jsonl", jsonl))
        assert rc == 0, err
        lines = [line for line in err.splitlines() if "leftover" in line]
        assert len(lines) == 1 and "removed 3 leftover(s) of a killed run" in lines[0], err
        for path in (stale_jsonl, stale_video, stale_bag):
            assert str(path) in lines[0] and not path.exists()
        assert running.is_dir()
        assert out.is_dir() and video.is_file() and jsonl.is_file()
    finally:
        alive.kill()
        alive.wait()


def test_a_sigkilled_ground_leaves_leftovers_the_next_run_removes(tmp_path: Path, ground, repo_root: Path,
                                                                  ros_env: dict[str, str]) -> None:
    import signal
    import time

    bag = write_camera_bag(tmp_path / "bag", n=40)
    out, video, jsonl = tmp_path / "o", tmp_path / "o.mp4", tmp_path / "o.jsonl"
    args = ["--bag", bag, "--model", "test-slow-100ms", "--prompt", "a cup", "--out", out, "--video", video,
            "--jsonl", jsonl, "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "probench", "ground", *map(str, args)],
                            env=dict(ros_env, PYTHONPATH=str(repo_root / "src")), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob(".o*partial*"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    left = sorted(p.name for p in tmp_path.glob(".o*partial*"))
    assert len(left) == 3 and all(str(proc.pid) in name for name in left), left  # was: never cleaned
    rc, _, err = ground(*(a if a != "test-slow-100ms" else "test-instant" for a in args))
    assert rc == 0, err
    (line,) = [ln for ln in err.splitlines() if "leftover" in ln]
    assert line.startswith("probench ground: removed 3 leftover(s) of a killed run: ")
    assert not list(tmp_path.glob(".o*partial*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag", "o", "o.jsonl", "o.mp4"]


def test_a_model_that_raises_fails_its_frames_and_the_run_says_so(tmp_path: Path, ground) -> None:
    """As the node: a failed frame gets its report (P/frame_errors, the frame's header), no
    detections, and the run goes on; the outputs are written, and the run exits 1 naming the
    first error (never silently complete)."""
    from rosbags.highlevel import AnyReader

    from helpers.failing_detector import ERROR
    from probench.msgs.wire import frame_failure_from_cdr

    bag = write_camera_bag(tmp_path / "bag", n=5)
    out, jsonl = tmp_path / "o", tmp_path / "o.jsonl"
    rc, stdout, err = ground("--bag", bag, "--model", "helpers.failing_detector:build", "--prompt", "a cup",
                             "--out", out, "--jsonl", jsonl)
    assert rc == 1 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("probench ground: error: 2 frame(s) failed: the model raised; the first: "
                           f"{CAMERA} frame 1") and last.endswith(f"ValueError: {ERROR}")
    assert "FAILED 2 frame(s)" in stdout and "frame_errors" in stdout
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [line.get("failed") for line in lines] == [None, f"ValueError: {ERROR}", None,
                                                      f"ValueError: {ERROR}", None]
    with AnyReader([out]) as reader:
        by_topic: dict[str, list[bytes]] = {}
        for conn, _, raw in reader.messages():
            by_topic.setdefault(conn.topic, []).append(bytes(raw))
    assert len(by_topic["/ground/detections"]) == 3  # none for a failed frame (an empty one: an answer)
    reports = [frame_failure_from_cdr(raw) for raw in by_topic["/ground/frame_errors"]]
    stamps = [line["stamp"] for line in lines if line.get("failed")]
    assert [(h.stamp.sec, h.stamp.nanosec) for h, _ in reports] == [(s["sec"], s["nanosec"]) for s in stamps]
    assert {e for _, e in reports} == {f"ValueError: {ERROR}"}
