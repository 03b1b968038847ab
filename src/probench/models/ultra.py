"""Ultralytics adapters: YOLO-World v2 and YOLOE (Table II rows YOLO-W-S/X, YOLOE-S/X).

Native prompt interface: a class vocabulary. The prompts are embedded by a text encoder
(CLIP ViT-B/32 for YOLO-World, MobileCLIP(2) for YOLOE) and the embeddings are the model's
classes. Ultralytics is imported here only, forced offline (no downloads, no auto-install).

Text cache (per prompt): each prompt is embedded on its own (YOLOE's RepRTA adapter is
applied per row too), so the cache holds one embedding per prompt text; a prompt set is
the stack of its rows. Applying a vocabulary is separate from encoding and cheap: the
stacked embeddings are set on the fused model (YOLO-World ``txt_feats``, YOLOE ``pe``) and
the head's class count follows; no predictor rebuild, no dummy prediction.

Per frame, two paths (``preprocess``):

- ``device`` (default): :class:`probench.models.preprocess.Letterbox` on the model's
  device, the model's forward, and box-only post-processing: ultralytics' own NMS and box
  scaling. For the -seg models (YOLOE) no mask is built unless ``return_masks`` is set;
  ultralytics' segment predictor also drops every box whose mask is empty, and
  :func:`nonempty_masks` reproduces that decision from the prototype masks at their own
  resolution (exact; the full-size masks are built only for the rare boxes the cheap tests
  cannot decide), so boxes and scores are the predictor's.
- ``reference``: ultralytics' predictor as published (letterbox with OpenCV, NMS, masks
  at 0.001 confidence and the empty-mask filter).

Tiny variants (``tiny-yolo-world-s`` ...): the real architecture from its YAML, seeded random
weights, a small inference size, and a deterministic stand-in text encoder
(:class:`HashTextEncoder`). Their BatchNorm statistics are calibrated on seeded random
batches (:func:`_calibrate_batchnorm`): without that, a randomly initialised deep YOLO
outputs the same score everywhere. Their contrastive-head bias is -4 instead of ultralytics'
training init (-10), so that random weights keep enough boxes to test with.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probench.detections import Detections
from probench.models.base import TEXT_BATCH, BaseDetector, StageTimer
from probench.models.errors import BackendUnavailableError, ModelError, WeightsNotFoundError
from probench.models.hf_common import (
    MAX_PER_PROMPT,
    cap_per_prompt,
    cuda_sync,
    resolve_device,
    seeded,
)
from probench.models.spec import ModelSpec
from probench.models.specs_ultralytics import UltraArch
from probench.models.ultra_text import (  # re-exported: the adapter's text side
    TINY_SEED,
    ClipTextEncoder,
    HashTextEncoder,
    MobileClipTextEncoder,
)

MIN_CONF = 0.001  # what "keep what the native post-processing keeps" means for ultralytics
TINY_HEAD_BIAS = -4.0  # ultralytics' training init is -10: random tiny models would keep ~no box
# prompts -> (1, n, D) embeddings (a torch tensor): the encoders of probench.models.ultra_text
TextEncoder = Callable[[Sequence[str]], Any]


def import_ultralytics() -> Any:
    """Import ultralytics with downloads and auto-install switched off (also if it was
    imported before with other settings)."""
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_AUTOINSTALL"] = "false"
    os.environ.setdefault("YOLO_VERBOSE", "false")
    # Checkpoints are pickles: restricted (weights_only + allow-list) loading unless the user opts out.
    os.environ.setdefault("ULTRALYTICS_SAFE_LOAD", "1")
    try:
        import ultralytics
        import ultralytics.nn.tasks as tasks
        import ultralytics.utils as uutils
        from ultralytics.utils import checks
    except ImportError as exc:
        raise BackendUnavailableError(
            f"ultralytics is not importable ({exc}); pip install ultralytics"
        ) from exc
    uutils.ONLINE = checks.ONLINE = False
    checks.AUTOINSTALL = uutils.AUTOINSTALL = False
    tasks.SAFE_LOAD = os.environ["ULTRALYTICS_SAFE_LOAD"].lower() in ("1", "true")
    return ultralytics


# -- the detector ------------------------------------------------------------------------------
NMS_IOU = 0.7  # ultralytics' predictor default (class-agnostic for YOLOE, as YOLOE.predict sets it)
STRIDE = 32  # ultralytics' AutoBackend: max(model stride, 32)


class UltralyticsDetector(BaseDetector):
    """A YOLO-World or YOLOE model behind the probench Detector interface."""

    text_cache = "per-prompt"
    text_cache_size = 4096  # prompt embeddings (D floats each)
    text_batch = TEXT_BATCH  # misses encoded in fixed-size batches: bit-reproducible (base.py)

    def __init__(
        self,
        name: str,
        model: Any,
        kind: str,
        text_encoder: TextEncoder,
        *,
        imgsz: int,
        device: Any,
        half: bool = False,
        score_threshold: float = 0.0,
        masks: bool = False,
        weights_source: str = "",
        preprocess: str = "device",
    ) -> None:
        import torch

        from probench.models.preprocess import Letterbox, Uploader, check_preprocess

        super().__init__(device=str(device), score_threshold=score_threshold)
        if kind not in ("world", "yoloe"):
            raise ModelError(f"unknown ultralytics model kind {kind!r}")
        self.name, self.model, self.kind = name, model, kind
        self.text_encoder = text_encoder
        self.imgsz, self.half, self.return_masks = int(imgsz), bool(half), bool(masks)
        self._torch_device = torch.device(device)
        self.weights_source = weights_source
        self.conf = max(MIN_CONF, self.score_threshold)
        self.preprocess = check_preprocess(preprocess)
        # Fused once, as ultralytics' predictor fuses its model; the reference path's predictor
        # deep-copies this fused network (its own fuse is then a no-op), so both paths run
        # the same weights.
        self.net = model.model
        self.net.fuse(verbose=False)
        self.net.to(self._torch_device).eval()
        if self.half:
            self.net.half()
        if _channels_last_cpu(self._torch_device):
            # ultralytics' AutoBackend does this for PyTorch models on x86 CPUs (faster oneDNN
            # convolutions); the same layout keeps both paths' numbers identical
            self.net.to(memory_format=torch.channels_last)
        self._param = next(self.net.parameters())
        self.segment = "Segment" in type(self.net.model[-1]).__name__
        self._upload = Uploader(self._torch_device)
        self._letterbox = Letterbox(self.imgsz, STRIDE, self._torch_device, self._param.dtype)

    # -- text side: encode per prompt (cached), apply a vocabulary per switch (cheap) ---------
    def _encode_texts(self, prompts: tuple[str, ...]) -> list[Any]:
        import torch

        with torch.inference_mode():
            feats = self.text_encoder(prompts).to(self._torch_device)  # (1, n, D)
            if self.kind == "yoloe":  # the RepRTA adapter + L2 norm, row-wise
                feats = self.net.model[-1].get_tpe(feats.to(self._param.dtype))
        return list(feats[0].clone())

    def _join_texts(self, items: list[object], prompts: tuple[str, ...]) -> Any:
        import torch

        feats = torch.stack(items)[None].to(self._param.dtype)  # (1, n, D)
        self._apply_vocabulary(feats, prompts)
        return feats

    def _apply_vocabulary(self, feats: Any, prompts: tuple[str, ...]) -> None:
        """The prompt set's embeddings become the model's classes (the head reads them at
        every forward). ultralytics' predictor, if the reference path built one, runs its own
        fused copy of the network: that copy gets the same vocabulary in place."""
        names = dict(enumerate(prompts))
        backend = getattr(getattr(self.model, "predictor", None), "model", None)
        live = getattr(backend, "model", None)
        for net in (self.net, live):
            if net is None:
                continue
            if self.kind == "world":
                net.txt_feats = feats
            else:
                net.pe = feats
            net.model[-1].nc = len(prompts)
            net.names = names
        if backend is not None:
            backend.names = names

    # -- per frame ---------------------------------------------------------------------------
    def _predict(self, images_bgr: list[np.ndarray], n_prompts: int) -> list[Any]:
        results: list[Any] = self.model.predict(
            images_bgr if len(images_bgr) > 1 else images_bgr[0],
            imgsz=self.imgsz, conf=self.conf, max_det=MAX_PER_PROMPT * n_prompts,
            device=self.device, verbose=False, retina_masks=self.return_masks,
            **({"quantize": 16} if self.half else {}),  # ultralytics' FP16 switch ("half" is deprecated)
        )
        return results

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        return self._run_many([image])[0]

    def _run_batch(self, images: list[np.ndarray], text_state: object) -> list[Detections]:
        """One batched forward for all images (same prompts for all)."""
        return self._run_many(images)

    def pixel_inputs(self, images: Sequence[Any]) -> dict[str, Any]:
        """The network input for ``images`` by the detector's path: the device letterbox, or
        ultralytics' own (OpenCV ``LetterBox``, as its predictor prepares a batch)."""
        import torch

        if self.preprocess == "device":
            return {"pixel_values": self._letterbox(self._upload(images))}
        from ultralytics.data.augment import LetterBox

        from probench.models.preprocess import as_numpy_rgb

        frames = [as_numpy_rgb(im) for im in images]
        box = LetterBox(self.imgsz, auto=len({f.shape for f in frames}) == 1, stride=STRIDE)
        batch = np.stack([np.asarray(box(image=f)) for f in frames])  # image only: an array
        x = torch.from_numpy(batch).to(self._torch_device).permute(0, 3, 1, 2)
        return {"pixel_values": (x.to(self._param.dtype) / 255.0).contiguous()}

    def _run_many(self, images: list[Any]) -> list[Detections]:
        try:
            if self.preprocess == "reference":
                return self._run_reference(images)
            return self._run_device(images)
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"{self.name}: ultralytics inference failed: {exc}") from exc

    def _run_reference(self, images: list[Any]) -> list[Detections]:
        # ultralytics reads numpy images as BGR (OpenCV convention); ours are RGB.
        bgr = [np.ascontiguousarray(im[..., ::-1]) for im in images]
        results = self._predict(bgr, len(self._prompts))
        return [
            results_to_detections(r, (int(im.shape[0]), int(im.shape[1])), self.return_masks)
            for r, im in zip(results, images, strict=True)
        ]

    def _run_device(self, images: list[Any]) -> list[Detections]:
        import torch

        timer = StageTimer(sync=cuda_sync(self._torch_device))
        with timer.stage("preprocess"):
            x = self.pixel_inputs(images)["pixel_values"]
        with timer.stage("forward"), torch.inference_mode():
            preds = self.net(x)
        with timer.stage("postprocess"):
            sizes = [(int(im.shape[0]), int(im.shape[1])) for im in images]
            parts = self.postprocess(preds, tuple(x.shape[2:]), sizes)
        share = {k: v / len(images) for k, v in timer.timings_ms.items()}
        return [
            Detections.from_arrays(b, s, c, image_size=hw, masks=m, timings_ms=share)
            for (b, s, c, m), hw in zip(parts, sizes, strict=True)
        ]

    def postprocess(
        self, preds: Any, input_hw: tuple[int, int], sizes: list[tuple[int, int]]
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]:
        """Raw network output -> per image (boxes in original pixels, scores, prompt index,
        masks or None): ultralytics' predictor's NMS, empty-mask filter and box scaling, with
        no mask built unless ``return_masks`` (module doc)."""
        from ultralytics.utils import ops

        n_classes = len(self._prompts)
        raw = preds[0] if self.segment else preds
        protos = None
        if self.segment:
            protos = preds[0][1] if isinstance(preds[0], tuple) else preds[1]
        kept = non_max_suppression(
            raw, self.conf, NMS_IOU, agnostic=self.kind == "yoloe", max_det=MAX_PER_PROMPT * n_classes,
            nc=n_classes if self.segment else 0, end2end=bool(getattr(self.net, "end2end", False)),
        )
        out = []
        for i, (pred, hw) in enumerate(zip(kept, sizes, strict=True)):
            masks = None
            if protos is not None and len(pred):
                if self.return_masks:
                    pred[:, :4] = ops.scale_boxes(input_hw, pred[:, :4], hw)
                    full = ops.process_mask_native(protos[i], pred[:, 6:], pred[:, :4], hw)
                    keep = full.amax((-2, -1)) > 0
                    pred, masks = pred[keep], full[keep]
                else:
                    pred = pred[nonempty_masks(protos[i], pred[:, 6:], pred[:, :4], input_hw)]
                    pred[:, :4] = ops.scale_boxes(input_hw, pred[:, :4], hw)
            else:
                pred[:, :4] = ops.scale_boxes(input_hw, pred[:, :4], hw)
            det = pred[:, :6].float().cpu().numpy()
            cls = det[:, 5].astype(np.int64)
            keep_idx = cap_per_prompt(det[:, 4], cls, MAX_PER_PROMPT)
            mask_arr = None
            if masks is not None:
                mask_arr = masks.cpu().numpy()[keep_idx] > 0
            elif self.return_masks and protos is not None:
                mask_arr = np.zeros((len(keep_idx), *hw), dtype=bool)
            out.append((det[keep_idx, :4], det[keep_idx, 4], cls[keep_idx], mask_arr))
        return out


