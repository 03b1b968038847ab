"""CompressedImage decoding: the fast path gives OpenCV's pixels; the CUDA path's plumbing."""

from __future__ import annotations

from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from probench.msgs import images
from probench.msgs.errors import CompressedImageError


def _frame() -> np.ndarray:
    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    return cv2.resize(small, (64, 48), interpolation=cv2.INTER_CUBIC)


@pytest.mark.parametrize("ext", [".jpg", ".png"])
def test_compressed_to_rgb_is_opencvs_decode(ext: str) -> None:
    _ok, enc = cv2.imencode(ext, _frame())
    data = enc.tobytes()
    got = images.compressed_to_rgb(SimpleNamespace(format=ext[1:], data=data))
    want = cv2.cvtColor(cv2.imdecode(enc, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    assert got.dtype == np.uint8 and np.array_equal(got, want)
    # the device variant on CPU is the same numpy frame
    same = images.compressed_to_device(SimpleNamespace(format="", data=data), "cpu")
    assert isinstance(same, np.ndarray) and np.array_equal(same, want)


def test_bad_bytes_are_a_clear_error() -> None:
    with pytest.raises(CompressedImageError, match="does not decode"):
        images.compressed_to_rgb(SimpleNamespace(format="jpeg", data=b"\xff\xd8\xff not a jpeg"))
    with pytest.raises(CompressedImageError, match="no data"):
        images.compressed_to_device(SimpleNamespace(format="jpeg", data=b""), "cuda")


def test_cuda_jpeg_goes_to_the_gpu_decoder(monkeypatch) -> None:
    """No GPU here: the nvJPEG call is replaced by torchvision's CPU decoder to check the
    plumbing (JPEG detected from its bytes, device passed, HWC RGB out)."""
    import torch
    import torchvision.io as tvio

    seen = {}
    cpu_decode = tvio.decode_jpeg

    def fake_decode_jpeg(data, mode, device):
        seen["device"] = device
        return cpu_decode(data, mode=mode)

    monkeypatch.setattr(tvio, "decode_jpeg", fake_decode_jpeg)
    _ok, enc = cv2.imencode(".jpg", _frame())
    out = images.compressed_to_device(SimpleNamespace(format="", data=enc.tobytes()), "cuda:0")
    assert seen["device"] == "cuda:0" and isinstance(out, torch.Tensor) and tuple(out.shape) == (48, 64, 3)
    ref = images.compressed_to_rgb(SimpleNamespace(format="jpeg", data=enc.tobytes()))
    assert int(np.abs(out.numpy().astype(int) - ref).max()) <= 1
    _ok, png = cv2.imencode(".png", _frame())  # PNG: decoded on the CPU
    assert isinstance(images.compressed_to_device(SimpleNamespace(format="png", data=png.tobytes()), "cuda"),
                      np.ndarray)
