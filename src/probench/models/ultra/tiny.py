"""Random-weight ultralytics models: the real architecture from its YAML with seeded random
weights, BatchNorm statistics calibrated on seeded random batches (:func:`calibrate_batchnorm`)
and the contrastive head's bias at -4 (:data:`TINY_HEAD_BIAS`), with the deterministic
stand-in text encoder :class:`~probench.models.ultra_text.HashTextEncoder`. Used by the
``tiny-*`` variants and by ``random_weights`` builds of the real-size models."""

from __future__ import annotations

from typing import TYPE_CHECKING

from probench.models.hf_common import seeded
from probench.models.specs_ultralytics import UltraArch
from probench.models.ultra.weights import Kind, model_class
from probench.models.ultra_text import TINY_SEED, HashTextEncoder

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and ultralytics (pyproject)
    from torch import device as TorchDevice
    from ultralytics import YOLOE, YOLOWorld

TINY_HEAD_BIAS = -4.0  # ultralytics' training init is -10: random tiny models would keep ~no box


def random_model(arch: UltraArch, dev: TorchDevice) -> tuple[YOLOWorld | YOLOE, HashTextEncoder]:
    """The architecture with seeded random weights, calibrated BatchNorm and the tiny head
    bias (without them every score is ~0 and NMS would have no box to work on), on ``dev``,
    and its hash text encoder."""
    model = build_random(arch, TINY_SEED)
    calibrate_batchnorm(model, arch["kind"], arch["tiny_imgsz"])
    set_head_bias(model, TINY_HEAD_BIAS)
    model.model.to(dev)
    return model, HashTextEncoder(embed_dim(model, arch["kind"]))


def build_random(arch: UltraArch, seed: int) -> YOLOWorld | YOLOE:
    """The architecture from its YAML with seeded random weights (no file is read)."""
    cls = model_class(arch["kind"])
    with seeded(seed):
        model = cls(arch["yaml"])
    model.model.eval()
    return model


def set_head_bias(model: YOLOWorld | YOLOE, bias: float) -> None:
    import torch
    from ultralytics.nn.modules.block import BNContrastiveHead, ContrastiveHead

    with torch.no_grad():
        for m in model.model.modules():
            if isinstance(m, (ContrastiveHead, BNContrastiveHead)):
                m.bias.fill_(bias)


def calibrate_batchnorm(model: YOLOWorld | YOLOE, kind: Kind, imgsz: int, seed: int = TINY_SEED) -> None:
    """Set BatchNorm running statistics from two seeded random batches. With the default
    (mean 0, var 1) statistics, activations of a randomly initialised deep YOLO shrink
    layer by layer to ~1e-9 and every output is the same; normalised, they stay alive."""
    import torch

    inner = model.model
    bns = [m for m in inner.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    feats = HashTextEncoder(embed_dim(model, kind), seed)([f"calibration {i}" for i in range(4)])
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


def embed_dim(model: YOLOWorld | YOLOE, kind: Kind) -> int:
    if kind == "world":
        return int(model.model.txt_feats.shape[-1])
    return int(model.model.model[-1].embed)
