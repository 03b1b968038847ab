"""OmDet-Turbo (transformers ``OmDetTurboForObjectDetection``, checkpoint
``omlab/omdet-turbo-swin-tiny-hf``).

Native interface: a list of class names plus a task prompt; the published default task is
``"Detect {c1}, {c2}, ...."`` (the processor's own default), used here. Each of the 900
queries gets one sigmoid logit per class; the processor's post-processing takes the top
queries x classes, runs class-wise NMS (IoU 0.5, its default) and rescales the normalised
boxes to the image (the 640x640 input is a plain resize).

Text cache (per prompt set): OmDet-Turbo's text side is not per prompt. Each class name is
encoded on its own (cached per class by the model's own LRU, enlarged here to
``CLASS_CACHE`` entries), but the task prompt ``"Detect {c1}, {c2}, ...."`` is one sentence
whose token features (attended to by the decoder) depend on the whole set, so a new
combination of known classes still needs one text-encoder pass for its task sentence. The
detector's cache is therefore keyed by the prompt set (``Capabilities.text_cache =
"per-set"``); its state holds the class and task embeddings, the image head's inputs
(:meth:`OmDetTurboDetector.image_head`), so frames run no text encoder and no token-keyed
cache lookup.

The task sentence is encoded over its own tokens only, not the 77 padded positions the
model's ``get_language_embedding`` runs: the CLIP text tower is causal (a token attends to
those before it) and is called without a padding mask, so the features of the sentence's
tokens do not depend on the padding after them, and the model keeps only those. That
makes a new set's text stage several times cheaper (a Pro-Bench task sentence is ~15-25
tokens); the features equal the padded pass's up to matrix-kernel rounding.

Preprocessing: ``device`` (default) runs the processor's own resize / normalise on the
device tensor; ``reference`` is the processor.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from probench.detections import Detections
from probench.models import hf_common as hf
from probench.models.base import StageTimer
from probench.models.head import ImageHead, bucket_for, buckets_upto, fill_to, repeat_last
from probench.models.spec import ModelSpec

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and transformers (pyproject)
    from torch import Tensor
    from torch.nn import Module
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.image_processing_utils import BaseImageProcessor

    # OmDetTurboForObjectDetection.get_language_embedding: class embeddings, task embeddings, task mask
    Language = tuple[Tensor, Tensor, Tensor]

NMS_IOU = 0.5  # the processor's default
TEXT_LEN = 77  # the processor's text max_length
TASK_BUCKETS = buckets_upto(TEXT_LEN)  # the task sentence's token counts a compiled graph is made for
CLASS_CACHE = 4096  # class embeddings kept by the model's own LRU (transformers' default is 100)
TINY_IMAGE = 64
CLIP_PAD = "<|endoftext|>"  # OmDet's CLIP tokenizer pads with end-of-text


def task_prompt(prompts: tuple[str, ...]) -> str:
    """OmDet-Turbo's default task prompt (same as OmDetTurboProcessor's)."""
    return f"Detect {', '.join(prompts)}."


def _tiny_config(vocab: int, pad_id: int, bos: int, eos: int) -> tuple[dict[str, object], dict[str, object]]:
    # The text width must equal class_embed_dim and differ from the decoder width (32), as in
    # the real model (512 vs 256): transformers only builds the task projection then.
    text = {"model_type": "clip_text_model", "hidden_size": 48, "intermediate_size": 37,
            "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": vocab,
            "max_position_embeddings": TEXT_LEN, "pad_token_id": pad_id, "bos_token_id": bos,
            "eos_token_id": eos}
    cfg = {
        "text_config": text, "image_size": TINY_IMAGE, "text_projection_in_dim": 48,
        "text_projection_out_dim": 48, "task_encoder_hidden_dim": 48, "class_embed_dim": 48,
        "num_queries": 30, "encoder_hidden_dim": 32, "vision_features_channels": [32, 32, 32],
        "encoder_in_channels": [32, 64, 128], "encoder_attention_heads": 2,
        "encoder_dim_feedforward": 32, "decoder_hidden_dim": 32, "decoder_num_heads": 2,
        "decoder_num_layers": 2, "decoder_dim_feedforward": 32, "decoder_num_points": 2,
    }
    # A tiny timm Swin (the real model's backbone is timm swin_tiny_patch4_window7_224).
    timm_kwargs = {"img_size": TINY_IMAGE, "always_partition": True, "embed_dim": 16,
                   "depths": (1, 1, 1, 1), "num_heads": (1, 1, 2, 2), "window_size": 4}
    return cfg, timm_kwargs


def _real_config(vocab: int, pad_id: int, bos: int, eos: int) -> dict[str, object]:
    # The checkpoint's config.json: transformers' defaults are this checkpoint (Swin-T timm
    # backbone, CLIP ViT-B/32-size text tower, 900 queries, 640 px).
    text = {"model_type": "clip_text_model", "vocab_size": max(vocab, 49408), "pad_token_id": pad_id,
            "bos_token_id": bos, "eos_token_id": eos}
    return {"text_config": text}


class OmDetTurboDetector(hf.HFDetector):
    text_cache = "per-set"  # the task sentence is joint (module doc)
    text_cache_size = 256

    def _attach(self) -> None:
        from transformers.models.omdet_turbo.modeling_omdet_turbo import OmDetTurboLRUCache

        self.model.language_cache_class = OmDetTurboLRUCache(CLASS_CACHE)

    def _tokens(self, prompts: tuple[str, ...]) -> dict[str, Tensor]:
        import torch

        kw = {"padding": "max_length", "truncation": True, "max_length": TEXT_LEN, "return_tensors": "pt"}
        tasks = self.tokenizer([task_prompt(prompts)], **kw)
        classes = self.tokenizer(list(prompts), **kw)
        return {
            "tasks_input_ids": tasks["input_ids"].to(self.dev),
            "tasks_attention_mask": tasks["attention_mask"].to(self.dev),
            "classes_input_ids": classes["input_ids"].to(self.dev),
            "classes_attention_mask": classes["attention_mask"].to(self.dev),
            "classes_structure": torch.tensor([len(prompts)], dtype=torch.long, device=self.dev),
        }

    def _encode_prompts(self, prompts: tuple[str, ...]) -> Language:
        import torch

        tokens = self._tokens(prompts)
        with torch.inference_mode():  # class embeddings come from the model's per-class LRU
            classes = self.model.get_cached_class_embeddings(
                tokens["classes_input_ids"], tokens["classes_attention_mask"]
            ).unsqueeze(1)  # (C, 1, D): get_language_embedding's regrouping for one image
            task, task_mask = self._task_embedding(tokens["tasks_input_ids"], tokens["tasks_attention_mask"])
        return classes, task, task_mask

    def _task_embedding(self, ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The task sentence's token features (T, 1, D) and mask (1, T), encoded over its own
        T tokens (module doc: the tower is causal, so the padding changes nothing before it)."""
        n = int(mask[0].ne(0).sum())
        hidden = self.model.language_backbone.model(ids[:, :n])[0]  # what encode_type="task" keeps
        return hidden.transpose(0, 1), mask[:, :n]

    # -- image head -----------------------------------------------------------------------
    def image_head(self) -> ImageHead:
        """Pixels (1, 3, 640, 640) + class embeddings (C, 1, D), task embeddings (T, 1, D) and
        task mask (1, T) -> the decoder's boxes (1, Q, 4) cxcywh and class logits (1, Q, C).
        C grows with the prompts, T with the task sentence's tokens."""
        return ImageHead(
            family="omdet", module=omdet_head_module(self.model), input_names=HEAD_INPUTS,
            output_names=HEAD_OUTPUTS, example_inputs=self._example_inputs,
            prompt_axes={"class_features": 0, "task_features": 0, "task_mask": 1, "class_logits": 2},
            pad=pad_classes_and_task,
        )

    def _example_inputs(self, n_prompts: int) -> tuple[Tensor, ...]:
        import torch

        side = int(self.image_processor.size["height"])
        pv = self.pixel_inputs([np.zeros((side, side, 3), dtype=np.uint8)])["pixel_values"]
        with torch.inference_mode():
            language = self._encode_prompts(tuple(f"thing {i}" for i in range(n_prompts)))
        return (pv, *language)

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        import torch

        language: Language = text_state  # type: ignore[assignment]
        h, w = int(image.shape[0]), int(image.shape[1])
        timer = StageTimer(sync=hf.cuda_sync(self.dev))
        with timer.stage("preprocess"):
            pv = self.pixel_inputs([image])["pixel_values"]
        with timer.stage("forward"), torch.inference_mode():
            boxes, logits = self.run_head(pv, *language)
        with timer.stage("postprocess"):
            res = _post_process(boxes, logits, (h, w), len(self._prompts))
            keep = hf.cap_per_prompt(res["scores"], res["labels"])
        return Detections.from_arrays(
            res["boxes"][keep], res["scores"][keep], res["labels"][keep], image_size=(h, w),
            timings_ms=timer.timings_ms,
        )


