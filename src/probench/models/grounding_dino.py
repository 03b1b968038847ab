"""Grounding DINO, MM Grounding DINO and LLMDet (transformers ``GroundingDinoForObjectDetection``
and ``MMGroundingDinoForObjectDetection``; LLMDet checkpoints load into the MM-GD classes).

Native prompt format: one caption of lower-case phrases separated by periods,
``"a red door. a person."``, at most ``max_text_len`` (256) BERT tokens. Each of the 900
queries gets one sigmoid logit per token. Post-processing here: a phrase's score is the
max logit over its tokens (the native score is the max over all tokens); a box answers
the phrase with the highest score. Token -> phrase mapping uses the tokenizer's character
offsets against the phrase spans in the caption, so a prompt that itself contains a
period still maps to its own index.

Long prompt lists: prompts are packed greedily, in order, into captions that fit the token
limit and each caption is a separate forward pass (their boxes are merged; a single prompt
longer than the limit is truncated). The per-prompt cap of 100 boxes applies to the merge.

Text cache (per prompt set): the prompts are encoded jointly (one caption, phrase-wise
attention within it), so the cache is keyed by the whole set. Captions are tokenised and
the BERT text backbone's output is computed once per prompt set and kept in the set's text
state; frames feed it back through :class:`TextCache` (which swaps the backbone instance's
``forward``, so the module tree and state dict stay the checkpoint's). A set that comes back
while still in the detector's LRU runs no BERT. The text-image fusion layers (feature
enhancer, cross-modality decoder) are image-conditioned by design and run every frame.

Preprocessing: ``device`` (default) runs the processor's own resize / normalise on the
device tensor (:class:`probench.models.preprocess.ProcessorPixels`); ``reference`` is the
processor.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.detections import Detections
from probench.models import hf_common as hf
from probench.models.base import StageTimer
from probench.models.head import ImageHead, bucket_for, buckets_upto, fill_to
from probench.models.spec import ModelSpec

if TYPE_CHECKING:  # names for the checker only: mypy skips torch and transformers (pyproject)
    from torch import Tensor
    from torch.nn import Module
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase
    from transformers.image_processing_utils import BaseImageProcessor
    from transformers.utils import ModelOutput

_SWIN_T = {"embed_dim": 96, "depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24], "window_size": 7,
           "image_size": 224}
_SWIN_B = {"embed_dim": 128, "depths": [2, 2, 18, 2], "num_heads": [4, 8, 16, 32], "window_size": 12,
           "image_size": 384}
_SWIN_L = {"embed_dim": 192, "depths": [2, 2, 18, 2], "num_heads": [6, 12, 24, 48], "window_size": 12,
           "image_size": 384}
_BERT_BASE = {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
              "intermediate_size": 3072, "max_position_embeddings": 512}

# Real-size configs for random_weights builds, from the checkpoints' config.json as far as
# known (the Swin-L variants' feature levels are the least certain detail).
_BACKBONES = {
    "grounding-dino-t": _SWIN_T, "grounding-dino-s-t": _SWIN_B, "mm-grounding-dino-t": _SWIN_T,
    "mm-grounding-dino-l": _SWIN_L, "llmdet-l": _SWIN_L,
}
_REAL_IMAGE = {"shortest_edge": 800, "longest_edge": 1333}
# the tiny size: a long side of up to 256 px keeps at least 56 encoder tokens (> num_queries) at any
# aspect ratio; with three feature levels (_tiny_config) no map is 1x1 at any size
TINY_IMAGE = {"shortest_edge": 64, "longest_edge": 256}
TINY_MAX_TEXT = 24  # small on purpose: a handful of prompts already exercises chunking


def _mm(spec: ModelSpec) -> bool:
    return spec.family == "mm-grounding-dino"


def _real_config(spec: ModelSpec) -> dict[str, Any]:
    backbone = {"model_type": "swin", **_BACKBONES[spec.name],
                "out_features": ["stage2", "stage3", "stage4"]}
    return {"backbone_config": backbone, "text_config": dict(_BERT_BASE), "num_queries": 900,
            "max_text_len": 256}


def _tiny_config() -> dict[str, Any]:
    backbone = {"model_type": "swin", "embed_dim": 16, "depths": [1, 1, 1, 1], "num_heads": [1, 1, 2, 2],
                "window_size": 4, "image_size": 64, "out_features": ["stage2", "stage3", "stage4"]}
    text = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 37, "max_position_embeddings": 64}
    return {
        "backbone_config": backbone, "text_config": text, "num_queries": 30, "d_model": 32,
        "encoder_layers": 1, "decoder_layers": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32,
        "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_n_points": 2,
        "decoder_n_points": 2, "max_text_len": TINY_MAX_TEXT,
        # the backbone's three stages only, no extra stride-64 level: at 64 px (a square image's
        # tiny size) that level is 1x1, and its GroupNorm of one value per channel raised
        # ("Expected more than 1 value per channel") on every square image
        "num_feature_levels": 3,
    }


def _classes(spec: ModelSpec) -> tuple[type[PretrainedConfig], type[PreTrainedModel]]:
    import transformers as tf

    if _mm(spec):
        return tf.MMGroundingDinoConfig, tf.MMGroundingDinoForObjectDetection
    return tf.GroundingDinoConfig, tf.GroundingDinoForObjectDetection


@dataclass
class _Caption:
    """One forward pass worth of prompts."""

    first: int  # index of its first prompt in the prompt set
    tokens: dict[str, Tensor]  # tokenizer output
    token_phrase: np.ndarray  # (max_text_len,) phrase index (local) per token, -1 elsewhere
    n_phrases: int
    key: tuple[int, ...]  # the token ids, read once on the CPU (TextCache.active's key)
    hidden: Tensor | None = None  # the BERT backbone's output for these tokens (1, L, D), on the device
    # the model's phrase-wise text self-attention mask as one block id per token (1, L) (the
    # mask is token i attends j iff their ids are equal: _token_groups) and its position ids
    # (1, L), computed once per prompt set from the token ids: image-head inputs
    token_groups: Tensor | None = None
    position_ids: Tensor | None = None


def _join(phrases: list[str]) -> str:
    """Grounding DINO's caption: ``"a. b. c."`` (what its processor builds from a label list)."""
    return ". ".join(phrases) + "."


