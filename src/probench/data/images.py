"""Reading images as RGB uint8 arrays, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probench.data.errors import ImageDecodeError
from probench.msgs.errors import MessageConversionError
from probench.msgs.images import DEFAULT_MAX_PIXELS, check_pixel_budget, compressed_size


def decode_rgb(data: bytes | np.ndarray, where: str | Path, *, max_pixels: int | None = DEFAULT_MAX_PIXELS,
               declared: tuple[int, int] | None = None) -> np.ndarray:
    """An encoded image (the bytes of a PNG/JPEG file) as RGB uint8 ``(H, W, 3)``; ``where``
    names it in the error. The one decoder of files and of bytes shipped to a worker.

    The pixel budget is the node's (:func:`probench.msgs.images.check_pixel_budget`, the same
    ``DEFAULT_MAX_PIXELS``): a PNG or JPEG whose header gives more pixels is refused before
    decoding (a 2.6 MB PNG can decode to 30000x30000, 2.7 GB), so ``infer``, ``latency``,
    ``bag`` and ``--parity`` refuse what the node refuses. Another format is decoded and then
    held to the same budget. ``declared`` (width, height): the size the dataset gives the
    image, checked against the decoded one (either orientation: a JPEG's EXIF rotation swaps
    them), so a dataset cannot claim a 64x48 file is 6400x4800."""
    import cv2

    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    if max_pixels is not None and compressed_size(buf) is not None:
        try:
            check_pixel_budget(buf, "file", max_pixels)
        except MessageConversionError as exc:
            raise ImageDecodeError(f"{where}: {exc}") from None
    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR) if buf.size else None
    if bgr is None or bgr.size == 0:
        raise ImageDecodeError(f"{where}: not a decodable image")
    h, w = bgr.shape[:2]
    if max_pixels is not None and h * w > max_pixels:
        raise ImageDecodeError(f"{where}: decodes to {w}x{h}, over the pixel budget of "
                               f"{max_pixels / 1e6:g} MP")
    if declared is not None and declared not in ((w, h), (h, w)):
        raise ImageDecodeError(f"{where}: the file is {w}x{h}, the dataset declares "
                               f"{declared[0]}x{declared[1]}")
    return np.ascontiguousarray(bgr[:, :, ::-1])


def read_rgb(path: str | Path, *, declared: tuple[int, int] | None = None) -> np.ndarray:
    """The image file at ``path`` as RGB uint8 (:func:`decode_rgb`'s checks, ``declared`` too)."""
    path = Path(path)
    if not path.exists():
        raise ImageDecodeError(f"{path}: image file not found")
    return decode_rgb(np.fromfile(path, dtype=np.uint8), path, declared=declared)


def header_size(path: Path, head_bytes: int = 1 << 16) -> tuple[int, int] | None:
    """(width, height) of a PNG or JPEG file from the first ``head_bytes`` of its header, None
    when they do not tell (another format, a header further in): a cheap check of a
    dataset's declared sizes (``probench validate``)."""
    with open(path, "rb") as fh:
        head = fh.read(head_bytes)
    return compressed_size(np.frombuffer(head, dtype=np.uint8))
