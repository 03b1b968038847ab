"""Image preprocessing as torch ops on the model's device (the ``device`` path).

Every adapter turns RGB uint8 ``(H, W, 3)`` frames into its model's input in one of two ways:

- ``device`` (default): each frame is uploaded once as uint8 (from a reused pinned
  buffer with a non-blocking copy on CUDA; zero-copy on CPU) and resized, padded and
  normalised by torch ops on the model's device, batched where the detector batches;
- ``reference``: the library's own processor (transformers' image processor,
  ultralytics' predictor) on the CPU, as published. It stays available for parity checks
  and for anyone who wants the published code path (``--preprocess reference``).

The device path computes what the reference computes (the parity tests hold each family
to its documented tolerance, see docs/MODELS.md "Preprocessing"):

- :class:`Owlv2Pixels` (OWLv2): rescale, pad to a square (bottom/right, zeros), the
  processor's anti-aliasing Gaussian blur, bilinear resize, normalise. Blur + resize are
  linear and separable, so they are applied as two small matrices per axis
  (``A_rows @ image @ A_cols^T``) built once per input size from the same kernel, reflect
  border and bilinear weights as the reference: the blur, which costs the reference over
  a second for the tiny model's 64 px input, is folded into the resize. Pixel values
  match within float rounding (1e-5).
- :class:`ProcessorPixels` (OWL-ViT, Grounding DINO family, OmDet-Turbo, SAM3): the
  transformers torchvision-backend processors resize the uint8 image and then normalise;
  here the processor's own ``resize`` / ``center_crop`` / ``rescale_and_normalize`` run
  directly on the device tensor (no per-call validation, conversion and regrouping), so
  the pixel values are the reference's exactly on CPU.
- :class:`Letterbox` (YOLO-World, YOLOE): ultralytics' letterbox geometry (aspect kept,
  minimal stride-multiple rectangle for same-size batches, grey 114 border) with a float
  bilinear resize rounded half up to uint8 levels; ultralytics resizes with OpenCV's
  fixed-point ``INTER_LINEAR``, so values may differ by one uint8 level (1/255).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

import numpy as np

from probench.vocabulary import PREPROCESS_PATHS

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and transformers (pyproject)
    from torch import Tensor
    from torch import device as TorchDevice
    from torch import dtype as TorchDtype
    from torch.cuda import Event
    from transformers.image_processing_utils import BaseImageProcessor

    # A frame: RGB uint8 (H, W, 3), a numpy array or a torch tensor (decoded on the GPU).
    Frame: TypeAlias = np.ndarray | Tensor

V = TypeVar("V")

_MATRIX_CACHE = 8  # input sizes whose resize matrices are kept (a camera has one)


def check_preprocess(value: str) -> str:
    """``device`` or ``reference``, or a clear UsageError."""
    if value not in PREPROCESS_PATHS:
        from probench.errors import UsageError

        raise UsageError(f"preprocess must be one of {', '.join(PREPROCESS_PATHS)}, got {value!r}")
    return value


class _Lru(Generic[V]):
    """A small LRU of computed values (resize matrices, pinned buffers) keyed by shape."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]
        value = make()
        self.items[key] = value
        while len(self.items) > self.size:
            self.items.popitem(last=False)
        return value


def as_numpy_rgb(image: Frame) -> np.ndarray:
    """A frame as a CPU numpy array (a torch tensor, e.g. decoded on the GPU, is copied back)."""
    if isinstance(image, np.ndarray):
        return image
    return np.ascontiguousarray(image.detach().cpu().numpy())


