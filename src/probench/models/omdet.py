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
"per-set"``); its state holds the class and task embeddings, fed to the forward pass
directly so frames run no text encoder and no token-keyed cache lookup.

Preprocessing: ``device`` (default) runs the processor's own resize / normalise on the
device tensor; ``reference`` is the processor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from probench.detections import Detections
from probench.models import hf_common as hf
from probench.models.base import StageTimer
from probench.models.spec import ModelSpec

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and transformers (pyproject)
    from torch import Tensor
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.image_processing_utils import BaseImageProcessor
    from transformers.utils import ModelOutput

    # OmDetTurboForObjectDetection.get_language_embedding: class embeddings, task embeddings, task mask
    Language = tuple[Tensor, Tensor, Tensor]

NMS_IOU = 0.5  # the processor's default
TEXT_LEN = 77  # the processor's text max_length
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

        model = self.model
        model.language_cache_class = OmDetTurboLRUCache(CLASS_CACHE)
        self._embed_language = type(model).get_language_embedding.__get__(model)
        self._active_language: Language | None = None
        # Instance attribute, not a module change: the forward pass asks this for its text
        # features and gets the active set's stored ones.
        model.get_language_embedding = self._language_embedding

    def _language_embedding(self, *args: object, **kwargs: object) -> Language:
        if self._active_language is not None:
            return self._active_language
        language: Language = self._embed_language(*args, **kwargs)
        return language

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

    def _encode_prompts(self, prompts: tuple[str, ...]) -> tuple[dict[str, Tensor], Language]:
        import torch

        tokens = self._tokens(prompts)
        with torch.inference_mode():  # class embeddings come from the model's per-class LRU
            language = self._embed_language(**tokens)
        return tokens, language

    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        import torch

        state: tuple[dict[str, Tensor], Language] = text_state  # type: ignore[assignment]
        tokens, language = state
        h, w = int(image.shape[0]), int(image.shape[1])
        timer = StageTimer(sync=hf.cuda_sync(self.dev))
        with timer.stage("preprocess"):
            pv = self.pixel_inputs([image])["pixel_values"]
        self._active_language = language
        try:
            with timer.stage("forward"), torch.inference_mode():
                out = self.model(pixel_values=pv, **tokens)
        finally:
            self._active_language = None
        with timer.stage("postprocess"):
            res = _post_process(out, (h, w), len(self._prompts))
            keep = hf.cap_per_prompt(res["scores"], res["labels"])
        return Detections.from_arrays(
            res["boxes"][keep], res["scores"][keep], res["labels"][keep], image_size=(h, w),
            timings_ms=timer.timings_ms,
        )


def _post_process(out: ModelOutput, size: tuple[int, int], n_classes: int) -> dict[str, np.ndarray]:
    """The processor's post-processing (threshold 0, NMS 0.5), as numpy."""
    from transformers.models.omdet_turbo import processing_omdet_turbo as pp

    logits = out.decoder_class_logits.float()
    scores, labels = pp.compute_score(logits)
    boxes, scores, labels = pp._post_process_boxes_for_image(
        boxes=out.decoder_coord_logits[0].float(), scores=scores[0], labels=labels,
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
