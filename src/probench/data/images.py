"""Reading images as RGB uint8 arrays, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probench.data.errors import ImageDecodeError


def read_rgb(path: str | Path) -> np.ndarray:
    import cv2

    path = Path(path)
    if not path.exists():
        raise ImageDecodeError(f"{path}: image file not found")
    data = np.fromfile(path, dtype=np.uint8)
    bgr = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if bgr is None or bgr.size == 0:
        raise ImageDecodeError(f"{path}: not a decodable image")
    return np.ascontiguousarray(bgr[:, :, ::-1])