class Uploader:
    """Frames -> uint8 ``(H, W, 3)`` tensors on ``dev``, one copy per frame.

    CPU: zero-copy views of the numpy arrays. CUDA: frames of one shape are copied into a
    reused page-locked buffer and sent with one non-blocking transfer; an event recorded
    after the transfer is waited for before the buffer is written again. Tensors already
    on the device (a frame decoded there) pass through.
    """

    def __init__(self, dev: TorchDevice) -> None:
        self.dev = dev
        self._pinned: _Lru[_Pinned] = _Lru(4)

    def __call__(self, images: Sequence[Frame]) -> list[Tensor]:
        import torch

        out: list[Tensor] = [None] * len(images)
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, im in enumerate(images):
            if isinstance(im, torch.Tensor):
                out[i] = im.to(self.dev, non_blocking=True)
            elif self.dev.type == "cpu":
                arr = im if im.flags.writeable else im.copy()  # torch refuses read-only views
                out[i] = torch.from_numpy(np.ascontiguousarray(arr))
            else:
                groups.setdefault(tuple(im.shape), []).append(i)
        for shape, idx in groups.items():
            batch = self._to_device([images[i] for i in idx], shape)
            for k, i in enumerate(idx):
                out[i] = batch[k]
        return out

    def _to_device(self, frames: list[np.ndarray], shape: tuple[int, ...]) -> Tensor:
        import torch

        key = (len(frames), *shape)
        slot = self._pinned.get(key, lambda: _Pinned(torch.empty(key, dtype=torch.uint8, pin_memory=True)))
        if slot.event is not None:
            slot.event.synchronize()  # the previous transfer from this buffer has finished
        staging = slot.buffer.numpy()
        for k, frame in enumerate(frames):
            staging[k] = frame
        on_device = slot.buffer.to(self.dev, non_blocking=True)
        slot.event = torch.cuda.Event()
        slot.event.record()
        return on_device


@dataclass
class _Pinned:
    """A reused page-locked upload buffer and the event recorded after its last transfer."""

    buffer: Tensor
    event: Event | None = None


def _chw(image: Tensor) -> Tensor:
    """(H, W, 3) uint8 -> (1, 3, H, W), a channels-last view (no copy)."""
    return image.permute(2, 0, 1).unsqueeze(0)


# -- OWLv2 -----------------------------------------------------------------------------------
def _gaussian_kernel(size: int, sigma: float) -> Tensor:
    """torchvision's ``_get_gaussian_kernel1d`` (float32), the kernel the reference blurs with."""
    import torch

    lim = (size - 1) / (2.0 * math.sqrt(2.0))
    x = torch.linspace(-lim, lim, steps=size, dtype=torch.float32)
    return torch.softmax(x.div(sigma).pow(2).neg(), dim=0)


def _blur_matrix(length: int, size: int, sigma: float) -> Tensor:
    """(length, length) float64: 1-D Gaussian blur with torch's ``reflect`` border."""
    import torch

    kernel = _gaussian_kernel(size, sigma).double()
    half = size // 2
    rows = torch.arange(length)[:, None]
    src = rows + torch.arange(-half, half + 1)[None, :]
    src = torch.where(src < 0, -src, src)
    src = torch.where(src >= length, 2 * (length - 1) - src, src)
    mat = torch.zeros(length, length, dtype=torch.float64)
    mat.scatter_add_(1, src, kernel.expand(length, -1).contiguous())
    return mat


def _bilinear_matrix(length: int, out: int) -> Tensor:
    """(out, length) float64: torch's bilinear resize (align_corners=False, no antialias),
    taken from ``interpolate`` itself applied to the unit vectors. In float32, as the
    reference: torch computes the source positions in the input's dtype, and in float32
    their rounding (~6e-5 px at 1000 px) is visible in the pixel values."""
    import torch
    import torch.nn.functional as F

    eye = torch.eye(length, dtype=torch.float32).reshape(1, length, length, 1)
    cols = F.interpolate(eye, size=(out, 1), mode="bilinear", align_corners=False, antialias=False)
    return cols.reshape(length, out).t().double().contiguous()


