"""Text encoders of the ultralytics adapters: prompts -> ``(1, n, D)`` float32 L2-normalised
features, the input of YOLO-World's ``txt_feats`` / YOLOE's text-prompt head.

Real ones load local files only (CLIP ViT-B/32 for YOLO-World, MobileCLIP(2) TorchScript for
YOLOE) and need ultralytics' ``clip`` module for tokenising; the tiny variants use
:class:`HashTextEncoder`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from probench.models.errors import ModelError, import_backend

if TYPE_CHECKING:  # names for the checker only: mypy skips torch (pyproject)
    from collections.abc import Callable

    from torch import Tensor
    from torch import device as TorchDevice

    # prompts -> (1, n, D) embeddings: any encoder of this module
    TextEncoder = Callable[[Sequence[str]], Tensor]

TINY_SEED = 0
CLIP_HINT = "pip install git+https://github.com/ultralytics/CLIP.git (the `clip` module)"


class HashTextEncoder:
    """The tiny variants' text encoder: a fixed random vector per prompt text, seeded by a
    hash of the text (the same vector in every process and in every prompt set)."""

    def __init__(self, dim: int, seed: int = TINY_SEED) -> None:
        self.dim, self.seed = int(dim), int(seed)

    def __call__(self, prompts: Sequence[str]) -> Tensor:
        import torch

        rows = []
        for p in prompts:
            digest = hashlib.sha256(f"{self.seed}:{p}".encode()).digest()
            v = np.random.default_rng(int.from_bytes(digest[:8], "little")).standard_normal(self.dim)
            rows.append(v / np.linalg.norm(v))
        return torch.from_numpy(np.stack(rows)[None].astype(np.float32))


class ClipTextEncoder:
    """OpenAI CLIP text tower from a local file (what YOLO-World's ``set_classes`` uses)."""

    def __init__(self, path: Path, device: TorchDevice) -> None:
        clip = _import_clip()
        self.clip, self.device = clip, device
        self.model, _ = clip.load(str(path), device=device, jit=False)
        self.model.eval()

    def __call__(self, prompts: Sequence[str]) -> Tensor:
        import torch

        with torch.inference_mode():
            tokens = self.clip.tokenize(list(prompts), truncate=True).to(self.device)
            feats = self.model.encode_text(tokens).float()
            return (feats / feats.norm(p=2, dim=-1, keepdim=True))[None].clone()


class MobileClipTextEncoder:
    """MobileCLIP(2) TorchScript text encoder from a local file (what YOLOE uses); the
    normalisation is inside the TorchScript graph."""

    def __init__(self, path: Path, device: TorchDevice) -> None:
        import torch

        self.clip, self.device = _import_clip(), device
        try:
            self.encoder = torch.jit.load(str(path), map_location=device)
        except RuntimeError as exc:
            raise ModelError(f"cannot load text encoder {path}: {exc}") from exc

    def __call__(self, prompts: Sequence[str]) -> Tensor:
        import torch

        with torch.inference_mode():
            tokens = self.clip.tokenize(list(prompts), truncate=True).to(self.device)
            return self.encoder(tokens).float()[None].clone()


def _import_clip() -> ModuleType:
    return import_backend("clip", lambda exc: f"the real YOLO-World/YOLOE text encoders need {CLIP_HINT}")