def pad_classes_and_task(inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...] | None:
    """The compiled runtime's padding of a head call (``ImageHead.pad``): the classes and
    the task sentence's tokens grow apart, each to its own bucket (None above a last one).
    Classes: the last class repeated to a prompt bucket. Each class enters the decoder only
    through its own projection and similarity to the queries, and the query selection takes
    the max over classes, which a repeated class does not change; the runtime slices the
    logits back to the real classes. Task tokens: zero features with task mask 0, to a
    token bucket; the decoder's query-task self-attention masks them as keys."""
    pv, classes, task, task_mask = inputs
    n_classes = bucket_for(int(classes.shape[0]))
    n_tokens = bucket_for(int(task.shape[0]), TASK_BUCKETS)
    if n_classes is None or n_tokens is None:
        return None
    return pv, repeat_last(classes, 0, n_classes), fill_to(task, 0, n_tokens), fill_to(task_mask, 1, n_tokens)


HEAD_INPUTS = ("pixel_values", "class_features", "task_features", "task_mask")
HEAD_OUTPUTS = ("pred_boxes", "class_logits")


@functools.cache
def _head_module_cls() -> type[Module]:
    import torch

    # torch is not followed by mypy (pyproject: follow_imports = "skip"), so Module is Any here
    class Head(torch.nn.Module):  # type: ignore[misc]
        """``OmDetTurboForObjectDetection.forward`` with the language embeddings as inputs
        (vision backbone -> hybrid encoder -> decoder), returning its last decoder layer."""

        def __init__(self, model: PreTrainedModel) -> None:
            super().__init__()
            self.omdet = model

        def forward(
            self, pixel_values: Tensor, class_features: Tensor, task_features: Tensor, task_mask: Tensor
        ) -> tuple[Tensor, Tensor]:
            m = self.omdet
            encoded = m.encoder(m.vision_backbone(pixel_values), return_dict=True)
            decoded = m.decoder(encoded.extracted_states, class_features, task_features, task_mask,
                                return_dict=True)
            return decoded.decoder_coords[-1], decoded.decoder_classes[-1]

    return Head


