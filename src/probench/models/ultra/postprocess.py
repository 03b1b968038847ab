"""The ultralytics models' post-processing, box-only by default: the predictor's non-max
suppression (:func:`non_max_suppression`, stopping early once ``max_det`` boxes are kept),
its empty-mask filter for the -seg models without building the masks
(:func:`nonempty_masks`), and the conversion of an ultralytics ``Results``
(:func:`results_to_detections`). ``test/models/test_models_ultra_postprocess.py`` and
``test/models/test_models_ultra_nms.py`` pin each to ultralytics' own code."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

import numpy as np

from probench.detections import Detections
from probench.models.hf_common import MAX_PER_PROMPT, cap_per_prompt

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and ultralytics (pyproject)
    from torch import Tensor
    from ultralytics.engine.results import Results

    # the network's output: one tensor, or a tuple/list holding it first (and the -seg models' prototypes)
    RawOutput: TypeAlias = Tensor | tuple[Tensor, ...] | list[Tensor]

NMS_IOU = 0.7  # ultralytics' predictor default (class-agnostic for YOLOE, as YOLOE.predict sets it)
NMS_CHUNK = 1024  # CPU: candidates per step of non_max_suppression's early-stopping greedy NMS
MASK_GROUP = 32  # CPU: boxes evaluated together (sorted by size, padded to the group's largest)
# On a GPU the post-processing is bound by kernel launches and host syncs, not arithmetic:
# NMS runs torchvision's kernel once over all candidates (as ultralytics does), and the
# empty-mask filter takes as many boxes per group as fit this many window cells (one group
# for a frame's few hundred boxes).
GPU_MASK_GROUP_CELLS = 1 << 24
MASK_RTOL = 1e-5  # |peak| below this x (sum of |terms|) goes to the exact step (float32: ~1e-6)
DIRECT_MASK_PIXELS = 1 << 22  # up to this many mask pixels (undecided boxes x H x W): sampled, then built


class ImageBoxes(NamedTuple):
    """One image's kept boxes (original pixels), scores, prompt indices and masks (or None)."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray
    masks: np.ndarray | None


def postprocess(
    preds: RawOutput, input_hw: tuple[int, int], sizes: list[tuple[int, int]], *,
    conf: float, n_classes: int, agnostic: bool, segment: bool, end2end: bool, return_masks: bool,
) -> list[ImageBoxes]:
    """Raw network output -> per image (boxes in original pixels, scores, prompt index,
    masks or None): ultralytics' predictor's NMS, empty-mask filter and box scaling, with
    no mask built unless ``return_masks`` (:mod:`probench.models.ultra` doc)."""
    import torch
    from ultralytics.utils import ops

    raw = preds[0] if segment else preds
    protos = None
    if segment:
        protos = preds[0][1] if isinstance(preds[0], tuple) else preds[1]
    kept = non_max_suppression(
        raw, conf, NMS_IOU, agnostic=agnostic, max_det=MAX_PER_PROMPT * n_classes,
        nc=n_classes if segment else 0, end2end=end2end,
    )
    out = []
    for i, (pred, hw) in enumerate(zip(kept, sizes, strict=True)):
        masks = None
        nonempty = None
        if protos is not None and len(pred):
            if return_masks:
                pred[:, :4] = ops.scale_boxes(input_hw, pred[:, :4], hw)
                full = ops.process_mask_native(protos[i], pred[:, 6:], pred[:, :4], hw)
                keep = full.amax((-2, -1)) > 0
                pred, masks = pred[keep], full[keep]
            else:
                nonempty = nonempty_masks(protos[i], pred[:, 6:], pred[:, :4], input_hw)
                pred[:, :4] = ops.scale_boxes(input_hw, pred[:, :4], hw)
        else:
            pred[:, :4] = ops.scale_boxes(input_hw, pred[:, :4], hw)
        if nonempty is None:
            det = pred[:, :6].float().cpu().numpy()
        else:  # the filter applied on the host: one copy, no boolean index (a sync) on the device
            rows = torch.cat((pred[:, :6].float(), nonempty[:, None].float()), 1).cpu().numpy()
            det = rows[rows[:, 6] > 0, :6]
        cls = det[:, 5].astype(np.int64)
        keep_idx = cap_per_prompt(det[:, 4], cls, MAX_PER_PROMPT)
        mask_arr = None
        if masks is not None:
            mask_arr = masks.cpu().numpy()[keep_idx] > 0
        elif return_masks and protos is not None:
            mask_arr = np.zeros((len(keep_idx), *hw), dtype=bool)
        out.append(ImageBoxes(det[keep_idx, :4], det[keep_idx, 4], cls[keep_idx], mask_arr))
    return out


