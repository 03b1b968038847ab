"""The ensemble's fusion: per operator prompt, the boxes every formulation of it found,
merged by class-wise non-maximum suppression (IoU 0.5), at most ``max_per_prompt`` kept.

NMS rather than weighted box fusion: it keeps each kept box exactly as one formulation
predicted it (so the scored boxes are model outputs, not averages), needs no per-model
weights, and ``torchvision.ops.batched_nms`` (already a dependency of every detector) does
it in one call. torch is imported only when boxes are fused, i.e. next to a loaded detector.
"""

from __future__ import annotations

import numpy as np

from probench.detections import Detections

FUSION_IOU = 0.5
MAX_PER_PROMPT = 100  # COCO maxDets, the detectors' own per-prompt limit


def fuse(dets: Detections, iou: float = FUSION_IOU, max_per_prompt: int = MAX_PER_PROMPT) -> Detections:
    """``dets`` whose ``prompt_index`` already names the operator prompt: class-wise NMS per
    prompt, highest scores first, at most ``max_per_prompt`` per prompt."""
    if len(dets) == 0:
        return dets
    import torch
    from torchvision.ops import batched_nms

    keep = batched_nms(torch.from_numpy(dets.xyxy), torch.from_numpy(dets.scores),
                       torch.from_numpy(dets.prompt_index), float(iou)).numpy()
    # batched_nms returns kept indices by decreasing score; cap per prompt, keep that order
    counts: dict[int, int] = {}
    capped = []
    for k in keep:
        p = int(dets.prompt_index[k])
        if counts.get(p, 0) < max_per_prompt:
            counts[p] = counts.get(p, 0) + 1
            capped.append(int(k))
    return dets.filter(np.asarray(capped, dtype=np.int64))