class Owlv2Pixels:
    """OWLv2's processor (transformers' torchvision ``Owlv2ImageProcessor``) as two matrix
    products per frame; see the module doc."""

    def __init__(self, processor: BaseImageProcessor, dev: TorchDevice, dtype: TorchDtype) -> None:
        import torch

        size = processor.size
        self.out = (int(size.height), int(size.width))
        self.dev, self.dtype = dev, dtype
        self.do_pad = bool(getattr(processor, "do_pad", True))
        self.do_resize = bool(getattr(processor, "do_resize", True))
        scale = float(processor.rescale_factor) if processor.do_rescale else 1.0
        if processor.do_normalize:
            mean = torch.tensor(processor.image_mean, dtype=torch.float32)
            std = torch.tensor(processor.image_std, dtype=torch.float32)
        else:
            mean, std = torch.zeros(3), torch.ones(3)
        # (x * scale - mean) / std as one multiply-add per channel, applied after the resize
        self.gain = (scale / std).to(dev).view(3, 1, 1)
        self.shift = (-mean / std).to(dev).view(3, 1, 1)
        self._matrices: _Lru[tuple[Any, Any, tuple[int, int]]] = _Lru(_MATRIX_CACHE)
        self._lock = threading.Lock()  # the CPU passes reuse their buffers: one call at a time

    def _axis_matrices(self, h: int, w: int) -> tuple[Any, Any, tuple[int, int]]:
        """(row pass, column pass, (S_h, S_w)) for an ``h x w`` frame: the products with
        A_rows (live S_h, h) and A_cols (live S_w, w) (pad, blur, resize); "live" output lines
        are those that see some of the frame."""
        import torch

        ph, pw = (max(h, w), max(h, w)) if self.do_pad else (h, w)
        sh, sw = self.out if self.do_resize else (ph, pw)
        # The reference's sigma and kernel size (float32 arithmetic, as it computes them).
        factors = torch.tensor([ph, pw]) / torch.tensor([sh, sw])
        sigma = ((factors - 1) / 2).clamp(min=0)
        blur = self.do_resize and not bool(torch.any(sigma == 0))
        sizes = (2 * torch.ceil(3 * sigma).int() + 1).tolist()
        sig = sigma.tolist()
        # The reference passes (rows, cols) values where torchvision reads (x, y): the
        # column blur uses the row axis' kernel size and sigma, and vice versa.
        rows = _bilinear_matrix(ph, sh)
        cols = _bilinear_matrix(pw, sw)
        if blur:
            rows = rows @ _blur_matrix(ph, sizes[1], sig[1])
            cols = cols @ _blur_matrix(pw, sizes[0], sig[0])
        # The padding is zeros: only the image's own rows/columns contribute, and output
        # rows/columns that see only padding (a bottom/right block) are 0 before normalising.
        rows, cols = rows[:, :h], cols[:, :w]
        live_h = int(rows.abs().sum(1).nonzero().max()) + 1
        live_w = int(cols.abs().sum(1).nonzero().max()) + 1
        row_pass = self._place(rows[:live_h], w * 3, rows=True)
        return row_pass, self._place(cols[:live_w], live_h * 3, rows=False), (sh, sw)

    def _place(self, mat: Tensor, p: int, *, rows: bool) -> _RowPass | _ColPass | Tensor:
        """The product with one axis' matrix (float64 ``(out, in)``): on CPU the banded
        passes below; on other devices the dense matrix (rows) or its transpose (columns),
        for plain matmuls (untested on a GPU here)."""
        import torch

        if self.dev.type == "cpu":
            return _RowPass(mat, p) if rows else _ColPass(mat, p)
        mat = mat.to(torch.float32)
        return (mat if rows else mat.t().contiguous()).to(self.dev)

    def __call__(self, images: Sequence[Tensor]) -> Tensor:
        import torch

        with self._lock:
            out: Tensor | None = None
            for i, im in enumerate(images):
                h, w = int(im.shape[0]), int(im.shape[1])
                rows, cols, (sh, sw) = self._matrices.get((h, w), partial(self._axis_matrices, h, w))
                if out is None:  # every image gives the same (S_h, S_w)
                    out = torch.empty((len(images), 3, sh, sw), dtype=torch.float32, device=self.dev)
                if isinstance(rows, _RowPass):
                    mixed = rows(im)  # (live S_h, 3, W)
                else:
                    mixed = (rows @ im.reshape(h, w * 3).to(torch.float32)).view(-1, w, 3).permute(0, 2, 1)
                lh = mixed.shape[0]
                # the column pass on each (row, channel) line: (live S_h * 3, W) -> (live S_h * 3, live S_w)
                lines = mixed.reshape(lh * 3, w)
                pix = cols(lines) if isinstance(cols, _ColPass) else lines @ cols
                lw = pix.shape[1]
                by_channel = pix.view(lh, 3, lw).permute(1, 0, 2)
                torch.addcmul(self.shift, by_channel, self.gain, out=out[i, :, :lh, :lw])
                out[i, :, lh:] = self.shift  # pixels that see only padding: 0 before normalising
                out[i, :, :lh, lw:] = self.shift
        assert out is not None, "no image"
        return out.to(self.dtype)


