"""Zoo entries of the transformers-backed Table II rows (light: no torch import).

Checkpoint mapping (paper row -> Hugging Face id). Where the paper does not name the
checkpoint, the choice and its uncertainty are in ``notes`` (and docs/MODELS.md).
"""

from __future__ import annotations

from probench.models.spec import AccelFamily, Backend, Capabilities, ModelSpec, TextCache

_BACKEND = Backend(
    "transformers", ("torch", "transformers"), "pip install torch transformers (the project venv has both)"
)


def _caps(
    *, masks: bool = False, batched: bool = True, text_cache: TextCache = "per-prompt",
    accel: AccelFamily = "head",
) -> Capabilities:
    # accel: the wrapper that exports the image path to ONNX (ONNX Runtime on CPU, TensorRT
    # FP16 on GPU): "owl" for the OWL family, "head" (the adapter's image head, exported
    # generically) for Grounding DINO / MM-GD / LLMDet, OmDet-T and SAM3.
    # batched: detect_batch runs several images in one forward (OWL only; the others loop).
    return Capabilities(
        masks=masks, batched=batched, onnx=True, tensorrt=True, text_cache=text_cache, accel=accel,
    )


def _spec(
    name: str, paper: str, family: str, checkpoint: str, module: str, caps: Capabilities, notes: str
) -> ModelSpec:
    return _BACKEND.spec(f"probench.models.{module}", name, paper, family, checkpoint, caps, notes)


SPECS: list[ModelSpec] = [
    _spec(
        "sam3-lite", "SAM3-Lite", "sam3", "vil-uob/sam3-litetext-s0", "sam3",
        _caps(masks=True, batched=False),
        "SAM3-LiteText (Zeng et al. 2026): SAM3 with a distilled MobileCLIP text encoder, "
        "transformers Sam3LiteTextModel. The paper does not say which variant; s0 is assumed "
        "(vil-uob/sam3-litetext-s1 also exists).",
    ),
    _spec(
        "owlv2-l", "OWLv2-L", "owl", "google/owlv2-large-patch14-ensemble", "owl", _caps(accel="owl"),
        "OWLv2 ViT-L/14, ensemble checkpoint, 1008 px input.",
    ),
    _spec(
        "owlv2-b", "OWLv2-B", "owl", "google/owlv2-base-patch16-ensemble", "owl", _caps(accel="owl"),
        "OWLv2 ViT-B/16, ensemble checkpoint, 960 px input. tiny-owlv2 is tiny-owlv2-b.",
    ),
    _spec(
        "sam3", "SAM3", "sam3", "facebook/sam3", "sam3", _caps(masks=True, batched=False),
        "SAM 3 (Carion et al. 2025), transformers Sam3Model: one text concept per prompt; "
        "gated checkpoint (accept the licence on the hub before `hf download`).",
    ),
    _spec(
        "omdet-turbo", "OmDet-T", "omdet", "omlab/omdet-turbo-swin-tiny-hf", "omdet",
        _caps(batched=False, text_cache="per-set"),
        "OmDet-Turbo Swin-T, classes + task prompt 'Detect {classes}.' Text cache per prompt set: "
        "class names are encoded one by one (and cached per class), but the task sentence, whose "
        "token features the decoder attends to, depends on the whole set.",
    ),
    _spec(
        "owlvit", "OWL-ViT", "owl", "google/owlvit-base-patch32", "owl", _caps(accel="owl"),
        "OWL-ViT ViT-B/32, 768 px input.",
    ),
    _spec(
        "grounding-dino-s-t", "G-DINO-S-T", "grounding-dino", "IDEA-Research/grounding-dino-base",
        "grounding_dino", _caps(batched=False, text_cache="per-set"),
        "UNCERTAIN mapping: the paper lists G-DINO-S-T next to G-DINO-T without a checkpoint. "
        "IDEA-Research publishes only grounding-dino-tiny (Swin-T) and grounding-dino-base "
        "(Swin-B) on the hub; S-T is taken to be the larger one (its latency, 294.8 ms vs "
        "201.6 ms for G-DINO-T, fits a bigger backbone). Override with --weights if your "
        "reading differs.",
    ),
    _spec(
        "grounding-dino-t", "G-DINO-T", "grounding-dino", "IDEA-Research/grounding-dino-tiny",
        "grounding_dino", _caps(batched=False, text_cache="per-set"),
        "Grounding DINO Swin-T (OGC), transformers GroundingDinoForObjectDetection.",
    ),
    _spec(
        "llmdet-l", "LLMDet-L", "mm-grounding-dino", "iSEE-Laboratory/llmdet_large",
        "grounding_dino", _caps(batched=False, text_cache="per-set"),
        "LLMDet Swin-L; transformers loads it with the MM Grounding DINO classes "
        "(MMGroundingDinoForObjectDetection); inference identical to MM-GD.",
    ),
    _spec(
        "mm-grounding-dino-l", "MM-G-D-L", "mm-grounding-dino",
        "openmmlab-community/mm_grounding_dino_large_o365v2_oiv6_goldg", "grounding_dino",
        _caps(batched=False, text_cache="per-set"),
        "MM Grounding DINO Swin-L pre-trained on O365v2+OIv6+GoldG (the large checkpoint "
        "without COCO-style fine-tuning data; *_large_all is the other public one).",
    ),
    _spec(
        "mm-grounding-dino-t", "MM-G-D-T", "mm-grounding-dino",
        "openmmlab-community/mm_grounding_dino_tiny_o365v1_goldg_v3det", "grounding_dino",
        _caps(batched=False, text_cache="per-set"),
        "MM Grounding DINO Swin-T, O365v1+GoldG+V3Det (transformers' reference tiny "
        "checkpoint); the paper does not name the pre-training mix, so this is assumed.",
    ),
]