NMS_CHUNK = 1024  # candidates per step of non_max_suppression's early-stopping greedy NMS


def non_max_suppression(
    prediction: Any, conf: float, iou: float, *, agnostic: bool, max_det: int, nc: int, end2end: bool,
) -> list[Any]:
    """ultralytics' ``non_max_suppression`` (no class filter, best class only, not rotated),
    with the same result, but the greedy NMS stops once ``max_det`` boxes are kept instead of
    running over every candidate (at 0.001 confidence, thousands). ``torchvision.ops.nms``
    does the work on chunks of the candidates in score order; a later chunk's candidates are
    first suppressed by the boxes kept so far, with torchvision's IoU arithmetic."""
    import torch
    import torchvision
    from ultralytics.utils import nms, ops

    if isinstance(prediction, (list, tuple)):
        prediction = prediction[0]
    if prediction.shape[-1] == 6 or end2end:  # end-to-end heads: a top-k, nothing to speed up
        kept: list[Any] = nms.non_max_suppression(prediction, conf, iou, None, agnostic, max_det=max_det,
                                                  nc=nc, end2end=end2end)
        return kept
    nc = nc or (prediction.shape[1] - 4)
    extra = prediction.shape[1] - nc - 4
    candidates = prediction[:, 4 : 4 + nc].amax(1) > conf
    out = []
    for x, cand in zip(prediction.transpose(-1, -2), candidates, strict=True):
        x = x[cand]
        x[:, :4] = ops.xywh2xyxy(x[:, :4])
        box, cls, mask = x.split((4, nc, extra), 1)
        best, j = cls.max(1, keepdim=True)
        x = torch.cat((box, best, j.float(), mask), 1)[best.view(-1) > conf]
        if not x.shape[0]:
            out.append(torch.zeros((0, 6 + extra), device=prediction.device))
            continue
        if x.shape[0] > 30000:  # ultralytics' max_nms
            x = x[x[:, 4].argsort(descending=True)[:30000]]
        offset = x[:, 5:6] * (0 if agnostic else 7680)  # ultralytics' max_wh: classes apart
        keep = _greedy_nms(x[:, :4] + offset, x[:, 4], iou, max_det, torchvision.ops.nms)
        out.append(x[keep])
    return out