# A rough CPU cost model of the two passes, in multiply-adds of one AVX2 core: it only chooses
# how the work is grouped, never the values. One torch op (a GEMM, a copy) on a small operand
# costs about 5 us, 100k multiply-adds; converting a uint8 to float32, about 2.
_OP_MACS = 100_000
_CONVERT_MACS = 2
_BLOCK_BYTES = 2 << 20  # float32 frame rows converted at a time: they stay in the cache
_GEMM_WIDTH = 16  # a GEMM with fewer output columns takes about as long as one this wide (measured)


def _band(mat: Tensor) -> tuple[Tensor, Tensor]:
    """(first, end) column of each row's non-zeros (rows with none: (0, 0))."""
    import torch

    nz = mat != 0
    cols = torch.arange(mat.shape[1])
    first = torch.where(nz, cols, mat.shape[1]).min(1).values
    end = torch.where(nz, cols + 1, 0).max(1).values
    return torch.minimum(first, end), end


def _groups(first: Tensor, end: Tensor, size: int) -> list[tuple[int, int, int, int]]:
    """(o0, o1, r0, r1): consecutive outputs ``size`` at a time and the inputs their bands cover."""
    spans = []
    for o0 in range(0, len(first), size):
        o1 = min(o0 + size, len(first))
        spans.append((o0, o1, int(first[o0:o1].min()), int(end[o0:o1].max())))
    return spans