class TextCache:
    """Feeds the BERT text backbone's stored output back to the model (token ids -> features).

    It replaces the backbone's ``forward`` on the instance instead of wrapping the module,
    so the model's module tree and state dict stay those of the checkpoint. ``active`` holds
    the captions of the prompt set being run; anything else runs the real backbone.
    """

    def __init__(self, backbone: Module) -> None:
        self.backbone = backbone
        self.active: dict[tuple[int, ...], Tensor] = {}
        # set by the image head for the length of one forward: the text side as a tensor input
        self.fed: Tensor | None = None
        self.calls = 0  # real BERT runs (tests read it)
        self._forward = backbone.forward
        backbone.forward = self.forward

    def encode(self, input_ids: Tensor, **kwargs: object) -> Tensor:
        """The real backbone's last hidden state for one caption (1, L, D)."""
        self.calls += 1
        out = self._forward(input_ids, **kwargs)
        hidden: Tensor = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return hidden

    def forward(self, input_ids: Tensor, *args: object, **kwargs: object) -> ModelOutput:
        from transformers.modeling_outputs import BaseModelOutput

        if self.fed is not None:
            return BaseModelOutput(last_hidden_state=self.fed.expand(input_ids.shape[0], -1, -1))
        same_rows = bool((input_ids == input_ids[:1]).all())
        hidden = self.active.get(tuple(input_ids[0].tolist())) if same_rows else None
        if hidden is None:
            self.calls += 1
            out: ModelOutput = self._forward(input_ids, *args, **kwargs)
            return out
        return BaseModelOutput(last_hidden_state=hidden.expand(input_ids.shape[0], -1, -1))


