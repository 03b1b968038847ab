"""OWL-ViT and OWLv2 (transformers ``OwlViTForObjectDetection`` / ``Owlv2ForObjectDetection``).

Native interface: a list of text queries, one sigmoid logit per (patch box, query); the
processor's ``post_process_object_detection`` keeps, per box, its best query.

Text cache (per prompt): the text tower encodes each query on its own (``get_text_features``
with a per-query attention mask), so its output is cached per prompt text and a prompt set is
the stack of its prompts' rows: a new combination of known prompts runs no text tower. Each
frame runs only ``image_embedder`` + ``class_predictor`` + ``box_predictor`` — exactly the
computation of the model's ``forward`` minus the text tower.

Preprocessing: ``device`` (default) is :class:`probench.models.preprocess.Owlv2Pixels` for
OWLv2 (pad, anti-aliasing blur and resize as two matrix products per frame) and the
processor's own ops on the device tensor for OWL-ViT; ``reference`` is the processor.

Geometry: OWL-ViT resizes the image to a square (aspect not kept); OWLv2 pads it to a
square at the bottom/right, then resizes. The processors' post-processing undoes each
(OWLv2 scales boxes by ``max(h, w)``); boxes falling in OWLv2's padding are clipped to the
image.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.detections import Detections
from probench.models import hf_common as hf
from probench.models.base import TEXT_BATCH, StageTimer
from probench.models.head import ImageHead
from probench.models.spec import ModelSpec

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and transformers (pyproject)
    from torch import Tensor
    from torch.nn import Module
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase
    from transformers.image_processing_utils import BaseImageProcessor


def _tower(hidden: int, heads: int, layers: int = 12, **extra: int) -> dict[str, int]:
    """A CLIP transformer tower's config (the MLP is 4 x hidden wide in every OWL checkpoint)."""
    return {"hidden_size": hidden, "intermediate_size": 4 * hidden, "num_hidden_layers": layers,
            "num_attention_heads": heads, **extra}


_TEXT_B = _tower(512, 8, max_position_embeddings=16)
# Real-size configs (from the checkpoints' config.json), used for random_weights builds.
REAL_CONFIGS: dict[str, dict[str, Any]] = {
    "owlv2-b": {"text_config": _TEXT_B, "vision_config": _tower(768, 12, image_size=960, patch_size=16),
                "projection_dim": 512},
    "owlv2-l": {"text_config": _tower(768, 12, max_position_embeddings=16),
                "vision_config": _tower(1024, 16, 24, image_size=1008, patch_size=14), "projection_dim": 768},
    "owlvit": {"text_config": _TEXT_B, "vision_config": _tower(768, 12, image_size=768, patch_size=32),
               "projection_dim": 512},
}

TINY_IMAGE = 64


def _tiny_config(name: str) -> dict[str, Any]:
    patch = 16 if name == "owlvit" else 8  # keeps OWL-ViT's coarser grid than OWLv2's
    return {
        "text_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "max_position_embeddings": 16},
        "vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                          "num_attention_heads": 4, "image_size": TINY_IMAGE, "patch_size": patch},
        "projection_dim": 32,
    }


def _classes(
    spec: ModelSpec,
) -> tuple[type[PretrainedConfig], type[PreTrainedModel], type[BaseImageProcessor]]:
    """(config class, model class, image processor class) of the spec's OWL generation."""
    import transformers as tf

    if spec.name == "owlvit":
        return tf.OwlViTConfig, tf.OwlViTForObjectDetection, tf.OwlViTImageProcessor
    return tf.Owlv2Config, tf.Owlv2ForObjectDetection, tf.Owlv2ImageProcessor


def _image_processor(spec: ModelSpec, side: int) -> BaseImageProcessor:
    _, _, proc_cls = _classes(spec)
    size = {"height": side, "width": side}
    if spec.name == "owlvit":
        return proc_cls(size=size, crop_size=size, do_center_crop=False, resample=3)
    return proc_cls(size=size)


