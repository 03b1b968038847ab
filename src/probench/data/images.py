"""Reading images as RGB uint8 arrays, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probench.data.errors import ImageDecodeError


def decode_rgb(data: bytes | np.ndarray, where: str | Path) -> np.ndarray:
    """An encoded image (the bytes of a PNG/JPEG file) as RGB uint8 ``(H, W, 3)``; ``where``
    names it in the error. The one decoder of files and of bytes shipped to a worker."""
    import cv2

    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR) if buf.size else None
    if bgr is None or bgr.size == 0:
        raise ImageDecodeError(f"{where}: not a decodable image")
    return np.ascontiguousarray(bgr[:, :, ::-1])


def read_rgb(path: str | Path) -> np.ndarray:
    path = Path(path)
    if not path.exists():
        raise ImageDecodeError(f"{path}: image file not found")
    return decode_rgb(np.fromfile(path, dtype=np.uint8), path)