class GroundingDinoDetector(hf.HFDetector):
    text_cache = "per-set"  # one joint caption per set (module doc)
    text_cache_size = 256  # prompt sets (each holds its captions' BERT output)

    def _attach(self) -> None:
        self.max_text_len = int(self.model.config.max_text_len)
        self.bert_cache = TextCache(self.model.model.text_backbone)

    # -- text side ------------------------------------------------------------------------
    def captions(self, prompts: Sequence[str]) -> list[_Caption]:
        """Pack prompts, in order, into captions of at most ``max_text_len`` tokens.

        A prompt joins the current caption only if the caption, tokenised as it will be
        fed, still fits; a prompt too long on its own gets a caption of its own (truncated).
        """
        phrases = [p.strip().rstrip(".").strip().lower() or p.strip().lower() for p in prompts]
        groups: list[list[int]] = []
        for i in range(len(phrases)):
            candidate = [phrases[j] for j in groups[-1]] + [phrases[i]] if groups else []
            if candidate and self._n_tokens(candidate) <= self.max_text_len:
                groups[-1].append(i)
            else:
                groups.append([i])
        return [self._caption(g[0], [phrases[i] for i in g]) for g in groups]

    def _n_tokens(self, phrases: list[str]) -> int:
        return len(self.tokenizer(_join(phrases))["input_ids"])

    def _caption(self, first: int, phrases: list[str]) -> _Caption:
        spans, pos = [], 0
        for ph in phrases:
            spans.append((pos, pos + len(ph)))
            pos += len(ph) + 2
        text = _join(phrases)
        tok = self.tokenizer(
            text, truncation=True, max_length=self.max_text_len, return_offsets_mapping=True,
            return_tensors="pt",
        )
        offsets = tok.pop("offset_mapping")[0].tolist()
        token_phrase = np.full(self.max_text_len, -1, dtype=np.int64)
        for t, (a, b) in enumerate(offsets):
            if b <= a:
                continue  # special tokens
            for k, (s, e) in enumerate(spans):
                if a >= s and b <= e:
                    token_phrase[t] = k
                    break
        return _Caption(first, dict(tok), token_phrase, len(phrases), tuple(tok["input_ids"][0].tolist()))

    def _encode_prompts(self, prompts: tuple[str, ...]) -> list[_Caption]:
        import torch

        caps = self.captions(prompts)
        with torch.inference_mode():
            for cap in caps:  # run BERT once per caption now; frames feed its output back
                cap.tokens = {k: v.to(self.dev) for k, v in cap.tokens.items()}
                ids = cap.tokens["input_ids"]
                bert = _bert_masks(self.model.model, ids)
                cap.hidden = self.bert_cache.encode(ids, **bert)
                cap.token_groups = _token_groups(bert["attention_mask"][:, 0])  # type: ignore[index]
                cap.position_ids = bert["position_ids"]
        return caps

    # -- image head -----------------------------------------------------------------------
    def image_head(self) -> ImageHead:
        """Image + one caption's cached text side -> (logits (1, Q, max_text_len), pred_boxes
        (1, Q, 4)); the token axis (L) grows with the prompts. Shape-derived values (spatial
        shapes, level starts) are constants of a trace, so an exported head is made per input
        size (the runtimes key their files by every input shape but the token axis)."""
        return ImageHead(
            family="grounding-dino", module=gdino_head_module(self.model, self.bert_cache),
            input_names=HEAD_INPUTS, output_names=HEAD_OUTPUTS, example_inputs=self._example_inputs,
            prompt_axes={"input_ids": 1, "text_hidden": 1, "attention_mask": 1, "token_groups": 1,
                         "position_ids": 1},
            pad=functools.partial(pad_caption, buckets=buckets_upto(self.max_text_len)),
        )

    def _example_inputs(self, n_prompts: int) -> tuple[Tensor, ...]:
        """A 640x480 frame and a caption of ``n_prompts`` made-up phrases (fewer when they
        exceed the token limit: the first caption of the set)."""
        cap = self._encode_prompts(tuple(f"thing {i}" for i in range(n_prompts)))[0]
        enc = self.pixel_inputs([np.zeros((480, 640, 3), dtype=np.uint8)])
        return self._head_inputs(enc["pixel_values"], enc.get("pixel_mask"), cap)

    @staticmethod
    def _head_inputs(pv: Tensor, pm: Tensor | None, cap: _Caption) -> tuple[Tensor, ...]:
        import torch

        if pm is None:  # what the model builds when it is given none
            pm = torch.ones((pv.shape[0], pv.shape[2], pv.shape[3]), dtype=torch.long, device=pv.device)
        if cap.hidden is None or cap.token_groups is None or cap.position_ids is None:
            raise RuntimeError("caption not encoded: _encode_prompts fills its text side")
        ids, mask = cap.tokens["input_ids"], cap.tokens["attention_mask"]
        return pv, pm, ids, cap.hidden, mask, cap.token_groups, cap.position_ids

    # -- per frame ------------------------------------------------------------------------
    def _run(self, image: np.ndarray, text_state: object) -> Detections:
        import torch

        caps: list[_Caption] = text_state  # type: ignore[assignment]
        h, w = int(image.shape[0]), int(image.shape[1])
        timer = StageTimer(sync=hf.cuda_sync(self.dev))
        with timer.stage("preprocess"):
            enc = self.pixel_inputs([image])
            pv, pm = enc["pixel_values"], enc.get("pixel_mask")
        outs = []
        with timer.stage("forward"), torch.inference_mode():
            for cap in caps:
                logits, pred_boxes = self.run_head(*self._head_inputs(pv, pm, cap))
                outs.append((logits[0].float(), pred_boxes[0].float()))
        with timer.stage("postprocess"):
            boxes_all, scores_all, labels_all = [], [], []
            for cap, (logits, pred) in zip(caps, outs, strict=True):
                probs = torch.sigmoid(logits).cpu().numpy()  # (Q, max_text_len)
                per_phrase = np.zeros((probs.shape[0], cap.n_phrases))
                tp = cap.token_phrase[: probs.shape[1]]
                for k in range(cap.n_phrases):
                    cols = np.nonzero(tp == k)[0]
                    if len(cols):
                        per_phrase[:, k] = probs[:, cols].max(axis=1)
                label = per_phrase.argmax(axis=1)
                score = per_phrase[np.arange(len(label)), label]
                cx, cy, bw, bh = pred.cpu().numpy().T
                boxes_all.append(
                    np.stack([(cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h], 1)
                )
                scores_all.append(score)
                labels_all.append(label + cap.first)
            boxes, scores, labels = (np.concatenate(a) for a in (boxes_all, scores_all, labels_all))
            keep = hf.cap_per_prompt(scores, labels)
        return Detections.from_arrays(
            boxes[keep], scores[keep], labels[keep], image_size=(h, w), timings_ms=timer.timings_ms
        )


HEAD_INPUTS = ("pixel_values", "pixel_mask", "input_ids", "text_hidden", "attention_mask", "token_groups",
               "position_ids")
HEAD_OUTPUTS = ("logits", "pred_boxes")
_MASKS_FN = "generate_masks_with_special_tokens_and_transfer_map"
_FED = threading.local()  # the masks of the head call running on this thread
_PATCHED: set[str] = set()
_PATCH_LOCK = threading.Lock()


def _feed_masks(modeling: object) -> None:
    """Make the modeling module's mask builder answer with the head's mask inputs while a head
    call runs on this thread (else the original): the builder loops in Python over the token
    ids, which a trace would bake in as constants of the example prompts. Installed once per
    module, so concurrent detectors on other threads are unaffected."""
    name = getattr(modeling, "__name__", "")
    with _PATCH_LOCK:
        if name in _PATCHED:
            return
        original: Callable[..., tuple[Tensor, Tensor]] = getattr(modeling, _MASKS_FN)

        def masks(input_ids: Tensor, special_tokens: object) -> tuple[Tensor, Tensor]:
            fed: tuple[Tensor, Tensor] | None = getattr(_FED, "masks", None)
            return fed if fed is not None else original(input_ids, special_tokens)

        setattr(modeling, _MASKS_FN, masks)
        _PATCHED.add(name)


@functools.cache
def _head_module_cls() -> type[Module]:
    import torch

    # torch is not followed by mypy (pyproject: follow_imports = "skip"), so Module is Any here
    class Head(torch.nn.Module):  # type: ignore[misc]
        """``GroundingDinoForObjectDetection.forward`` with the text side as inputs: the BERT
        output comes in as ``text_hidden`` (through :class:`TextCache`), the phrase-wise
        self-attention mask as block ids (one token axis, so one dynamic axis in ONNX) and the
        position ids as tensors. The token ids are passed on to the model as they are (only
        their shape is read inside a head call), so its recorded call replays correctly
        outside the head (bench/gpu_parity.py)."""

        def __init__(self, model: PreTrainedModel, text_cache: TextCache) -> None:
            super().__init__()
            import importlib

            self.gd = model
            self.text_cache = text_cache
            _feed_masks(importlib.import_module(type(model.model).__module__))

        def forward(
            self, pixel_values: Tensor, pixel_mask: Tensor, input_ids: Tensor, text_hidden: Tensor,
            attention_mask: Tensor, token_groups: Tensor, position_ids: Tensor,
        ) -> tuple[Tensor, Tensor]:
            _FED.masks = (token_groups.unsqueeze(2) == token_groups.unsqueeze(1), position_ids)
            self.text_cache.fed = text_hidden
            try:
                out = self.gd(pixel_values=pixel_values, pixel_mask=pixel_mask, input_ids=input_ids,
                              attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids))
            finally:
                _FED.masks = None
                self.text_cache.fed = None
            return out.logits, out.pred_boxes

    return Head


