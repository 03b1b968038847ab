"""``--video``: the annotated frames as an MP4 at the recorded rate, checked by reading it back."""

from __future__ import annotations

import itertools
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from probench.ground.errors import GroundError

VIDEO_FOURCC = "mp4v"  # MPEG-4 Part 2: what OpenCV's wheels can encode (no H.264 encoder in them)
VIDEO_RATE_FRAMES = 30  # the video's rate: median interval of the first frames


def letterbox(bgr: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``bgr`` fitted into ``size`` (width, height) without distortion: scaled by the larger
    factor that keeps it inside, centred, the rest black."""
    import cv2

    w, h = size
    ih, iw = bgr.shape[:2]
    if (iw, ih) == (w, h):
        return bgr
    f = min(w / iw, h / ih)
    nw, nh = max(1, min(w, round(iw * f))), max(1, min(h, round(ih * f)))
    inter = cv2.INTER_AREA if f < 1 else cv2.INTER_LINEAR
    out = np.zeros((h, w, 3), np.uint8)
    x0, y0 = (w - nw) // 2, (h - nh) // 2
    out[y0 : y0 + nh, x0 : x0 + nw] = cv2.resize(bgr, (nw, nh), interpolation=inter)
    return out


class VideoSink:
    """The annotated frames as an MP4 at the recorded rate (a frame of another size is
    letterboxed into the first one's: scaled without distortion, black bars). The rate is
    known once the first frames are in, so they are held until then."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.frames_written = 0
        self.fps = 0.0
        self._held: list[tuple[int, np.ndarray]] = []
        self._writer: Any = None
        self._size: tuple[int, int] = (0, 0)

    def add(self, t_ns: int, bgr: np.ndarray) -> None:
        if self._writer is None:
            self._held.append((t_ns, bgr))
            if len(self._held) >= VIDEO_RATE_FRAMES:
                self._start()
        else:
            self._write(bgr)

    def discard(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None
        self._held = []

    def close(self) -> None:
        if self._writer is None and self._held:
            self._start()
        if self._writer is not None:
            self._writer.release()
        self._check_readable()

    def _start(self) -> None:
        import cv2

        stamps = [t for t, _ in self._held]
        gaps = [b - a for a, b in itertools.pairwise(stamps) if b > a]
        self.fps = 1e9 / median(gaps) if gaps else 30.0
        h, w = self._held[0][1].shape[:2]
        self._size = (w, h)
        fourcc = cv2.VideoWriter.fourcc(*VIDEO_FOURCC)
        self._writer = cv2.VideoWriter(str(self.path), fourcc, self.fps, (w, h))
        if not self._writer.isOpened():
            raise GroundError(f"--video {self.path}: OpenCV cannot write {VIDEO_FOURCC} MP4 here")
        for _, bgr in self._held:
            self._write(bgr)
        self._held = []

    def _write(self, bgr: np.ndarray) -> None:
        self._writer.write(letterbox(bgr, self._size))
        self.frames_written += 1

    def _check_readable(self) -> None:
        """Read back: the file must open and hold every frame written."""
        import cv2

        cap = cv2.VideoCapture(str(self.path))
        try:
            n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if cap.isOpened() else -1
        finally:
            cap.release()
        if n != self.frames_written:
            raise GroundError(f"--video {self.path}: wrote {self.frames_written} frames, reads back {n}")
