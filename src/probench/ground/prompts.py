"""The prompt timeline of a ``probench ground`` run.

Prompts come from ``--prompt`` (active from the start), a ``--prompt-schedule`` file and a
recorded prompt topic (std_msgs/String, ``;``-separated as on the node's ``prompt`` topic).
Every text is checked as the node checks a prompt message
(:func:`probench.prompting.messages.prompts_from_message`); prompt text is data, never code.

Prompt sets stamped for one frame (the evaluator's ``frame_prompts``, vision_msgs/LabelInfo,
header.stamp = the frame's stamp) recorded in the bag are handed to the node's core as the
node takes them off its ``frame_prompts`` topic (``--frame-prompts-topic``; auto: the bag's
``.../frame_prompts`` LabelInfo topic).

Schedule file format (UTF-8 text, one change per line)::

    # seconds since the bag's first message, then the prompts, ';'-separated
    0      a red backpack; a door handle
    12.5   a person
    20     --policy categorical

A line ``SECONDS --policy NAME`` switches the prompt policy (the node's live
``prompt_policy`` parameter, docs/PROMPTING.md): the active prompts are made ready again
under it.

Blank lines and lines starting with ``#`` are ignored; times are non-negative, finite and
strictly increasing, and the bag's start plus the time must fit a ROS stamp (int32 seconds
since 1970: up to 2038-01-19); the rest of the line after the time is the prompt text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from probench.errors import ProbenchError
from probench.files import UserFileError, read_user_bytes
from probench.ground.errors import GroundUsageError
from probench.msgs.shapes import stamp_ns
from probench.realtime.grounding_worker import Prompts

MAX_SCHEDULE_BYTES = 1 << 20  # a longer "schedule" is the wrong file
# builtin_interfaces/Time.sec is an int32: the last stamp a message can carry
MAX_STAMP_NS = (2**31 - 1) * 1_000_000_000 + 999_999_999


@dataclass(frozen=True)
class PromptEvent:
    """Prompts arriving at ``t_ns`` (bag log time); ``prompts`` is None when the node would
    reject the message (``problem`` says why) and keep its previous prompts."""

    t_ns: int
    prompts: Prompts | None
    source: str
    problem: str = ""


@dataclass(frozen=True)
class PolicyEvent:
    """A prompt policy switch at ``t_ns`` (bag log time): ``SECONDS --policy NAME``."""

    t_ns: int
    policy: str
    source: str


@dataclass(frozen=True)
class FramePromptSet:
    """A recorded prompt set stamped for one frame; ``prompts`` None: rejected (``problem``)."""

    stamp_ns: int
    prompts: Prompts | None
    source: str
    problem: str = ""


_POLICY_LINE = "--policy"


def parse_prompt_flag(text: str) -> Prompts:
    """``--prompt "a red backpack; a door handle"`` as a checked prompt set (usage error)."""
    from probench.prompting.messages import prompts_from_message

    try:
        return prompts_from_message(text)
    except ProbenchError as exc:
        raise GroundUsageError(f"--prompt: {exc}") from exc


def read_schedule(path: str | Path, start_ns: int) -> list[PromptEvent | PolicyEvent]:
    """The events of a schedule file (module doc), at ``start_ns`` + their seconds."""
    from probench.prompting.messages import prompts_from_message
    from probench.prompting.policy import check_policy_name

    path = Path(path)
    where = f"--prompt-schedule {path}"
    try:  # bounded: a regular file (a FIFO or device is refused, never read), size-capped
        data = read_user_bytes(path, what="--prompt-schedule")
    except UserFileError as exc:
        raise GroundUsageError(str(exc)) from None
    if len(data) > MAX_SCHEDULE_BYTES:
        raise GroundUsageError(f"{where}: {len(data)} bytes; a schedule is at most {MAX_SCHEDULE_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GroundUsageError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    events: list[PromptEvent | PolicyEvent] = []
    last = -math.inf
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        head, *rest = stripped.split(None, 1)  # the time, then the prompt text
        try:
            seconds = float(head)
        except ValueError:
            raise GroundUsageError(
                f"{where}:{number}: {head[:30]!r} is not a time in seconds (expected: SECONDS PROMPTS)"
            ) from None
        if not math.isfinite(seconds) or seconds < 0:
            raise GroundUsageError(f"{where}:{number}: time {head} must be finite and >= 0")
        if seconds <= last:
            raise GroundUsageError(f"{where}:{number}: time {head} is not after the previous line's")
        if seconds > (MAX_STAMP_NS - start_ns) / 1e9 or start_ns + round(seconds * 1e9) > MAX_STAMP_NS:
            raise GroundUsageError(
                f"{where}:{number}: time {head} s after the bag's start is past the last ROS time stamp "
                f"(int32 seconds, {MAX_STAMP_NS // 1_000_000_000} s since 1970); give seconds since the "
                "bag's first message"
            )
        last = seconds
        t_ns = start_ns + round(seconds * 1e9)
        text = rest[0] if rest else ""
        if text.split(None, 1)[:1] == [_POLICY_LINE]:
            name = text[len(_POLICY_LINE):].strip()
            try:
                events.append(PolicyEvent(t_ns, check_policy_name(name), f"schedule line {number}"))
            except ProbenchError as exc:
                raise GroundUsageError(f"{where}:{number}: {exc}") from exc
            continue
        try:
            prompts = prompts_from_message(text)
        except ProbenchError as exc:
            raise GroundUsageError(f"{where}:{number}: {exc}") from exc
        events.append(PromptEvent(t_ns, prompts, f"schedule line {number}"))
    if not events:
        raise GroundUsageError(f"{where}: no prompt lines (expected: SECONDS PROMPTS)")
    return events


def recorded_event(t_ns: int, raw: bytes, topic: str) -> PromptEvent:
    """A recorded prompt message, accepted or rejected exactly as the node would."""
    from probench.bags.source import one_line
    from probench.bags.typestore import typestore
    from probench.prompting.messages import prompts_from_message

    source = f"{topic} at t={t_ns} ns"
    try:  # rosbags decodes strictly: invalid UTF-8 is rejected, as the node rejects it
        text = typestore().deserialize_cdr(raw, "std_msgs/msg/String").data
    except Exception as exc:  # noqa: BLE001 - any decoding failure is a malformed message
        return PromptEvent(t_ns, None, source, f"undecodable message ({one_line(exc)})")
    try:
        return PromptEvent(t_ns, prompts_from_message(text), source)
    except ProbenchError as exc:
        return PromptEvent(t_ns, None, source, str(exc))


def recorded_frame_prompts(raw: bytes, topic: str, t_ns: int) -> FramePromptSet:
    """A recorded ``frame_prompts`` LabelInfo, accepted or rejected exactly as the node would."""
    from probench.bags.source import one_line
    from probench.bags.typestore import vision_typestore
    from probench.models.base import check_prompts

    source = f"{topic} at t={t_ns} ns"
    try:
        msg = vision_typestore().deserialize_cdr(raw, "vision_msgs/msg/LabelInfo")
    except Exception as exc:  # noqa: BLE001 - any decoding failure is a malformed message
        return FramePromptSet(-1, None, source, f"undecodable message ({one_line(exc)})")
    stamp = stamp_ns(msg.header.stamp)
    names = [vc.class_name for vc in sorted(msg.class_map, key=lambda vc: vc.class_id)]
    try:
        return FramePromptSet(stamp, check_prompts(names), source)
    except ProbenchError as exc:
        return FramePromptSet(stamp, None, source, str(exc))