def gdino_head_module(model: PreTrainedModel, text_cache: TextCache) -> Module:
    """The Grounding DINO image head module (torch imported lazily)."""
    return _head_module_cls()(model, text_cache).eval()


def pad_caption(inputs: tuple[Tensor, ...], buckets: tuple[int, ...]) -> tuple[Tensor, ...] | None:
    """The compiled runtime's padding of a head call (``ImageHead.pad``): the caption's token
    axis grown to a bucket with masked tokens (None above the last bucket). Repeating the
    last token would join it to the last phrase; a padded token instead has attention mask
    0, zero BERT features, token id 0 (only the ids' shape is read in a head call), position
    id 0 and a block id of its own (its position: no real token's id, which is the first
    position of its phrase), so no real token attends to it. Grounding DINO masks such
    tokens in its fusion layers, query selection and logits (-inf), so the real tokens'
    outputs are unchanged up to float rounding; the logits are max_text_len wide already
    (nothing to slice back)."""
    import torch

    pv, pm, ids, hidden, mask, groups, position_ids = inputs
    n = int(ids.shape[1])
    size = bucket_for(n, buckets)
    if size is None:
        return None
    own = torch.arange(n, size, dtype=groups.dtype, device=groups.device).expand(groups.shape[0], -1)
    return (pv, pm, fill_to(ids, 1, size), fill_to(hidden, 1, size), fill_to(mask, 1, size),
            torch.cat((groups, own), 1), fill_to(position_ids, 1, size))