def omdet_head_module(model: PreTrainedModel) -> Module:
    """The OmDet-Turbo image head module (torch imported lazily)."""
    return _head_module_cls()(model).eval()


def _post_process(
    coords: Tensor, class_logits: Tensor, size: tuple[int, int], n_classes: int
) -> dict[str, np.ndarray]:
    """The processor's post-processing (threshold 0, NMS 0.5), as numpy."""
    from transformers.models.omdet_turbo import processing_omdet_turbo as pp

    scores, labels = pp.compute_score(class_logits.float())
    boxes, scores, labels = pp._post_process_boxes_for_image(
        boxes=coords[0].float(), scores=scores[0], labels=labels,
        image_num_classes=n_classes, image_size=size, threshold=0.0, nms_threshold=NMS_IOU,
    )
    return {"boxes": boxes.cpu().numpy(), "scores": scores.cpu().numpy(), "labels": labels.cpu().numpy()}


def _image_processor(side: int) -> BaseImageProcessor:
    import transformers as tf

    # The checkpoint's preprocessor: DETR-style processor, plain resize to 640x640, no pad.
    return tf.DetrImageProcessor(size={"height": side, "width": side}, do_pad=False)


def _tok_ids(tokenizer: PreTrainedTokenizerBase) -> tuple[int, int, int, int]:
    return len(tokenizer), tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id


def _random(spec: ModelSpec, tiny: bool) -> hf.RandomBuild:
    """The tiny or the real-size config with a generated CLIP tokenizer."""
    import transformers as tf

    from probench.models.tiny_tokenizers import clip_tokenizer

    tokenizer = clip_tokenizer(pad_token=CLIP_PAD)
    if tiny:
        cfg, timm_kwargs = _tiny_config(*_tok_ids(tokenizer))
        config = tf.OmDetTurboConfig(**cfg)
        config.timm_kwargs = timm_kwargs  # read by OmDetTurboVisionBackbone -> timm.create_model
    else:
        config = tf.OmDetTurboConfig(**_real_config(*_tok_ids(tokenizer)))
    side = TINY_IMAGE if tiny else 640
    return hf.RandomBuild(tokenizer, lambda: tf.OmDetTurboForObjectDetection(config), _image_processor(side))


def _model_class(spec: ModelSpec) -> type[PreTrainedModel]:
    import transformers as tf

    cls: type[PreTrainedModel] = tf.OmDetTurboForObjectDetection
    return cls


_FACTORY = hf.HFFactory(OmDetTurboDetector, _random, _model_class)
build, build_tiny = _FACTORY.build, _FACTORY.build_tiny  # the zoo's factories (specs_transformers)
