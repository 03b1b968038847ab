"""``probench ground`` refuses a compressed frame over the pixel budget from its header, as
the node does: a decompression bomb mid-bag is one line (exit 1), costing neither memory nor
time (it is never decoded: the decodes are counted); ``--max-pixels`` moves the budget."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

from helpers.camera_bags import CAMERA, PERIOD, T0, frame_rgb
from helpers.image_bomb import png_bomb

TOPIC = f"{CAMERA}/compressed"


def _bag(path: Path, bomb_at: int | None, n: int = 3) -> Path:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    Compressed = ts.types["sensor_msgs/msg/CompressedImage"]
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection(TOPIC, "sensor_msgs/msg/CompressedImage", typestore=ts)
        for i in range(n):
            t = T0 + i * PERIOD
            if i == bomb_at:
                data = np.frombuffer(png_bomb(), np.uint8)
            else:
                data = cv2.imencode(".png", frame_rgb(i))[1].reshape(-1)
            msg = Compressed(header=Header(stamp=Time(sec=t // 10**9, nanosec=t % 10**9), frame_id="cam"),
                             format="png", data=data)
            w.write(conn, t, ts.serialize_cdr(msg, "sensor_msgs/msg/CompressedImage"))
    return path


def _run(tmp_path: Path, bag: Path, out: str, env: dict[str, str],
         *extra: str) -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in kB) of ``probench ground`` in a fresh process."""
    err_path = tmp_path / f"{out}.err"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "probench", "ground", "--no-progress",
                                 "--bag", str(bag), "--model", "test-instant", "--prompt", "a cup",
                                 "--out", str(tmp_path / out), *extra],
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err_path.read_text(), usage.ru_maxrss


def test_bomb_mid_bag_is_one_line_under_200_mb(tmp_path: Path, ros_env: dict[str, str],
                                               repo_root: Path) -> None:
    env = dict(ros_env, PYTHONPATH=str(repo_root / "src"))
    good = _run(tmp_path, _bag(tmp_path / "good", None), "o_good", env)
    assert good[0] == 0, good[1]
    rc, err, rss_kb = _run(tmp_path, _bag(tmp_path / "bomb", 1), "o_bomb", env)
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"{TOPIC} frame 1" in lines[0] and "30000x30000 = 900.0 MP, over the budget of 50 MP" in lines[0]
    # against the same command on a bag without the bomb (it grounds all 3 frames)
    assert rss_kb - good[2] < 200 * 1024, (rss_kb, good[2])
    assert not (tmp_path / "o_bomb").exists()


def test_the_bomb_is_never_decoded(tmp_path: Path, ground, monkeypatch) -> None:
    """What would cost the time (tens of seconds: helpers/image_bomb.py) is decoding the bomb:
    every decode is counted, and none is of the bomb's bytes; the good frame before it is."""
    decoded: list[int] = []  # the encoded size of every image decoded
    imdecode = cv2.imdecode

    def counted(buf: np.ndarray, flags: int) -> np.ndarray:
        decoded.append(int(np.asarray(buf).size))
        return imdecode(buf, flags)

    monkeypatch.setattr(cv2, "imdecode", counted)
    rc, _, err = ground("--bag", _bag(tmp_path / "bomb", 1), "--model", "test-instant", "--prompt", "a cup",
                        "--out", tmp_path / "o")
    assert rc == 1 and "30000x30000 = 900.0 MP, over the budget of 50 MP" in err, err
    good_size = cv2.imencode(".png", frame_rgb(0))[1].size
    assert decoded and set(decoded) == {good_size} and len(png_bomb()) not in decoded


def test_max_pixels_moves_the_budget(tmp_path: Path, ground) -> None:
    bag = _bag(tmp_path / "bag", None)
    args = ["--bag", bag, "--model", "test-instant", "--prompt", "a cup"]
    rc, _, err = ground(*args, "--out", tmp_path / "o1", "--max-pixels", 64 * 48 - 1)
    assert rc == 1 and "64x48 = 0.0 MP, over the budget of 0.003071 MP" in err and err.count("\n") == 1
    rc, _, err = ground(*args, "--out", tmp_path / "o2", "--max-pixels", 64 * 48)
    assert rc == 0, err
    rc, _, err = ground(*args, "--out", tmp_path / "o3", "--max-pixels", 0)
    assert rc == 2 and "--max-pixels" in err