class _RowPass:
    """``A @ frame`` on the CPU for a banded ``(M, H)`` matrix ``A`` and a uint8 frame
    ``(H, W, 3)``, as ``(M, 3, W)`` float32.

    A sparse (CSR) product runs at a few percent of the CPU's multiply-add rate and a dense
    one spends most of its multiply-adds on zeros. Here the frame is converted to float32 a
    cache-sized block of rows at a time (the float frame is never written out whole), and
    the outputs whose bands lie in the block are computed from it ``g`` at a time, each group
    one dense ``(g, window)`` product straight into its output rows. Larger groups mean fewer
    ops but longer windows (more zeros multiplied); ``g`` minimises the cost model above for
    ``n`` (= 3W) columns."""

    def __init__(self, mat: Tensor, n: int) -> None:
        import torch

        first, end = _band(mat)
        block_rows = max(_BLOCK_BYTES // (4 * n), 1)

        def plan(g: int) -> tuple[float, list[tuple[int, int, list[tuple[int, int, int, int]]]]]:
            blocks: list[tuple[int, int, list[tuple[int, int, int, int]]]] = []
            for o0, o1, r0, r1 in _groups(first, end, g):
                if blocks and blocks[-1][0] <= r0 and r1 <= blocks[-1][1]:
                    blocks[-1][2].append((o0, o1, r0, r1))
                else:  # bands move down the frame with the outputs: a new block from r0
                    blocks.append((r0, min(int(mat.shape[1]), max(r0 + block_rows, r1)), [(o0, o1, r0, r1)]))
            spans = [span for _, _, block in blocks for span in block]
            cost = sum(n * (b1 - b0) * _CONVERT_MACS + _OP_MACS for b0, b1, _ in blocks)
            return cost + sum(n * (r1 - r0) * (o1 - o0) + _OP_MACS for o0, o1, r0, r1 in spans), blocks

        _, best = min((plan(g) for g in range(1, min(len(first), 64) + 1)), key=lambda t: t[0])
        # Buffers kept with the plan and every product's operand views made here: the Python
        # work per group is then one call (the caller holds a lock: calls do not overlap).
        self.buf = torch.empty((max(b1 - b0 for b0, b1, _ in best), n), dtype=torch.float32)
        self.out = torch.empty((int(mat.shape[0]), n), dtype=torch.float32)
        self.blocks = [(b0, b1, self.buf[: b1 - b0], [
            (mat[o0:o1, r0:r1].to(torch.float32).contiguous(), self.buf[r0 - b0 : r1 - b0], self.out[o0:o1])
            for o0, o1, r0, r1 in spans]) for b0, b1, spans in best]

    def __call__(self, frame: Tensor) -> Tensor:
        import torch

        h, w = int(frame.shape[0]), int(frame.shape[1])
        x = frame.reshape(h, w * 3)
        mm = torch.mm
        for b0, b1, rows, groups in self.blocks:
            rows.copy_(x[b0:b1])
            for weights, window, dst in groups:
                mm(weights, window, out=dst)
        # de-interleaved once, on the (much smaller) result, into a new tensor
        return self.out.view(-1, w, 3).permute(0, 2, 1).contiguous()


class _ColPass:
    """``lines @ A^T`` on the CPU for a banded ``(M, W)`` matrix ``A`` and ``(P, W)`` lines:
    the output columns in groups of ``g``, each group one dense GEMM of the input columns its
    band covers, written in place. ``g`` minimises the cost model above for ``p`` lines."""

    def __init__(self, mat: Tensor, p: int) -> None:
        import torch

        self.out_cols = int(mat.shape[0])
        first, end = _band(mat)

        def cost(spans: list[tuple[int, int, int, int]]) -> float:
            return sum(p * (r1 - r0) * max(o1 - o0, _GEMM_WIDTH) + _OP_MACS for o0, o1, r0, r1 in spans)

        best = min((_groups(first, end, g) for g in range(1, self.out_cols + 1)), key=cost)
        self.out = torch.empty((p, self.out_cols), dtype=torch.float32)  # reused: see _RowPass
        self.groups = [(r0, r1, mat[o0:o1, r0:r1].t().to(torch.float32).contiguous(), self.out[:, o0:o1])
                       for o0, o1, r0, r1 in best]

    def __call__(self, lines: Tensor) -> Tensor:
        import torch

        mm = torch.mm
        for r0, r1, weights, dst in self.groups:
            mm(lines[:, r0:r1], weights, out=dst)
        return self.out


# -- transformers torchvision-backend processors --------------------------------------------
class ProcessorPixels:
    """The processor's own resize / centre crop / rescale+normalise / pad on device tensors
    (the reference's ``_preprocess`` chain without its per-call overhead)."""

    def __init__(self, processor: BaseImageProcessor, dev: TorchDevice, dtype: TorchDtype) -> None:
        self.proc, self.dev, self.dtype = processor, dev, dtype
        # the processors return a mask with their padding (DETR-style ones with do_pad)
        self.pixel_mask = "pixel_mask" in getattr(processor, "model_input_names", ()) and bool(
            getattr(processor, "do_pad", False))

    def __call__(self, images: Sequence[Tensor]) -> dict[str, Tensor]:
        import torch

        p = self.proc
        outs = []
        for im in images:
            x = _chw(im)
            if p.do_resize:
                x = p.resize(image=x, size=p.size, resample=p.resample)
            if getattr(p, "do_center_crop", False):
                x = p.center_crop(x, p.crop_size)
            x = p.rescale_and_normalize(x, p.do_rescale, p.rescale_factor, p.do_normalize,
                                        p.image_mean, p.image_std)
            outs.append(x[0].to(torch.float32))
        h = max(o.shape[-2] for o in outs)
        w = max(o.shape[-1] for o in outs)
        mask = None
        if all(o.shape[-2:] == (h, w) for o in outs):  # one frame, or frames of one size: no padding
            pv = torch.stack(outs).contiguous()  # NCHW-contiguous, as the padded canvas below
            if self.pixel_mask:
                mask = torch.ones((len(outs), h, w), dtype=torch.int64, device=self.dev)
        else:
            pv = torch.zeros((len(outs), 3, h, w), dtype=torch.float32, device=self.dev)
            if self.pixel_mask:
                mask = torch.zeros((len(outs), h, w), dtype=torch.int64, device=self.dev)
            for i, o in enumerate(outs):  # pad bottom/right with zeros, as the processors do
                pv[i, :, : o.shape[-2], : o.shape[-1]] = o
                if mask is not None:
                    mask[i, : o.shape[-2], : o.shape[-1]] = 1
        result = {"pixel_values": pv.to(self.dtype)}
        if mask is not None:
            result["pixel_mask"] = mask
        return result


# -- ultralytics --------------------------------------------------------------------------------
def letterbox_geometry(
    shape: tuple[int, int], new_shape: tuple[int, int], *, auto: bool, stride: int
) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """ultralytics ``LetterBox.get_params`` (scaleup, centred): ``((new_h, new_w),
    (top, bottom, left, right))`` of the resized image inside its padded canvas."""
    h, w = shape
    r = min(new_shape[0] / h, new_shape[1] / w)
    new_w, new_h = max(round(w * r), 1), max(round(h * r), 1)
    pad_w, pad_h = new_shape[1] - new_w, new_shape[0] - new_h
    if auto:
        pad_w, pad_h = pad_w % stride, pad_h % stride
    dw, dh = pad_w / 2, pad_h / 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    return (new_h, new_w), (top, bottom, left, right)


class Letterbox:
    """ultralytics' predictor preprocessing (letterbox, RGB, /255) as device ops.

    ``rect``: the predictor's ``rect`` mode for PyTorch models (a batch of same-size frames
    is padded to the smallest stride multiple, not to the full square)."""

    PAD = 114

    def __init__(
        self, imgsz: int, stride: int, dev: TorchDevice, dtype: TorchDtype, *, rect: bool = True
    ) -> None:
        self.imgsz, self.stride, self.dev, self.dtype, self.rect = int(imgsz), int(stride), dev, dtype, rect

    def __call__(self, images: Sequence[Tensor]) -> Tensor:
        import torch
        import torch.nn.functional as F

        same = len({tuple(im.shape) for im in images}) == 1
        outs = []
        for im in images:
            (nh, nw), (top, bottom, left, right) = letterbox_geometry(
                (int(im.shape[0]), int(im.shape[1])), (self.imgsz, self.imgsz),
                auto=same and self.rect, stride=self.stride,
            )
            x = _chw(im)
            if (nh, nw) != (int(im.shape[0]), int(im.shape[1])):
                x = F.interpolate(x.to(torch.float32), size=(nh, nw), mode="bilinear", align_corners=False)
                x = torch.floor(x + 0.5)  # OpenCV rounds its uint8 result half up
            x = F.pad(x.to(torch.float32), (left, right, top, bottom), value=float(self.PAD))
            outs.append(x[0])
        return (torch.stack(outs) / 255.0).to(self.dtype)


def interpolate_floor(image: Tensor, size: tuple[int, int]) -> Tensor:
    """The floor of any preprocessing: one bilinear ``interpolate`` of the uploaded frame to
    the model's input size (the stage benchmark prints it beside the real paths)."""
    import torch
    import torch.nn.functional as F

    return F.interpolate(_chw(image).to(torch.float32), size=size, mode="bilinear", align_corners=False)