def _greedy_nms(boxes: Any, scores: Any, iou: float, limit: int, nms_op: Callable[..., Any]) -> Any:
    """The first ``limit`` indices ``nms_op(boxes, scores, iou)`` keeps, computed chunk by chunk."""
    import torch

    order = scores.sort(stable=True, descending=True).indices
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    kept: list[Any] = []
    n_kept = 0
    for chunk in order.split(NMS_CHUNK):
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


def _channels_last_cpu(dev: Any) -> bool:
    """AutoBackend's rule: channels-last weights on an x86 CPU with oneDNN (Linux/Windows)."""
    import platform

    import torch

    return (
        dev.type == "cpu" and platform.machine() in {"AMD64", "x86_64"} and platform.system() != "Darwin"
        and torch.backends.mkldnn.is_available() and bool(torch.backends.mkldnn.enabled)
    )


def nonempty_masks(protos: Any, coeffs: Any, boxes: Any, shape: tuple[int, int]) -> Any:
    """``process_mask(protos, coeffs, boxes, shape, upsample=True).amax((-2, -1)) > 0`` —
    whether each box's mask has a pixel inside the box (ultralytics' segment predictor keeps
    only those boxes) — without building the upsampled masks.

    The predictor's mask is the bilinear upsampling, by the integer factor ``s`` = input /
    prototype grid, of ``coeffs @ protos`` (computed here as the predictor computes it).
    Per box, on the window of prototype pixels its output pixels read:

    1. no positive value in the window -> empty (a bilinear value is a convex combination
       of window values);
    2. a cell of four positive neighbours whose output pixels meet the box -> not empty;
    3. otherwise the upsampled values are evaluated, but only where the largest one over
       the box can be: within a cell the upsampling is bilinear in the output position,
       so on the first or last output row (column) of a cell or on a box edge.

    A box whose step-3 peak lies within rounding distance of 0 (``MASK_RTOL`` of the
    largest possible term) is decided by the predictor's own code, so the answer is
    always the predictor's.
    """
    import torch
    from ultralytics.utils import ops

    n = coeffs.shape[0]
    c, mh, mw = protos.shape
    h, w = shape
    if n == 0:
        return torch.zeros(0, dtype=torch.bool, device=coeffs.device)
    if n * h * w <= DIRECT_MASK_PIXELS or h % mh or w % mw or h // mh != w // mw:
        # small, or not an integer upsampling: the predictor's own computation
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
    result = torch.zeros(n, dtype=torch.bool, device=dev)
    unsure = torch.zeros(n, dtype=torch.bool, device=dev)
    live = ((x1 >= x0) & (y1 >= y0)).nonzero()[:, 0]  # a box with no pixel has an empty mask
    win_h, win_w = k_hi - k_lo + 1, l_hi - l_lo + 1
    live = live[torch.argsort(win_h[live] * win_w[live])]
    first, last = (s + 1) // 2, (s - 1) // 2  # output phase of a cell's first / last line
    for group in live.split(MASK_GROUP):
        if not len(group):  # split() of an empty index gives one empty group
            continue
        hh, ww = int(win_h[group].max()), int(win_w[group].max())
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
    if bool(unsure.any()):
        idx = unsure.nonzero()[:, 0]
        exact = ops.process_mask(protos, coeffs[idx], boxes[idx], shape, upsample=True)
        result[idx] = exact.amax((-2, -1)) > 0
    return result