def non_max_suppression(
    prediction: RawOutput, conf: float, iou: float, *, agnostic: bool, max_det: int, nc: int, end2end: bool,
    chunk: int | None = None,
) -> list[Tensor]:
    """ultralytics' ``non_max_suppression`` (no class filter, best class only, not rotated),
    with the same result. On a CPU the greedy NMS stops once ``max_det`` boxes are kept
    instead of running over every candidate (at 0.001 confidence, thousands):
    ``torchvision.ops.nms`` does the work on chunks of ``chunk`` candidates (default
    :data:`NMS_CHUNK`) in score order; a later chunk's candidates are first suppressed by
    the boxes kept so far, with torchvision's IoU arithmetic. On a GPU (default there: one
    chunk) each chunk costs host syncs that cost more than the arithmetic they save."""
    import torch
    import torchvision
    from ultralytics.utils import nms, ops

    if isinstance(prediction, (list, tuple)):
        prediction = prediction[0]
    if prediction.shape[-1] == 6 or end2end:  # end-to-end heads: a top-k, nothing to speed up
        kept: list[Tensor] = nms.non_max_suppression(
            prediction, conf, iou, None, agnostic, max_det=max_det, nc=nc, end2end=end2end
        )
        return kept
    nc = nc or (prediction.shape[1] - 4)
    extra = prediction.shape[1] - nc - 4
    if chunk is None:
        chunk = NMS_CHUNK if prediction.device.type == "cpu" else 1 << 62
    candidates = prediction[:, 4 : 4 + nc].amax(1) > conf
    out = []
    for x, cand in zip(prediction.transpose(-1, -2), candidates, strict=True):
        x = x[cand]
        x[:, :4] = ops.xywh2xyxy(x[:, :4])
        box, cls, mask = x.split((4, nc, extra), 1)
        best, j = cls.max(1, keepdim=True)
        # ultralytics filters ``best > conf`` again here: every candidate passes (``best`` is
        # the ``amax`` above), so that boolean index (a host sync) is left out
        x = torch.cat((box, best, j.float(), mask), 1)
        if not x.shape[0]:
            out.append(torch.zeros((0, 6 + extra), device=prediction.device))
            continue
        if x.shape[0] > 30000:  # ultralytics' max_nms
            x = x[x[:, 4].argsort(descending=True)[:30000]]
        offset = x[:, 5:6] * (0 if agnostic else 7680)  # ultralytics' max_wh: classes apart
        keep = _greedy_nms(x[:, :4] + offset, x[:, 4], iou, max_det, torchvision.ops.nms, chunk)
        out.append(x[keep])
    return out


def _greedy_nms(
    boxes: Tensor, scores: Tensor, iou: float, limit: int, nms_op: Callable[[Tensor, Tensor, float], Tensor],
    chunk_size: int = NMS_CHUNK,
) -> Tensor:
    """The first ``limit`` indices ``nms_op(boxes, scores, iou)`` keeps, computed chunk by chunk."""
    import torch

    if len(scores) <= chunk_size:  # one chunk: the kernel's own order, ultralytics' call
        return nms_op(boxes, scores, iou)[:limit]
    order = scores.sort(stable=True, descending=True).indices
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    kept: list[Tensor] = []
    n_kept = 0
    for chunk in order.split(chunk_size):
        if kept:  # suppressed by a box kept in an earlier chunk (torchvision's IoU, ">" suppresses)
            prev = torch.cat(kept)
            b, p = boxes[chunk], boxes[prev]
            w = (torch.minimum(p[:, None, 2], b[None, :, 2]) - torch.maximum(p[:, None, 0], b[None, :, 0]))
            h = (torch.minimum(p[:, None, 3], b[None, :, 3]) - torch.maximum(p[:, None, 1], b[None, :, 1]))
            inter = w.clamp(min=0) * h.clamp(min=0)
            overlap = inter / (area[prev][:, None] + area[chunk][None, :] - inter)
            chunk = chunk[~(overlap > iou).any(0)]
            if not len(chunk):
                continue
        keep = chunk[nms_op(boxes[chunk], scores[chunk], iou)]
        kept.append(keep)
        n_kept += len(keep)
        if n_kept >= limit:
            break
    if not kept:
        return order[:0]
    return torch.cat(kept)[:limit]




