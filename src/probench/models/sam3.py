"""SAM 3 and SAM3-LiteText (transformers ``Sam3Model`` / ``Sam3LiteTextModel`` with
``Sam3Processor``'s image processor; both share the interface).

Native interface: one text concept per forward ("promptable concept segmentation"): the
model returns up to 200 instances (boxes, masks, logits, plus a presence logit) for that
concept. Here each prompt is one concept, and every prompt of the set runs in one batched
call of the image head (:meth:`Sam3Detector.image_head`: pixels + the prompts' text
features and masks -> logits, boxes, presence, masks), the image features computed once
per frame inside it and broadcast over the prompt axis. (Before, prompts ran in Python
chunks of 16, each chunk one forward.) Memory grows with a call's prompts (the mask
decoder's output is prompts x 200 masks), so sets above ``PROMPTS_PER_CALL`` run in calls
of that many. Scores = sigmoid(logit) x
sigmoid(presence), the processor's ``post_process_object_detection`` (or
``post_process_instance_segmentation`` when masks are requested). The 1008x1008 input is
a plain resize, undone by the post-processing.

Text cache (per prompt): each concept is tokenised and encoded on its own (one row of
``get_text_features``, with its own attention mask), so the cache holds one (features,
mask) pair per prompt text and a prompt set stacks its rows: a new combination of known
prompts runs no text encoder. Text is tokenised as the processor does (CLIP BPE,
``max_length=32``), with truncation so a long prompt cannot overflow the 32 positions.

Preprocessing: ``device`` (default) runs the processor's own resize / normalise on the
device tensor; ``reference`` is the processor.

Masks: returned only when ``return_masks=True`` on the detector (bool, original image
size): at 100 boxes per prompt they cost prompts x 100 x H x W bytes per frame, and the
benchmark scores boxes.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import TYPE_CHECKING

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

TEXT_LEN = 32  # Sam3Processor's max_length
# Prompts per head call. A call's activations grow with its prompts (real size: about 33 MB
# of mask logits per prompt at fp16), so a larger set is run in calls of this many, each
# re-running the vision encoder: memory stays bounded up to MAX_PROMPTS. Pro-Bench's label
# spaces and an operator's prompts fit one call.
PROMPTS_PER_CALL = 64
HEAD_INPUTS = ("pixel_values", "text_features", "attention_mask")
HEAD_OUTPUTS = ("pred_logits", "pred_boxes", "presence_logits", "pred_masks")
MASK_THRESHOLD = 0.5  # the processor's default
TINY_IMAGE = 112  # 8x8 patches of 14 px


def _lite(spec: ModelSpec) -> bool:
    return spec.name == "sam3-lite"


def _classes(spec: ModelSpec) -> tuple[type[PretrainedConfig], type[PreTrainedModel]]:
    import transformers as tf

    if _lite(spec):
        return tf.Sam3LiteTextConfig, tf.Sam3LiteTextModel
    return tf.Sam3Config, tf.Sam3Model


def _tiny_config(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase) -> dict[str, object]:
    backbone = {"model_type": "sam3_vit_model", "hidden_size": 32, "num_hidden_layers": 2,
                "num_attention_heads": 2, "intermediate_size": 64, "image_size": TINY_IMAGE,
                "patch_size": 14, "window_size": 4, "global_attn_indexes": [1]}
    vision = {"model_type": "sam3_vision_model", "backbone_config": backbone, "fpn_hidden_size": 32,
              "scale_factors": [2.0, 1.0]}
    text = {"vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64,
            "projection_dim": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "max_position_embeddings": TEXT_LEN, "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    if _lite(spec):
        text["repmixer_kernel_size"] = 3
    small = {"hidden_size": 32, "num_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    return {
        "vision_config": vision,
        "text_config": text,
        "geometry_encoder_config": dict(small),
        "detr_encoder_config": dict(small),
        "detr_decoder_config": {**small, "num_queries": 20},
        "mask_decoder_config": {"hidden_size": 32, "num_upsampling_stages": 2, "num_attention_heads": 2},
    }


def _real_config(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase) -> dict[str, object]:
    # transformers' defaults are the published architectures (ViT-H/14 at 1008 px, DETR
    # encoder/decoder, mask decoder). The text tower is spelled out: a partial dict would be
    # completed with plain CLIP defaults, not SAM3's.
    ids = {"vocab_size": max(49408, len(tokenizer)), "pad_token_id": tokenizer.pad_token_id,
           "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    if _lite(spec):
        return {"text_config": ids}  # Sam3LiteTextTextConfig's own defaults (MobileCLIP-style)
    text = {"model_type": "clip_text_model", "hidden_size": 1024, "intermediate_size": 4096,
            "projection_dim": 512, "num_hidden_layers": 24, "num_attention_heads": 16,
            "max_position_embeddings": TEXT_LEN, "hidden_act": "gelu", **ids}
    return {"text_config": text}


class Sam3Detector(hf.HFDetector):
    text_cache = "per-prompt"
    text_cache_size = 2048  # (32 x D) token features per prompt
    text_batch = TEXT_BATCH  # misses encoded in fixed-size batches: bit-reproducible (base.py)

    def _attach(self) -> None:
        self.return_masks = False

    def _encode_texts(self, prompts: tuple[str, ...]) -> list[tuple[Tensor, Tensor]]:
        import torch

        tok = self.tokenizer(
            list(prompts), padding="max_length", truncation=True, max_length=TEXT_LEN, return_tensors="pt"
        )
        ids, mask = tok["input_ids"].to(self.dev), tok["attention_mask"].to(self.dev)
        with torch.inference_mode():
            feats = self.model.get_text_features(input_ids=ids, attention_mask=mask).pooler_output.clone()
        return [(feats[i], mask[i]) for i in range(len(prompts))]

    def _join_texts(self, items: list[object], prompts: tuple[str, ...]) -> tuple[Tensor, Tensor]:
        import torch

        pairs: list[tuple[Tensor, Tensor]] = items  # type: ignore[assignment]
        return torch.stack([f for f, _ in pairs]), torch.stack([m for _, m in pairs])

    def image_head(self) -> ImageHead:
        """Pixels (1, 3, S, S) + every prompt's text features (N, 32, D) and mask (N, 32) ->
        pred_logits (N, Q), pred_boxes (N, Q, 4) xyxy, presence_logits (N, 1), pred_masks
        (N, Q, h, w): all prompts in one call, N the prompt axis."""
        return ImageHead(
            family="sam3", module=sam3_head_module(self.model), input_names=HEAD_INPUTS,
            output_names=HEAD_OUTPUTS, example_inputs=self._example_inputs,
            prompt_axes={"text_features": 0, "attention_mask": 0, "pred_logits": 0, "pred_boxes": 0,
                         "presence_logits": 0, "pred_masks": 0},
        )

    def _example_inputs(self, n_prompts: int) -> tuple[Tensor, ...]:
        feats, mask = self._join_texts(
            list(self._encode_texts(tuple(f"thing {i}" for i in range(n_prompts)))), ()
        )
        side = int(self.image_processor.size["height"])
        pv = self.pixel_inputs([np.zeros((side, side, 3), dtype=np.uint8)])["pixel_values"]
        return pv, feats, mask

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        import torch

        state: tuple[Tensor, Tensor] = text_state  # type: ignore[assignment]
        feats, mask = state
        h, w = int(image.shape[0]), int(image.shape[1])
        n = feats.shape[0]
        timer = StageTimer(sync=hf.cuda_sync(self.dev))
        with timer.stage("preprocess"):
            pv = self.pixel_inputs([image])["pixel_values"]
        with timer.stage("forward"), torch.inference_mode():
            calls = [self.run_head(pv, feats[a:a + PROMPTS_PER_CALL], mask[a:a + PROMPTS_PER_CALL])
                     for a in range(0, n, PROMPTS_PER_CALL)]
            logits, boxes_n, presence, pred_masks = (
                parts[0] if len(parts) == 1 else torch.cat(parts) for parts in zip(*calls, strict=True)
            )
        with timer.stage("postprocess"):
            out = SimpleNamespace(
                pred_logits=logits.float(), pred_boxes=boxes_n.float(), presence_logits=presence.float(),
                pred_masks=pred_masks.float() if self.return_masks else None,
            )
            sizes = [(h, w)] * n
            if self.return_masks:
                res = self.image_processor.post_process_instance_segmentation(
                    out, threshold=0.0, mask_threshold=MASK_THRESHOLD, target_sizes=sizes
                )
            else:
                res = self.image_processor.post_process_object_detection(
                    out, threshold=0.0, target_sizes=sizes
                )
            boxes, scores, labels, masks = [], [], [], []
            for i, r in enumerate(res):
                s = r["scores"].cpu().numpy()
                keep = hf.cap_per_prompt(s, np.zeros(len(s), dtype=np.int64))
                boxes.append(r["boxes"].cpu().numpy()[keep])
                scores.append(s[keep])
                labels.append(np.full(len(keep), i, dtype=np.int64))
                if self.return_masks:
                    masks.append(r["masks"].cpu().numpy()[keep].astype(bool))
            all_masks = np.concatenate(masks) if self.return_masks else None
        return Detections.from_arrays(
            np.concatenate(boxes), np.concatenate(scores), np.concatenate(labels), image_size=(h, w),
            masks=all_masks, timings_ms=timer.timings_ms,
        )


@functools.cache
def _head_module_cls() -> type[Module]:
    import torch
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    # torch is not followed by mypy (pyproject: follow_imports = "skip"), so Module is Any here
    class Head(torch.nn.Module):  # type: ignore[misc]
        """``Sam3Model.forward`` for N text concepts against one image: the vision encoder runs
        once, its feature maps broadcast (expand, no copy) over the N prompts."""

        def __init__(self, model: PreTrainedModel) -> None:
            super().__init__()
            self.sam = model

        def forward(
            self, pixel_values: Tensor, text_features: Tensor, attention_mask: Tensor
        ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
            vision = self.sam.get_vision_features(pixel_values)
            n = text_features.shape[0]
            vis = type(vision)(
                fpn_hidden_states=tuple(t.expand(n, *t.shape[1:]) for t in vision.fpn_hidden_states),
                fpn_position_encoding=tuple(t.expand(n, *t.shape[1:]) for t in vision.fpn_position_encoding),
            )
            text = BaseModelOutputWithPooling(pooler_output=text_features)
            out = self.sam(vision_embeds=vis, text_embeds=text, attention_mask=attention_mask)
            return out.pred_logits, out.pred_boxes, out.presence_logits, out.pred_masks

    return Head


def sam3_head_module(model: PreTrainedModel) -> Module:
    """The SAM3 image head module (torch imported lazily)."""
    return _head_module_cls()(model).eval()


def _image_processor(side: int) -> BaseImageProcessor:
    import transformers as tf

    return tf.Sam3ImageProcessor(size={"height": side, "width": side})


def _random(spec: ModelSpec, tiny: bool) -> hf.RandomBuild:
    """The tiny or the real-size config with a generated CLIP tokenizer."""
    from probench.models.tiny_tokenizers import clip_tokenizer

    config_cls, model_cls = _classes(spec)
    tokenizer = clip_tokenizer(pad_token="<|endoftext|>")
    cfg = _tiny_config(spec, tokenizer) if tiny else _real_config(spec, tokenizer)
    side = TINY_IMAGE if tiny else 1008
    return hf.RandomBuild(tokenizer, lambda: model_cls(config_cls(**cfg)), _image_processor(side))


_FACTORY = hf.HFFactory(Sam3Detector, _random, lambda spec: _classes(spec)[1])
build, build_tiny = _FACTORY.build, _FACTORY.build_tiny  # the zoo's factories (specs_transformers)