def _vocab_config(
    cfg: dict[str, Any], tokenizer: PreTrainedTokenizerBase, vocab_size: int | None = None
) -> dict[str, Any]:
    """Token ids of the generated tokenizer; ``vocab_size`` keeps a real-size embedding table."""
    cfg = {**cfg, "text_config": dict(cfg["text_config"])}
    cfg["text_config"].update(
        vocab_size=max(vocab_size or 0, len(tokenizer)), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    return cfg


class OwlDetector(hf.HFDetector):
    """One adapter for both OWL generations (their detection heads are the same code)."""

    text_cache = "per-prompt"
    text_cache_size = 4096  # query embeddings (D floats each); Pro-Bench asks ~1.5k distinct texts
    text_batch = TEXT_BATCH  # misses encoded in fixed-size batches: bit-reproducible (base.py)

    def _attach(self) -> None:
        model = self.model
        self._clip = getattr(model, "owlv2", None) or model.owlvit
        self.max_text_len = int(model.config.text_config.max_position_embeddings)
        import torch

        self._stack = torch.stack  # bound once: joining is on every prompt-set change

    def _encode_texts(self, prompts: tuple[str, ...]) -> list[Tensor]:
        import torch

        tok = self.tokenizer(
            list(prompts), padding="max_length", truncation=True, max_length=self.max_text_len,
            return_tensors="pt",
        )
        with torch.inference_mode():
            out = self._clip.get_text_features(
                input_ids=tok["input_ids"].to(self.dev), attention_mask=tok["attention_mask"].to(self.dev)
            )
        return list(out.pooler_output.clone())  # one (D,) row per query

    def _join_texts(self, items: list[object], prompts: tuple[str, ...]) -> Tensor:
        return self._stack(items)[None]  # (1, Q, D): shared by every image

    def image_head(self) -> ImageHead:
        """The per-frame network (:func:`owl_image_head`): pixels and the prompt set's
        query embeddings in, logits and boxes out. The same module is exported to ONNX."""
        import torch

        model, dtype, dev = self.model, self.dtype, self.dev
        side, dim = owl_geometry(model)

        def example(n_prompts: int) -> tuple[Tensor, Tensor]:
            return (torch.zeros(1, 3, side, side, dtype=dtype, device=dev),
                    torch.zeros(1, n_prompts, dim, dtype=dtype, device=dev))

        return ImageHead("owl", owl_image_head(model), HEAD_INPUTS, HEAD_OUTPUTS, example,
                         prompt_axes={"query_embeds": 1, "logits": 2})

    def _forward(self, pixel_values: Tensor, text: Tensor) -> tuple[Tensor, Tensor]:
        import torch

        with torch.inference_mode():
            logits, boxes = self.run_head(pixel_values, text)
        return logits, boxes

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        return self._run_many([image], text_state)[0]

    def _run_batch(self, images: list[np.ndarray], text_state: object) -> list[Detections]:
        """One forward for the whole batch; each result's timings are its share of the batch."""
        return self._run_many(images, text_state)

    def _run_many(self, images: list[np.ndarray], text: Tensor) -> list[Detections]:
        timer = StageTimer(sync=hf.cuda_sync(self.dev))
        with timer.stage("preprocess"):
            pv = self.pixel_inputs(images)["pixel_values"]
        with timer.stage("forward"):
            logits, boxes = self._forward(pv, text)
        with timer.stage("postprocess"):
            sizes = [(int(im.shape[0]), int(im.shape[1])) for im in images]
            outputs = SimpleNamespace(logits=logits.float(), pred_boxes=boxes.float())
            results = self.image_processor.post_process_object_detection(
                outputs, threshold=0.0, target_sizes=sizes
            )
            parts = []
            for res, size in zip(results, sizes, strict=True):
                scores = res["scores"].cpu().numpy()
                labels = res["labels"].cpu().numpy()
                keep = hf.cap_per_prompt(scores, labels)
                parts.append((res["boxes"].cpu().numpy()[keep], scores[keep], labels[keep], size))
        share = {k: v / len(images) for k, v in timer.timings_ms.items()}
        return [
            Detections.from_arrays(b, s, p, image_size=size, timings_ms=share) for b, s, p, size in parts
        ]


HEAD_INPUTS = ("pixel_values", "query_embeds")  # [B,3,S,S], [1,Q,D]
HEAD_OUTPUTS = ("logits", "pred_boxes")  # [B,P,Q], [B,P,4]


def owl_image_head(model: PreTrainedModel) -> Module:
    """A ``torch.nn.Module`` over ``model``'s per-frame computation: ``image_embedder`` ->
    ``class_predictor`` + ``box_predictor``, with the cached query embeddings as an input
    (the model's ``forward`` minus the text tower). The eager, compiled, ONNX Runtime and
    TensorRT paths all run this module or its export."""
    import torch

    # torch is not followed by mypy (pyproject: follow_imports = "skip"), so Module is Any here
    class OwlImageHead(torch.nn.Module):  # type: ignore[misc]
        def __init__(self, owl: PreTrainedModel) -> None:
            super().__init__()
            self.owl = owl

        def forward(self, pixel_values: Tensor, query_embeds: Tensor) -> tuple[Tensor, Tensor]:
            feature_map, _ = self.owl.image_embedder(pixel_values=pixel_values)
            b, gh, gw, d = feature_map.shape
            feats = feature_map.reshape(b, gh * gw, d)
            logits, _ = self.owl.class_predictor(feats, query_embeds.expand(b, -1, -1), None)
            return logits, self.owl.box_predictor(feats, feature_map)

    return OwlImageHead(model).eval()


def owl_geometry(model: PreTrainedModel) -> tuple[int, int]:
    """(image side, query embedding size) of an OWL model."""
    cfg = model.config
    return int(cfg.vision_config.image_size), int(cfg.projection_dim)


def _tame(model: PreTrainedModel) -> PreTrainedModel:
    """Random init saturates the tiny heads (scores ~1, degenerate boxes): shrink the last
    box layer and the logit shift/scale so boxes sit near each patch's prior box and scores
    spread over (0, 1) — closer to a trained model's output shape, still deterministic."""
    import torch

    with torch.no_grad():
        model.box_head.dense2.weight.mul_(0.02)
        model.class_head.logit_shift.weight.mul_(0.1)
        model.class_head.logit_scale.weight.mul_(0.1)
    return model


def _random(spec: ModelSpec, tiny: bool) -> hf.RandomBuild:
    """The tiny config (heads tamed) or the real-size one, with a generated CLIP tokenizer."""
    from probench.models.tiny_tokenizers import clip_tokenizer

    config_cls, model_cls, _ = _classes(spec)
    tokenizer = clip_tokenizer(pad_token="!")
    if tiny:
        cfg = _vocab_config(_tiny_config(spec.name), tokenizer)
        return hf.RandomBuild(
            tokenizer, lambda: _tame(model_cls(config_cls(**cfg))), _image_processor(spec, TINY_IMAGE)
        )
    real = _vocab_config(REAL_CONFIGS[spec.name], tokenizer, vocab_size=49408)  # CLIP's
    side = real["vision_config"]["image_size"]
    return hf.RandomBuild(tokenizer, lambda: model_cls(config_cls(**real)), _image_processor(spec, side))


_FACTORY = hf.HFFactory(OwlDetector, _random, lambda spec: _classes(spec)[1])
build, build_tiny = _FACTORY.build, _FACTORY.build_tiny  # the zoo's factories (specs_transformers)
