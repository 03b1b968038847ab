"""Zoo entries of the ultralytics-backed Table II rows (light: no torch/ultralytics import).

Checkpoint mapping (paper row -> ultralytics asset):

- YOLO-W-S / YOLO-W-X: YOLO-World v2, ``yolov8s-worldv2.pt`` / ``yolov8x-worldv2.pt``;
  text encoder CLIP ViT-B/32 (``ViT-B-32.pt``, OpenAI CLIP).
- YOLOE-S / YOLOE-X: ``yoloe-26s-seg.pt`` / ``yoloe-26x-seg.pt``. YOLOE-v8 and YOLOE-11
  ship only S/M/L sizes; the only published X-size YOLOE is YOLOE-26, so both rows use the
  YOLOE-26 generation for a consistent pair. Text encoder MobileCLIP2-B
  (``mobileclip2_b.ts``). ``--weights yoloe-11s-seg.pt`` (or v8) also works: the text
  encoder is read from the checkpoint's own config (MobileCLIP-B(LT), ``mobileclip_blt.ts``).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from probench.models.spec import Backend, Capabilities, ModelSpec

_MODULE = "probench.models.ultra.adapter"
_BACKEND = Backend("ultralytics", ("torch", "ultralytics"), (
    "pip install ultralytics (the project venv has it); real weights: put the checkpoint "
    "and its text encoder in a folder (see docs/ACCELERATION.md) and pass --weights DIR"
))


class UltraArch(TypedDict):
    """The ultralytics class (``world``: YOLOWorld, ``yoloe``: YOLOE), the architecture YAML
    of the checkpoint, the inference size of the real model and the one of the tiny variant."""

    kind: Literal["world", "yoloe"]
    yaml: str
    imgsz: int
    tiny_imgsz: int


# Per zoo name; read by the ultra package (probench.models.ultra).
ARCH: dict[str, UltraArch] = {
    "yolo-world-s": {"kind": "world", "yaml": "yolov8s-worldv2.yaml", "imgsz": 640, "tiny_imgsz": 128},
    "yolo-world-x": {"kind": "world", "yaml": "yolov8x-worldv2.yaml", "imgsz": 640, "tiny_imgsz": 64},
    "yoloe-s": {"kind": "yoloe", "yaml": "yoloe-26s-seg.yaml", "imgsz": 640, "tiny_imgsz": 128},
    "yoloe-x": {"kind": "yoloe", "yaml": "yoloe-26x-seg.yaml", "imgsz": 640, "tiny_imgsz": 64},
}

# Text encoder file each family needs next to the checkpoint (ultralytics' own names).
TEXT_ENCODERS = {
    "clip:ViT-B/32": "ViT-B-32.pt",
    "mobileclip:blt": "mobileclip_blt.ts",
    "mobileclip2:b": "mobileclip2_b.ts",
}


def _caps(masks: bool) -> Capabilities:
    # onnx / tensorrt: ultralytics' own export with the vocabulary baked in (TensorRT
    # untested here: no GPU).
    return Capabilities(
        masks=masks, batched=True, onnx=True, tensorrt=True, text_cache="per-prompt", accel="ultralytics"
    )


def _spec(name: str, paper: str, family: str, checkpoint: str, masks: bool, notes: str) -> ModelSpec:
    return _BACKEND.spec(_MODULE, name, paper, family, checkpoint, _caps(masks), notes)


SPECS: list[ModelSpec] = [
    _spec(
        "yolo-world-s", "YOLO-W-S", "yolo-world", "yolov8s-worldv2.pt", False,
        "YOLO-World v2 S (YOLOv8-S backbone), 640 px; vocabulary embedded with CLIP ViT-B/32 "
        "(ViT-B-32.pt must be local). tiny-yolo-world-s: the real S architecture at 128 px, "
        "random weights.",
    ),
    _spec(
        "yolo-world-x", "YOLO-W-X", "yolo-world", "yolov8x-worldv2.pt", False,
        "YOLO-World v2 X, 640 px; CLIP ViT-B/32 text encoder. tiny-yolo-world-x: the real X "
        "architecture at 64 px, random weights.",
    ),
    _spec(
        "yoloe-s", "YOLOE-S", "yoloe", "yoloe-26s-seg.pt", True,
        "YOLOE-26 S (seg), 640 px, MobileCLIP2-B text encoder (mobileclip2_b.ts). ASSUMED "
        "generation: YOLOE-26 chosen so S and X come from one family (only YOLOE-26 has an "
        "X); pass --weights yoloe-11s-seg.pt for YOLOE-11. Boxes only unless masks are asked.",
    ),
    _spec(
        "yoloe-x", "YOLOE-X", "yoloe", "yoloe-26x-seg.pt", True,
        "YOLOE-26 X (seg), 640 px, MobileCLIP2-B text encoder. The only published X-size YOLOE. "
        "tiny-yoloe-x: the real X architecture at 64 px, random weights.",
    ),
]
