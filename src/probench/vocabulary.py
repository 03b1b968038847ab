"""The evaluation protocol's shared words: formulations, prompt types, the template, and how
a label space becomes prompts and boxes become COCO results.

Every room (data, cache, models, scoring, report, bags, ros) imports these from here and
from nowhere else, so no room reaches into another for a constant or a helper. This module
imports only :mod:`probench.errors` and :mod:`probench.detections`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probench.detections import CocoResult, Detections
from probench.errors import CheckFailed, UsageError

__all__ = [
    "EXPLICIT_SEPARATOR",
    "FORMULATIONS",
    "KNOWN_DOMAINS",
    "MAX_PROMPT_CHARS",
    "POLICY_FORMULATION",
    "PROMPT_TYPES",
    "RUN_FORMULATIONS",
    "TEMPLATE_PREFIX",
    "AttributionError",
    "CocoResult",
    "PromptTextError",
    "check_prompt_text",
    "detections_to_results",
    "escape_for_log",
    "is_ros_name_token",
    "is_topic_name",
    "parse_formulations",
    "prompt_text_problem",
    "unique_prompts",
]

# The paper's three target-preserving formulations (§III-C), in canonical order.
FORMULATIONS: tuple[str, ...] = ("orig", "cat", "tmpl")
# A run with a prompt policy (docs/PROMPTING.md) has a fourth: orig through the policy,
# scored against the same targets. It is not one of the paper's formulations (no PCR/PLC, no k*).
POLICY_FORMULATION = "policy"
RUN_FORMULATIONS: tuple[str, ...] = (*FORMULATIONS, POLICY_FORMULATION)
PROMPT_TYPES: tuple[str, ...] = (
    "categorical",
    "attributive",
    "relational",
    "affordance",
    "state",
    "part-whole",
    "negative",
    "compositional",
)
KNOWN_DOMAINS: tuple[str, ...] = ("subterranean", "industrial", "indoor", "outdoor", "urban")
# p_tmpl = "a photo of {p_orig}" (§III-C).
TEMPLATE_PREFIX = "a photo of "
# The longest prompt (characters, stripped) a detector and the node take: a target
# description longer than this is almost surely a mistake.
MAX_PROMPT_CHARS = 512
# ``ORIG => CAT``: a prompt that carries its categorical form (probench.prompting.derive).
EXPLICIT_SEPARATOR = "=>"
# a detector's image preprocessing: torch ops on its device, or the library's own processor
PREPROCESS_PATHS: tuple[str, ...] = ("device", "reference")


class AttributionError(CheckFailed):
    """Boxes name a prompt the frame or image was not asked (never credited)."""


class PromptTextError(UsageError):
    """Prompt text that is not valid text: a lone surrogate (not encodable as UTF-8) or a
    control character (NUL, ESC, DEL...); the message names the first and its position."""


# C0 and C1 control characters but tab, newline and CR (whitespace a pasted prompt may hold;
# split_prompts strips them), DEL, and the surrogate range (a lone one is not encodable)
_INVALID_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def check_prompt_text(text: str) -> str:
    """``text`` unchanged if it is valid prompt text, else a one-line :class:`PromptTextError`.

    Valid: encodable as UTF-8 (no lone surrogate such as ``"\\ud800"``, which no ROS string
    can carry) and free of control characters other than tab, newline and carriage return
    (a NUL would silently cut the prompt short on the wire). The one check behind the node's
    prompt parser and so the console, ``probench ground`` and the node."""
    bad = _INVALID_TEXT.search(text)
    if bad is not None:
        code = ord(bad.group())
        kind = "lone surrogate" if 0xD800 <= code <= 0xDFFF else "control character"
        raise PromptTextError(f"not valid text: {kind} U+{code:04X} at character {bad.start()}")
    return text


def prompt_text_problem(text: object) -> str | None:
    """Why ``text`` is not a prompt the node would take as it is, or None: THE rule for one
    prompt wherever a prompt comes from (the node's topic and ``prompts`` parameter, the
    console, ``probench prompt``, ``validate`` and the importers): a string, valid text
    (:func:`check_prompt_text`), not blank, at most :data:`MAX_PROMPT_CHARS` characters once
    stripped, and, for a dataset's prompt, no ``=>`` (the node would read ``A => B`` as the
    query ``A`` with the categorical form ``B``, so its answers would carry another class id)."""
    if not isinstance(text, str):
        return f"must be a string, not {type(text).__name__}"
    try:
        check_prompt_text(text)
    except PromptTextError as exc:
        return str(exc)
    stripped = text.strip()
    if not stripped:
        return "is empty"
    if len(stripped) > MAX_PROMPT_CHARS:
        return f"is {len(stripped)} characters long (limit {MAX_PROMPT_CHARS})"
    if EXPLICIT_SEPARATOR in stripped:
        return (f"holds {EXPLICIT_SEPARATOR!r}, which the node reads as ORIG {EXPLICIT_SEPARATOR} CAT "
                "(a dataset's prompt is one query)")
    return None


_LOG_ESCAPES = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def escape_for_log(text: str, limit: int = 200) -> str:
    """``text`` safe for one log or terminal line: every control character (newline, ESC,
    DEL, C1), line separator and lone surrogate written as a ``\\xNN`` / ``\\uNNNN``
    escape, so a prompt cannot split a log line or drive the operator's terminal; cut at
    ``limit`` characters (with ``...``)."""
    out = _LOG_ESCAPES.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                           else f"\\u{ord(m.group()):04x}", str(text))
    return out if len(out) <= limit else out[:limit] + "..."


_ROS_TOKEN = "[A-Za-z_][A-Za-z0-9_]*"  # a ROS 2 name token: letters, digits, _, not a digit first
_ROS_TOKEN_ONLY = re.compile(f"^{_ROS_TOKEN}$")
_ROS_TOPIC = re.compile(f"^(~/|/)?{_ROS_TOKEN}(/{_ROS_TOKEN})*$")


def is_ros_name_token(text: str) -> bool:
    """One token of a ROS 2 name (``grounding_node``, ``robot1``)."""
    return bool(_ROS_TOKEN_ONLY.match(text))


def is_topic_name(text: str) -> bool:
    """A ROS 2 topic name: absolute, relative or private (``~/x``) tokens separated by ``/``
    (no substitutions, no trailing or doubled ``/``), as rcl's validation accepts them."""
    return bool(_ROS_TOPIC.match(text))