def nonempty_masks(
    protos: Tensor, coeffs: Tensor, boxes: Tensor, shape: tuple[int, int], group_size: int | None = None
) -> Tensor:
    """``process_mask(protos, coeffs, boxes, shape, upsample=True).amax((-2, -1)) > 0`` —
    whether each box's mask has a pixel inside the box (ultralytics' segment predictor keeps
    only those boxes) — without building the upsampled masks.

    The predictor's mask is the bilinear upsampling, by the integer factor ``s`` = input /
    prototype grid, of ``coeffs @ protos`` (computed here as the predictor computes it).
    Per box, on the window of prototype pixels its output pixels read:

    1. no positive value in the window -> empty (a bilinear value is a convex combination
       of window values);
    2. a cell of four positive neighbours whose output pixels meet the box -> not empty;
    3. otherwise the upsampled values decide. For a small case (``DIRECT_MASK_PIXELS``:
       steps 1 and 2 then run over the whole grid, all boxes at once), first a clearly
       positive value at a sampled output pixel inside the box -> not empty (one output
       line per prototype line, interpolated by two matrix products), then the predictor's
       own masks for the boxes still open. Otherwise (steps 1 and 2 on each box's window, in
       groups of similar size) only where the largest value over the box can be: within a
       cell the upsampling is bilinear in the output position, so on the first or last
       output row (column) of a cell or on a box edge.

    A box whose peak there lies within rounding distance of 0 (``MASK_RTOL`` of the largest
    possible term; the samples must exceed it) is decided by the predictor's own code, so
    the answer is always the predictor's.
    """
    import torch
    from ultralytics.utils import ops

    n = coeffs.shape[0]
    c, mh, mw = protos.shape
    h, w = shape
    if n == 0:
        return torch.zeros(0, dtype=torch.bool, device=coeffs.device)
    if h % mh or w % mw or h // mh != w // mw:  # not an integer upsampling: the predictor's own computation
        return ops.process_mask(protos, coeffs, boxes, shape, upsample=True).amax((-2, -1)) > 0
    s = h // mh
    dev = coeffs.device
    flat = protos.float().view(c, -1)
    masks = coeffs @ flat  # (n, mh * mw), as process_mask computes them
    scale = coeffs.float().abs() @ flat.abs().amax(1)  # the largest sum of |terms|: rounding margin
    # output pixels inside each box: ceil(a) <= r < b, clipped to the input
    x0 = boxes[:, 0].ceil().clamp(0, w).long()
    y0 = boxes[:, 1].ceil().clamp(0, h).long()
    x1 = (boxes[:, 2].ceil() - 1).clamp(-1, w - 1).long()
    y1 = (boxes[:, 3].ceil() - 1).clamp(-1, h - 1).long()
    # the prototype rows/cols those pixels read: floor((y + 0.5) / s - 0.5) and the next
    k_lo = torch.div(2 * y0 + 1 - s, 2 * s, rounding_mode="floor").clamp(0, mh - 1)
    k_hi = (torch.div(2 * y1 + 1 - s, 2 * s, rounding_mode="floor") + 1).clamp(0, mh - 1)
    l_lo = torch.div(2 * x0 + 1 - s, 2 * s, rounding_mode="floor").clamp(0, mw - 1)
    l_hi = (torch.div(2 * x1 + 1 - s, 2 * s, rounding_mode="floor") + 1).clamp(0, mw - 1)
    live = (x1 >= x0) & (y1 >= y0)  # a box with no pixel has an empty mask
    first, last = (s + 1) // 2, (s - 1) // 2  # output phase of a cell's first / last line
    if n * h * w <= DIRECT_MASK_PIXELS:  # small: steps 1 to 3 on the whole grid, all boxes at once
        pos = masks.view(n, mh, mw) > 0
        has_pos = live & _any_in(pos, (k_lo, k_hi), (l_lo, l_hi))
        # cells (k, k+1) x (l, l+1) of the window whose output lines meet the box:
        # s*k + first <= y1 and s*(k+1) + last >= y0
        quad = pos[:, :-1, :-1] & pos[:, 1:, :-1] & pos[:, :-1, 1:] & pos[:, 1:, 1:]
        ck = (torch.maximum(k_lo, -torch.div(last - y0, s, rounding_mode="floor") - 1),
              torch.minimum(k_hi - 1, torch.div(y1 - first, s, rounding_mode="floor")))
        cl = (torch.maximum(l_lo, -torch.div(last - x0, s, rounding_mode="floor") - 1),
              torch.minimum(l_hi - 1, torch.div(x1 - first, s, rounding_mode="floor")))
        result = has_pos & _any_in(quad, ck, cl)
        todo = (has_pos & ~result).nonzero()[:, 0]
        if len(todo):
            hit = _sampled_positive(masks[todo].view(-1, mh, mw), (y0[todo], y1[todo]), (x0[todo], x1[todo]),
                                    s, shape, MASK_RTOL * scale[todo])  # fmt: skip
            result[todo[hit]] = True
            todo = todo[~hit]
        if len(todo):
            exact = ops.process_mask(protos, coeffs[todo], boxes[todo], shape, upsample=True)
            result[todo] = exact.amax((-2, -1)) > 0
        return result
    result = torch.zeros(n, dtype=torch.bool, device=dev)
    unsure = torch.zeros(n, dtype=torch.bool, device=dev)
    live = live.nonzero()[:, 0]
    win_h, win_w = k_hi - k_lo + 1, l_hi - l_lo + 1
    live = live[torch.argsort(win_h[live] * win_w[live])]
    if group_size is None:
        group_size = MASK_GROUP if dev.type == "cpu" else max(MASK_GROUP, GPU_MASK_GROUP_CELLS // (mh * mw))
    for group in live.split(group_size):
        if not len(group):  # split() of an empty index gives one empty group
            continue
        hh, ww = (int(v) for v in torch.stack((win_h[group].max(), win_w[group].max())).tolist())  # one sync
        ar_h, ar_w = torch.arange(hh, device=dev), torch.arange(ww, device=dev)
        rows, cols = k_lo[group, None] + ar_h, l_lo[group, None] + ar_w
        in_h, in_w = rows <= k_hi[group, None], cols <= l_hi[group, None]  # the group pads windows
        pix = rows.clamp(max=mh - 1)[:, :, None] * mw + cols.clamp(max=mw - 1)[:, None, :]
        win = masks[group].gather(1, pix.view(len(group), -1)).view(len(group), hh, ww)
        pos = (win > 0) & in_h[:, :, None] & in_w[:, None, :]
        has_pos = pos.flatten(1).any(1)
        # cells (k, k+1) x (l, l+1) whose output lines meet the box: s*k + first <= y1 and
        # s*(k+1) + last >= y0
        ck = rows[:, :-1]
        cell_h = (s * ck + first <= y1[group, None]) & (s * (ck + 1) + last >= y0[group, None])
        cl = cols[:, :-1]
        cell_w = (s * cl + first <= x1[group, None]) & (s * (cl + 1) + last >= x0[group, None])
        quad = pos[:, :-1, :-1] & pos[:, 1:, :-1] & pos[:, :-1, 1:] & pos[:, 1:, 1:]
        sure = (quad & cell_h[:, :, None] & cell_w[:, None, :]).flatten(1).any(1)
        result[group] = has_pos & sure
        todo = (has_pos & ~sure).nonzero()[:, 0]
        if len(todo):
            peak = _window_peak(win[todo], group[todo], (y0, y1, k_lo), (x0, x1, l_lo), s, (mh, mw))
            result[group[todo]] = peak > 0
            unsure[group[todo]] = peak.abs() <= MASK_RTOL * scale[group[todo]]
    idx = unsure.nonzero()[:, 0]
    if len(idx):
        exact = ops.process_mask(protos, coeffs[idx], boxes[idx], shape, upsample=True)
        result[idx] = exact.amax((-2, -1)) > 0
    return result


def _any_in(flags: Tensor, rows: tuple[Tensor, Tensor], cols: tuple[Tensor, Tensor]) -> Tensor:
    """Per item i, whether ``flags[i]`` (n, H, W) holds a True in rows ``rows[0][i]`` to
    ``rows[1][i]`` and columns ``cols[0][i]`` to ``cols[1][i]`` (inclusive; an empty range: False)."""
    import torch

    _, hh, ww = flags.shape
    r, c = torch.arange(hh, device=flags.device), torch.arange(ww, device=flags.device)
    in_r = (r >= rows[0][:, None]) & (r <= rows[1][:, None])
    in_c = (c >= cols[0][:, None]) & (c <= cols[1][:, None])
    return (flags & in_r[:, :, None] & in_c[:, None, :]).flatten(1).any(1)


def _sampled_positive(masks: Tensor, ys: tuple[Tensor, Tensor], xs: tuple[Tensor, Tensor], s: int,
                      shape: tuple[int, int], tol: Tensor) -> Tensor:
    """Per mask (n, mh, mw), whether its upsampling is clearly positive (> ``tol``) at some
    output pixel of the box's rows ``ys`` and columns ``xs`` (inclusive) among those sampled:
    the first output line of every bilinear cell, one per prototype line. The values are
    interpolated with ``interpolate``'s weights in another order (``tol`` covers the
    rounding): a True is an output pixel of the box that the predictor finds positive."""
    n, mh, mw = masks.shape
    dev = str(masks.device)
    y_lines, rows = _sample_lines(shape[0], mh, s, dev)
    x_lines, cols = _sample_lines(shape[1], mw, s, dev)
    # two plain GEMMs: columns, then rows (n small batched products are much slower on a CPU)
    across = (masks.reshape(n * mh, mw) @ cols.T).view(n, mh, -1).transpose(0, 1).reshape(mh, -1)
    values = (rows @ across).view(len(y_lines), n, len(x_lines))  # (Y, n, X)
    in_y = (y_lines[:, None] >= ys[0]) & (y_lines[:, None] <= ys[1])  # (Y, n)
    in_x = (x_lines >= xs[0][:, None]) & (x_lines <= xs[1][:, None])  # (n, X)
    hot = (values > tol[None, :, None]) & in_x[None]
    return (hot.any(2) & in_y).any(0)


@functools.lru_cache(maxsize=16)
def _sample_lines(size: int, grid: int, s: int, device: str) -> tuple[Tensor, Tensor]:
    """The sampled output lines along one axis (the first line of every bilinear cell) and
    their interpolation matrix (lines x grid), as ``interpolate`` weighs them
    (align_corners=False: source = (y + 0.5) / s - 0.5, clamped at 0; the far neighbour
    clamped to the last prototype line)."""
    import torch

    lines = torch.arange(size, device=device)
    lines = lines[lines % s == (s + 1) // 2]  # most of its weight on one prototype line
    src = ((lines.double() + 0.5) / s - 0.5).clamp(min=0)
    k0 = src.floor().long().clamp(max=grid - 1)
    k1 = (k0 + 1).clamp(max=grid - 1)
    frac = (src - k0.double()).clamp(0, 1)
    mat = torch.zeros(len(lines), grid, dtype=torch.float64, device=device)
    at = torch.arange(len(lines), device=device)
    mat.index_put_((at, k0), 1 - frac, accumulate=True)
    mat.index_put_((at, k1), frac, accumulate=True)
    return lines, mat.float()


def _window_peak(
    win: Tensor, boxes: Tensor, ys: tuple[Tensor, Tensor, Tensor], xs: tuple[Tensor, Tensor, Tensor], s: int,
    grid: tuple[int, int],
) -> Tensor:
    """The largest upsampled mask value inside each box, from its prototype window ``win``:
    evaluated on the candidate lines of :func:`_corner_lines` only."""
    import torch

    (y0, y1, k_lo), (x0, x1, l_lo) = ys, xs
    lo_y, hi_y, lo_x, hi_x = y0[boxes], y1[boxes], x0[boxes], x1[boxes]
    spans = torch.stack((((hi_y - lo_y) // s).max(), ((hi_x - lo_x) // s).max())).tolist()  # one sync
    ok_y, ky0, ky1, ly = _corner_lines(lo_y, hi_y, s, grid[0], int(spans[0]) + 3)
    ok_x, kx0, kx1, lx = _corner_lines(lo_x, hi_x, s, grid[1], int(spans[1]) + 3)
    ky0, ky1 = ky0 - k_lo[boxes, None], ky1 - k_lo[boxes, None]  # window coordinates
    kx0, kx1 = kx0 - l_lo[boxes, None], kx1 - l_lo[boxes, None]
    ww = win.shape[2]
    top = win.gather(1, ky0[:, :, None].expand(-1, -1, ww))
    lines = top + (win.gather(1, ky1[:, :, None].expand(-1, -1, ww)) - top) * ly[..., None]
    left = lines.gather(2, kx0[:, None].expand(-1, lines.shape[1], -1))
    right = lines.gather(2, kx1[:, None].expand(-1, lines.shape[1], -1))
    values = left + (right - left) * lx[:, None]
    values.masked_fill_(~(ok_y[:, :, None] & ok_x[:, None, :]), float("-inf"))
    return values.amax((1, 2))


def _corner_lines(
    lo: Tensor, hi: Tensor, s: int, size: int, cells: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per box (output range [lo, hi] along one axis; ``cells``: at least the largest
    ``(hi - lo) // s`` + 3): the candidate output lines (the
    first and last line of every bilinear cell in range, and the two ends): whether each is
    in range, and its two source indices and weight, as ``interpolate`` computes them
    (align_corners=False: source = (y + 0.5) / s - 0.5, clamped at 0; the far neighbour
    clamped to the last prototype line)."""
    import torch

    first = (s + 1) // 2  # phase of a cell's first output line (source offset >= 0)
    last = (s - 1) // 2  # phase of a cell's last line (in the next prototype line's block)
    k = (lo[:, None] // s) - 1 + torch.arange(cells, device=lo.device)[None]
    lines = torch.cat([s * k + first, s * (k + 1) + last, lo[:, None], hi[:, None]], dim=1)
    ok = (lines >= lo[:, None]) & (lines <= hi[:, None])
    lines = torch.minimum(torch.maximum(lines, lo[:, None]), hi[:, None])
    src = ((lines.double() + 0.5) / s - 0.5).clamp(min=0)
    k0 = src.floor().long().clamp(max=size - 1)
    k1 = (k0 + 1).clamp(max=size - 1)
    weight = (src - k0.double()).clamp(0, 1).float()
    return ok, k0, k1, weight




def results_to_detections(r: Results, hw: tuple[int, int], masks: bool = False) -> Detections:
    """An ultralytics ``Results`` (any backend: PyTorch, ONNX, TensorRT engine) as Detections,
    at most 100 boxes per prompt, with ultralytics' own stage times."""
    t0 = time.perf_counter()
    boxes = r.boxes
    xyxy = boxes.xyxy.float().cpu().numpy()
    scores = boxes.conf.float().cpu().numpy()
    cls = boxes.cls.cpu().numpy().astype(np.int64)
    keep = cap_per_prompt(scores, cls, MAX_PER_PROMPT)
    mask_arr = None
    if masks and r.masks is not None:
        mask_arr = r.masks.data.cpu().numpy()[keep] > 0.5
    convert_ms = (time.perf_counter() - t0) * 1000.0
    speed = r.speed or {}  # ultralytics' own per-image stage times (CUDA-synchronised)
    timings = {
        "preprocess": speed.get("preprocess", 0.0),
        "forward": speed.get("inference", 0.0),
        "postprocess": speed.get("postprocess", 0.0) + convert_ms,
    }
    return Detections.from_arrays(
        xyxy[keep], scores[keep], cls[keep], image_size=hw, masks=mask_arr, timings_ms=timings
    )
