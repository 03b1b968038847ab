"""Tokenizers built offline, deterministically, in memory (model hubs are unreachable).

They serve the ``tiny-*`` models and the ``random_weights`` builds of real architectures.
The vocabularies are generated in code, so there are no fixture files:

- CLIP-style byte-level BPE (OWL-ViT, OWLv2, OmDet-Turbo, SAM3): the 256 byte symbols, their
  end-of-word forms, a handful of merges for common words, then ``<|startoftext|>`` and
  ``<|endoftext|>`` as the two highest ids (CLIP text towers pool at ``argmax(input_ids)``,
  i.e. they rely on end-of-text being the largest id). ``!`` is id 0 as in CLIP's vocab
  (OWL pads with it; OWL's query mask treats a first token 0 as padding).
- BERT-style WordPiece (Grounding DINO, MM-Grounding-DINO, LLMDet): the special tokens sit
  at bert-base-uncased's ids (``[PAD]`` 0, ``[UNK]`` 100, ``[CLS]`` 101, ``[SEP]`` 102,
  ``[MASK]`` 103, ``.`` 1012, ``?`` 1029) because transformers' Grounding DINO hard-codes
  101/102/1012/1029 to split phrases; other slots hold characters, ``##`` continuations and
  common words.
"""

from __future__ import annotations

import functools
import string
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for the checker only: mypy skips transformers (pyproject)
    from transformers import BertTokenizer, CLIPTokenizer

# Common words of the benchmark's prompts: they get a whole-word token so tiny models see
# word-level sequences of realistic length rather than one token per character.
_WORDS = (
    "a", "an", "the", "of", "in", "on", "at", "to", "with", "and", "or", "near", "next",
    "behind", "front", "left", "right", "red", "blue", "green", "white", "black", "yellow",
    "orange", "door", "person", "chair", "table", "box", "bag", "car", "tree", "sign", "light",
    "fire", "extinguisher", "robot", "tunnel", "path", "wall", "floor", "photo", "object", "thing",
)

CLIP_BOS = "<|startoftext|>"
CLIP_EOS = "<|endoftext|>"
BERT_SIZE = 1100  # > 1029 so the hard-coded Grounding DINO special ids exist


@functools.lru_cache(maxsize=1)
def _bytes_to_unicode() -> tuple[str, ...]:
    """GPT-2/CLIP's reversible byte -> printable-character table, in CLIP's vocab order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return tuple(chr(c) for c in cs)


def clip_vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The generated CLIP vocab (ids dense from 0) and its BPE merges."""
    chars = _bytes_to_unicode()
    vocab: dict[str, int] = {}
    for c in chars:
        vocab[c] = len(vocab)
    for c in chars:
        vocab[c + "</w>"] = len(vocab)
    merges: list[tuple[str, str]] = []
    for word in _WORDS:
        # Merge left to right: w, wo, wor, word</w>.
        cur = word[0]
        for i, ch in enumerate(word[1:], start=1):
            nxt = ch + "</w>" if i == len(word) - 1 else ch
            merged = cur + nxt
            if (cur, nxt) not in merges:
                merges.append((cur, nxt))
            if merged not in vocab:
                vocab[merged] = len(vocab)
            cur = merged
    vocab[CLIP_BOS] = len(vocab)
    vocab[CLIP_EOS] = len(vocab)
    return vocab, merges


def clip_tokenizer(pad_token: str = "!", model_max_length: int = 77) -> CLIPTokenizer:
    """A CLIPTokenizer over the generated vocab. ``pad_token='!'`` matches OWL checkpoints;
    others pad with ``<|endoftext|>``."""
    from transformers import CLIPTokenizer

    vocab, merges = clip_vocab_and_merges()
    return CLIPTokenizer(
        vocab=vocab, merges=merges, pad_token=pad_token, model_max_length=model_max_length
    )


def clip_vocab_size() -> int:
    return len(clip_vocab_and_merges()[0])


def bert_vocab() -> list[str]:
    """The generated WordPiece vocab as a list (index = id), size :data:`BERT_SIZE`."""
    fixed = {0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]", 1012: ".", 1029: "?"}
    pieces: list[str] = []
    for ch in string.ascii_lowercase + string.digits:
        pieces += [ch, "##" + ch]
    pieces += [p for p in string.punctuation if p not in ".?"]
    pieces += list(_WORDS)
    out: list[str] = []
    it = iter(pieces)
    for i in range(BERT_SIZE):
        if i in fixed:
            out.append(fixed[i])
        else:
            out.append(next(it, f"[unused{i}]"))
    return out


def bert_tokenizer(model_max_length: int = 256) -> BertTokenizer:
    """A BertTokenizer (uncased) over the generated vocab."""
    from transformers import BertTokenizer

    vocab = {tok: i for i, tok in enumerate(bert_vocab())}
    return BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=model_max_length)