def _token_groups(self_mask: Tensor) -> Tensor:
    """The phrase-wise self-attention mask (B, L, L) as one id per token (B, L): the first
    column it attends to. The mask is block-diagonal (a phrase's tokens attend to each other,
    special and trailing tokens to themselves), so ``ids_i == ids_j`` rebuilds it exactly;
    checked here, since the head relies on it."""
    groups = self_mask.int().argmax(-1)
    if not bool(((groups.unsqueeze(2) == groups.unsqueeze(1)) == self_mask).all()):
        raise RuntimeError("the text self-attention mask is not block-diagonal: cannot pass it as block ids")
    return groups


def _bert_masks(gd_model: PreTrainedModel, input_ids: Tensor) -> dict[str, Tensor | bool]:
    """The arguments GroundingDinoModel passes to its text backbone (phrase-wise attention)."""
    import importlib

    import torch

    mod = importlib.import_module(type(gd_model).__module__)
    masks, position_ids = mod.generate_masks_with_special_tokens_and_transfer_map(
        input_ids, special_tokens=gd_model.special_tokens
    )
    n = gd_model.config.max_text_len
    masks, position_ids = masks[:, :n, :n], position_ids[:, :n]
    return {
        "attention_mask": masks[:, None, :, :],
        "token_type_ids": torch.zeros_like(input_ids),
        "position_ids": position_ids,
        "return_dict": True,
    }


def _image_processor(spec: ModelSpec, size: dict[str, int]) -> BaseImageProcessor:
    import transformers as tf

    return tf.GroundingDinoImageProcessor(size=size)


def _with_vocab(
    cfg: dict[str, Any], tokenizer: PreTrainedTokenizerBase, vocab_size: int = 0
) -> dict[str, Any]:
    """Token ids of the generated tokenizer; ``vocab_size`` keeps a real-size embedding table."""
    cfg = {**cfg, "text_config": {**cfg["text_config"], "vocab_size": max(vocab_size, len(tokenizer)),
                                   "pad_token_id": tokenizer.pad_token_id}}
    return cfg


def _random(spec: ModelSpec, tiny: bool) -> hf.RandomBuild:
    """The tiny or the real-size config with a generated BERT tokenizer."""
    from probench.models.tiny_tokenizers import bert_tokenizer

    config_cls, model_cls = _classes(spec)
    tokenizer = bert_tokenizer()
    if tiny:
        cfg, image = _with_vocab(_tiny_config(), tokenizer), TINY_IMAGE
    else:
        cfg, image = _with_vocab(_real_config(spec), tokenizer, 30522), _REAL_IMAGE  # BERT's vocabulary
    image_processor = _image_processor(spec, dict(image))
    return hf.RandomBuild(tokenizer, lambda: model_cls(config_cls(**cfg)), image_processor)


_FACTORY = hf.HFFactory(GroundingDinoDetector, _random, lambda spec: _classes(spec)[1])
build, build_tiny = _FACTORY.build, _FACTORY.build_tiny  # the zoo's factories (specs_transformers)
