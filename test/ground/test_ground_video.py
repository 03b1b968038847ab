"""``--video``'s frames of another size: letterboxed into the first frame's size (scaled
without distortion, centred, black bars), not squashed; read back from the MP4."""

from __future__ import annotations

import numpy as np
import pytest

from probench.ground.video import VideoSink, letterbox


def test_letterbox_keeps_the_aspect_ratio() -> None:
    tall = np.full((96, 32, 3), 200, np.uint8)  # 1:3 into 128x96: scaled 1x, bars left and right
    out = letterbox(tall, (128, 96))
    assert out.shape == (96, 128, 3)
    assert (out[:, 48:80] == 200).all() and (out[:, :48] == 0).all() and (out[:, 80:] == 0).all()
    wide = np.full((24, 256, 3), 90, np.uint8)  # 256x24 into 128x96: halved to 128x12, bars above and below
    out = letterbox(wide, (128, 96))
    assert (out[42:54] == 90).all() and (out[:42] == 0).all() and (out[54:] == 0).all()
    same = np.zeros((96, 128, 3), np.uint8)
    assert letterbox(same, (128, 96)) is same
    small = np.full((48, 64, 3), 50, np.uint8)  # same aspect, smaller: scaled up to fill it all
    assert (letterbox(small, (128, 96)) == 50).all()


def test_video_of_mixed_sizes_is_letterboxed(tmp_path) -> None:
    import cv2

    sink = VideoSink(tmp_path / "v.mp4")
    for i in range(4):
        sink.add(i * 33_333_333, np.full((96, 128, 3), 120, np.uint8))  # the first size: 128x96
    for i in range(4, 8):
        sink.add(i * 33_333_333, np.full((96, 32, 3), 250, np.uint8))  # a narrow frame
    sink.close()
    assert sink.frames_written == 8
    cap = cv2.VideoCapture(str(tmp_path / "v.mp4"))
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f)
    cap.release()
    assert len(frames) == 8 and frames[0].shape == (96, 128, 3)
    last = frames[-1].astype(float)
    # the narrow frame stands in the middle at its own width (mp4v is lossy: means, not pixels)
    assert last[:, 52:76].mean() == pytest.approx(250, abs=12)
    assert last[:, :40].mean() < 12 and last[:, 88:].mean() < 12