def _window_peak(
    win: Any, boxes: Any, ys: tuple[Any, Any, Any], xs: tuple[Any, Any, Any], s: int, grid: tuple[int, int]
) -> Any:
    """The largest upsampled mask value inside each box, from its prototype window ``win``:
    evaluated on the candidate lines of :func:`_corner_lines` only."""
    (y0, y1, k_lo), (x0, x1, l_lo) = ys, xs
    ok_y, ky0, ky1, ly = _corner_lines(y0[boxes], y1[boxes], s, grid[0])
    ok_x, kx0, kx1, lx = _corner_lines(x0[boxes], x1[boxes], s, grid[1])
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


def _corner_lines(lo: Any, hi: Any, s: int, size: int) -> tuple[Any, Any, Any, Any]:
    """Per box (output range [lo, hi] along one axis): the candidate output lines (the
    first and last line of every bilinear cell in range, and the two ends): whether each is
    in range, and its two source indices and weight, as ``interpolate`` computes them
    (align_corners=False: source = (y + 0.5) / s - 0.5, clamped at 0; the far neighbour
    clamped to the last prototype line)."""
    import torch

    first = (s + 1) // 2  # phase of a cell's first output line (source offset >= 0)
    last = (s - 1) // 2  # phase of a cell's last line (in the next prototype line's block)
    cells = int(((hi - lo) // s).max()) + 3
    k = (lo[:, None] // s) - 1 + torch.arange(cells, device=lo.device)[None]
    lines = torch.cat([s * k + first, s * (k + 1) + last, lo[:, None], hi[:, None]], dim=1)
    ok = (lines >= lo[:, None]) & (lines <= hi[:, None])
    lines = torch.minimum(torch.maximum(lines, lo[:, None]), hi[:, None])
    src = ((lines.double() + 0.5) / s - 0.5).clamp(min=0)
    k0 = src.floor().long().clamp(max=size - 1)
    k1 = (k0 + 1).clamp(max=size - 1)
    weight = (src - k0.double()).clamp(0, 1).float()
    return ok, k0, k1, weight


MASK_GROUP = 32  # boxes evaluated together (sorted by size, padded to the group's largest)
MASK_RTOL = 1e-5  # |peak| below this x (sum of |terms|) goes to the exact step (float32: ~1e-6)
DIRECT_MASK_PIXELS = 1 << 22  # below this many mask pixels (boxes x H x W) the masks are just built


def results_to_detections(r: Any, hw: tuple[int, int], masks: bool = False) -> Detections:
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

# -- factories (zoo contract) --------------------------------------------------------------------
def _arch(spec: ModelSpec) -> UltraArch:
    from probench.models.specs_ultralytics import ARCH

    try:
        return ARCH[spec.name]
    except KeyError as exc:
        raise ModelError(f"{spec.name} is not an ultralytics zoo model") from exc


def _model_class(kind: str) -> Any:
    import_ultralytics()
    from ultralytics import YOLOE, YOLOWorld

    return YOLOWorld if kind == "world" else YOLOE


def _build_random(arch: UltraArch, seed: int) -> Any:
    """The architecture from its YAML with seeded random weights (no file is read)."""
    cls = _model_class(arch["kind"])
    with seeded(seed):
        model = cls(arch["yaml"])
    model.model.eval()
    return model


def _set_head_bias(model: Any, bias: float) -> None:
    import torch
    from ultralytics.nn.modules.block import BNContrastiveHead, ContrastiveHead

    with torch.no_grad():
        for m in model.model.modules():
            if isinstance(m, (ContrastiveHead, BNContrastiveHead)):
                m.bias.fill_(bias)


def _calibrate_batchnorm(model: Any, kind: str, imgsz: int, seed: int = TINY_SEED) -> None:
    """Set BatchNorm running statistics from two seeded random batches. With the default
    (mean 0, var 1) statistics, activations of a randomly initialised deep YOLO shrink
    layer by layer to ~1e-9 and every output is the same; normalised, they stay alive."""
    import torch

    inner = model.model
    bns = [m for m in inner.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    feats = HashTextEncoder(_embed_dim(model, kind), seed)([f"calibration {i}" for i in range(4)])
    if kind == "world":
        inner.model[-1].nc = feats.shape[1]  # the head's class count follows the vocabulary
    gen = torch.Generator().manual_seed(seed)
    inner.train()
    try:
        with torch.no_grad():
            for _ in range(2):
                x = torch.rand(2, 3, imgsz, imgsz, generator=gen)
                inner.predict(x, txt_feats=feats) if kind == "world" else inner.predict(x, tpe=feats)
    finally:
        inner.eval()
        for m in bns:
            m.momentum = 0.1


def _embed_dim(model: Any, kind: str) -> int:
    if kind == "world":
        return int(model.model.txt_feats.shape[-1])
    return int(model.model.model[-1].embed)


def build_tiny(
    spec: ModelSpec, *, device: str = "cpu", precision: str = "fp32", score_threshold: float = 0.0,
    preprocess: str = "device",
) -> UltralyticsDetector:
    """``tiny-<name>``: real architecture, seeded random weights, small input, hash text encoder."""
    dev, _ = resolve_device(device, precision)
    arch = _arch(spec)
    model = _build_random(arch, TINY_SEED)
    _calibrate_batchnorm(model, arch["kind"], arch["tiny_imgsz"])
    _set_head_bias(model, TINY_HEAD_BIAS)
    model.model.to(dev)
    return UltralyticsDetector(
        f"tiny-{spec.name}", model, arch["kind"], HashTextEncoder(_embed_dim(model, arch["kind"])),
        imgsz=arch["tiny_imgsz"], device=dev, half=precision == "fp16", score_threshold=score_threshold,
        weights_source="tiny config, random init (deterministic seed)", preprocess=preprocess,
    )


def build(
    spec: ModelSpec,
    *,
    device: str = "cpu",
    precision: str = "fp32",
    score_threshold: float = 0.0,
    weights: str | None = None,
    random_weights: bool = False,
    preprocess: str = "device",
) -> UltralyticsDetector:
    """The real model from local files (``weights``: the checkpoint file or a folder holding
    it and its text encoder), or the real-size architecture with random weights."""
    dev, _ = resolve_device(device, precision)
    arch = _arch(spec)
    if random_weights:
        if weights:
            from probench.errors import UsageError

            raise UsageError("give either weights or random_weights, not both")
        model = _build_random(arch, TINY_SEED)
        # as the tiny variants: without this every score is ~0 and NMS (part of the
        # measured latency) would have no box to work on
        _calibrate_batchnorm(model, arch["kind"], arch["tiny_imgsz"])
        _set_head_bias(model, TINY_HEAD_BIAS)
        model.model.to(dev)
        encoder: TextEncoder = HashTextEncoder(_embed_dim(model, arch["kind"]))
        source = "random init (real-size config)"
    else:
        ckpt = find_checkpoint(spec.checkpoint, weights)
        cls = _model_class(arch["kind"])
        try:
            model = cls(str(ckpt))
        except (TypeError, RuntimeError, KeyError, ValueError) as exc:
            raise ModelError(f"{spec.name}: cannot load {ckpt}: {exc}") from exc
        model.model.to(dev).eval()
        encoder = _real_text_encoder(model, arch["kind"], ckpt.parent, weights, dev)
        source = str(ckpt)
    return UltralyticsDetector(
        spec.name, model, arch["kind"], encoder, imgsz=arch["imgsz"], device=dev,
        half=precision == "fp16", score_threshold=score_threshold, weights_source=source,
        preprocess=preprocess,
    )


def _search_dirs(weights: str | None) -> list[Path]:
    dirs = []
    if weights and Path(weights).is_dir():
        dirs.append(Path(weights))
    elif weights:
        dirs.append(Path(weights).parent)
    dirs.append(Path.cwd())
    try:
        from ultralytics.utils import SETTINGS  # where ultralytics keeps downloaded weights

        dirs.append(Path(SETTINGS["weights_dir"]))
    except (ImportError, KeyError):
        pass
    return list(dict.fromkeys(d.resolve() for d in dirs))


def find_checkpoint(checkpoint: str, weights: str | None) -> Path:
    """The local checkpoint file, or :class:`WeightsNotFoundError` saying where it was sought."""
    import_ultralytics()
    if weights and Path(weights).is_file():
        return Path(weights).resolve()
    if weights and not Path(weights).exists():
        raise WeightsNotFoundError(f"--weights {weights}: no such file or folder")
    dirs = _search_dirs(weights)
    for d in dirs:
        if (d / checkpoint).is_file():
            return (d / checkpoint).resolve()
    raise WeightsNotFoundError(
        f"{checkpoint} not found in {', '.join(map(str, dirs))}; on a networked machine download it "
        f"from https://github.com/ultralytics/assets/releases and pass --weights FILE_OR_DIR"
    )


def _real_text_encoder(model: Any, kind: str, ckpt_dir: Path, weights: str | None, dev: Any) -> TextEncoder:
    from probench.models.specs_ultralytics import TEXT_ENCODERS

    variant = "clip:ViT-B/32" if kind == "world" else getattr(model.model, "text_model", "mobileclip:blt")
    fname = TEXT_ENCODERS.get(variant)
    if fname is None:
        raise ModelError(f"unknown text encoder {variant!r} in the checkpoint's config")
    dirs = list(dict.fromkeys([ckpt_dir, *_search_dirs(weights)]))
    if kind == "world":
        dirs += [d / "clip" for d in dirs]  # ultralytics keeps CLIP under weights_dir/clip
    for d in dirs:
        if (d / fname).is_file():
            path = d / fname
            return ClipTextEncoder(path, dev) if kind == "world" else MobileClipTextEncoder(path, dev)
    raise WeightsNotFoundError(
        f"text encoder {fname} ({variant}) not found in {', '.join(map(str, dirs))}; put it next to "
        "the checkpoint (ultralytics assets release, or openaipublic CLIP for ViT-B-32.pt)"
    )


def weights_present(spec: ModelSpec) -> bool:
    """Whether the checkpoint is in the working folder or ultralytics' weights folder. Light
    on purpose (``probench models`` calls it for every row): reads ultralytics' settings
    file instead of importing ultralytics (and torch)."""
    dirs = [Path.cwd()]
    cfg = os.environ.get("YOLO_CONFIG_DIR")
    settings = (Path(cfg) if cfg else Path.home() / ".config" / "Ultralytics") / "settings.json"
    try:
        weights_dir = json.loads(settings.read_text()).get("weights_dir")
    except (OSError, ValueError, AttributeError):
        weights_dir = None
    if isinstance(weights_dir, str):
        dirs.append(Path(weights_dir))
    return any((d / spec.checkpoint).is_file() for d in dirs)
