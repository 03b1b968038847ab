"""Prompt messages: the text of the node's ``prompt`` topic (``;`` between prompts) and the
``prompts`` parameter, checked as the node checks them. The node, ``probench ground`` and
``probench console`` all read prompts through :func:`prompts_from_message`. A prompt may
carry its categorical form explicitly, ``ORIG => CAT`` (:mod:`probench.prompting.derive`);
an empty side is refused like any other malformed prompt. The text is data: it is only
split and stripped.
"""

from __future__ import annotations

from collections.abc import Sequence

from probench.prompting.derive import split_explicit

__all__ = ["check_prompt_specs", "prompt_message_limit", "prompts_from_message", "split_prompts"]


def split_prompts(text: str) -> list[str]:
    """``"a red cup; the door"`` -> ``["a red cup", "the door"]`` (empty pieces dropped)."""
    return [p.strip() for p in text.split(";") if p.strip()]


def prompt_message_limit() -> int:
    """The longest ``prompt`` message (characters) the node reads: every prompt at its limit,
    each followed by a separator."""
    from probench.models.base import MAX_PROMPT_CHARS, MAX_PROMPTS

    return MAX_PROMPTS * (MAX_PROMPT_CHARS + 1)


def check_prompt_specs(prompts: Sequence[str]) -> tuple[str, ...]:
    """A prompt list as the node takes it (shape, count, length), each prompt valid text
    (:func:`probench.vocabulary.check_prompt_text`: no control character, no lone surrogate)
    and each explicit ``ORIG => CAT`` form well formed; one-line errors. The one check of the
    ``prompts`` parameter, the ``prompt`` topic, the console and ``probench prompt``."""
    from probench.models.base import check_prompts
    from probench.vocabulary import PromptTextError, check_prompt_text

    checked = check_prompts(prompts)
    for i, p in enumerate(checked):
        try:
            check_prompt_text(p)
        except PromptTextError as exc:
            raise PromptTextError(f"prompt {i}: {exc}") from None
        split_explicit(p)
    return checked


def prompts_from_message(text: str) -> tuple[str, ...]:
    """The prompt set a message on the node's ``prompt`` topic asks for (``;``-separated),
    checked as the node checks it (message length, prompt count and length, explicit forms);
    a :class:`probench.msgs.errors.PromptMessageError` (one line) when the node would reject
    it and keep its previous prompts."""
    from probench.errors import ProbenchError
    from probench.msgs.errors import PromptMessageError
    from probench.vocabulary import check_prompt_text

    if not isinstance(text, str):
        raise PromptMessageError(f"a prompt message is text, not {type(text).__name__}")
    try:
        check_prompt_text(text)
    except ProbenchError as exc:
        raise PromptMessageError(str(exc)) from exc
    limit = prompt_message_limit()
    if len(text) > limit:
        raise PromptMessageError(f"message is {len(text)} characters long (limit {limit})")
    pieces = split_prompts(text)
    if not pieces:
        raise PromptMessageError(f"empty or whitespace-only prompt message ({text[:20]!r})")
    try:
        return check_prompt_specs(pieces)
    except ProbenchError as exc:
        raise PromptMessageError(f"{exc} (message {text[:60]!r})") from exc