def parse_formulations(value: str | Sequence[str]) -> list[str]:
    """Formulations from a comma-separated string or a list: checked, canonical order, no
    repeats. The one parser behind ``--formulations``, launch arguments and parameters."""
    raw = value.split(",") if isinstance(value, str) else [str(f) for f in value]
    items = [f.strip() for f in raw]
    items = [f for f in items if f]
    bad = [f for f in items if f not in FORMULATIONS]
    if bad:
        names = ", ".join(map(repr, bad))
        raise UsageError(f"formulations must be a subset of {','.join(FORMULATIONS)}; unknown: {names}")
    if not items:
        raise UsageError(f"formulations must be a non-empty subset of {','.join(FORMULATIONS)}")
    return [f for f in FORMULATIONS if f in items]


def unique_prompts(query_ids: Sequence[int], prompts: Sequence[str]) -> tuple[list[str], list[list[int]]]:
    """Identical prompt texts (after stripping) asked once: the distinct prompts in
    first-seen order and, per prompt, the query ids it answers."""
    index: dict[str, int] = {}
    texts: list[str] = []
    groups: list[list[int]] = []
    for qid, text in zip(query_ids, prompts, strict=True):
        key = text.strip()
        if key not in index:
            index[key] = len(texts)
            texts.append(key)
            groups.append([])
        groups[index[key]].append(int(qid))
    return texts, groups


def detections_to_results(
    dets: Detections, image_id: int, groups: Sequence[Sequence[int]]
) -> list[CocoResult]:
    """COCO results of one image; a box answering a shared prompt is credited to each query
    (``groups[i]``: the query ids of prompt ``i``)."""
    if len(dets) and int(dets.prompt_index.max()) >= len(groups):
        raise AttributionError(
            f"image {image_id}: prompt index {int(dets.prompt_index.max())} given for {len(groups)} prompts"
        )
    out: list[CocoResult] = []
    for rec in dets.to_coco(image_id, list(range(len(groups)))):
        for qid in groups[rec["category_id"]]:
            out.append({**rec, "category_id": int(qid)})
    return out
