"""Compressed frames over the pixel budget are refused from their header, before decoding:
the decompression bomb costs neither memory nor time (issue: one 0.9 MB PNG message used
to cost 5 GB and 30 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from helpers.image_bomb import png_bomb
from probench.msgs import images
from probench.msgs.errors import CompressedImageError, ImageSizeError


def _encoded(ext: str, h: int = 37, w: int = 53, params: list[int] | None = None) -> np.ndarray:
    ok, buf = cv2.imencode(ext, np.zeros((h, w, 3), np.uint8), params or [])
    assert ok
    return buf.reshape(-1)


@pytest.mark.parametrize(("ext", "params"), [(".png", None), (".jpg", None),
                                             (".jpg", [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])])
def test_size_read_from_the_header(ext: str, params: list[int] | None) -> None:
    assert images.compressed_size(_encoded(ext, params=params)) == (53, 37)


def test_the_bomb_header_and_garbage() -> None:
    bomb = png_bomb()
    assert len(bomb) < 1_000_000
    assert images.compressed_size(np.frombuffer(bomb, np.uint8)) == (30000, 30000)
    for junk in (b"", b"\xff\xd8\xff not a jpeg", b"\xff\xd8\xff\xd9", b"GIF89a" + bytes(20)):
        assert images.compressed_size(np.frombuffer(junk, np.uint8)) is None


def test_budget_refuses_with_one_line_and_allows_below() -> None:
    jpg = _encoded(".jpg", 40, 50)
    rgb = images.compressed_to_rgb(SimpleNamespace(format="jpeg", data=jpg), max_pixels=2000)
    assert rgb.shape == (40, 50, 3)
    with pytest.raises(ImageSizeError, match=r"50x40 = 0.0 MP, over the budget of 0.001999 MP") as err:
        images.compressed_to_rgb(SimpleNamespace(format="jpeg", data=jpg), max_pixels=1999)
    assert "\n" not in str(err.value)
    with pytest.raises(CompressedImageError, match="no readable PNG or JPEG header"):
        images.compressed_to_rgb(SimpleNamespace(format="png", data=b"BM" + bytes(60)))


_MEASURE = textwrap.dedent("""
    import json, resource, sys, time, tracemalloc
    from probench.errors import ProbenchError
    from probench.msgs.wire import rgb_from_cdr
    from probench.ground.frames import Frame, decode
    from probench.bags.layout import COMPRESSED_MSGTYPE
    import cv2, numpy  # warm: the refusal's cost is measured, not the imports
    data = open(sys.argv[2], "rb").read()
    path = sys.argv[1]
    call = {"node": lambda: rgb_from_cdr(data, compressed=True),
            "ground": lambda: decode(Frame(0, 0, COMPRESSED_MSGTYPE, data, "/camera/compressed"))}[path]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        call()
        error = ""
    except ProbenchError as exc:
        error = str(exc)
    seconds = time.perf_counter() - t0
    traced_peak = tracemalloc.get_traced_memory()[1]
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"error": error, "seconds": seconds, "extra_rss_kb": after - before,
                      "traced_peak": traced_peak}))
""")


def _compressed_cdr(data: bytes) -> bytes:
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    msg = ts.types["sensor_msgs/msg/CompressedImage"](
        header=Header(stamp=Time(sec=1, nanosec=2), frame_id="cam"), format="png",
        data=np.frombuffer(data, np.uint8))
    return bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/CompressedImage"))


@pytest.mark.parametrize("path", ["node", "ground"])
def test_bomb_refused_under_200_mb_and_a_second(tmp_path: Path, path: str) -> None:
    """The node's decoder (rgb_from_cdr, what its worker calls) and ground's (frames.decode),
    measured in a fresh process: the peak RSS grows < 200 MB and the refusal takes < 1 s."""
    wire = tmp_path / "bomb.cdr"
    wire.write_bytes(_compressed_cdr(png_bomb()))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(images.__file__).parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _MEASURE, path, str(wire)], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "30000x30000 = 900.0 MP, over the budget of 50 MP" in got["error"], got
    assert got["extra_rss_kb"] < 200 * 1024, got
    assert got["traced_peak"] < 200 * 1024 * 1024, got
    assert got["seconds"] < 1.0, got
