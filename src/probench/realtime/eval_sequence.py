"""The evaluator on a sequence bag (docs/EVALUATION.md, "Sequences"): each video in frame
order, with the operator's prompts (no rclpy here).

A bag made from a dataset with videos (docs/FORMATS.md, "Sequences") is replayed video by
video, per formulation: before a video's first frame its first prompt set is sent as an
**operator prompt** (``OperatorLink.set_prompts``: the grounding node's ``prompt`` topic),
and the evaluator waits for the node's acknowledgement (its ``label_info``); then the
video's frames stream at the replay rate with **no** stamped per-frame sets, so the node
answers each frame with the operator's prompts of the moment, as on a robot. At a prompt
change of the data the new set is sent as an operator prompt just before the changed frame
is sent, without waiting: the frames the node still answers with the old set carry class
ids outside their own set and are never credited (``misattributed``), which is what the
prompt-change latency measures (scoring/temporal.py).

Every prompt sent becomes one trace record of kind ``prompt`` (``realtime_frames.jsonl``):
``formulation``, ``session``, ``video_id``, ``frame_index`` (the frame it is for),
``texts``, ``sent_ns`` and ``ack_ns`` (the evaluator's monotonic clock; ``ack_ns`` null
when no acknowledgement came within ``ack_timeout``) and ``ack_ms``.

The unit of resume is the **video**: a video whose every frame is in the run's cache is
skipped; any other is replayed from its first frame (the tracker needs the frames before),
and only its frames not yet cached are recorded (the prediction log keeps one entry per
image).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from probench.cache.crash import crash_point
from probench.realtime.eval_plan import FramePlan, frame_plan
from probench.realtime.eval_stream import Collector, Link, stream
from probench.scoring.temporal import PROMPT_KIND

if TYPE_CHECKING:
    from probench.data.dataset import Dataset

__all__ = ["PROMPT_KIND", "OperatorLink", "PromptLog", "VideoPlan", "plan_videos", "stream_video"]


# (acknowledged texts, arrival on the evaluator's monotonic clock)
AckHandler = Callable[[tuple[str, ...], int], object]


class OperatorLink(Link, Protocol):
    """The transport plus the grounding node's operator prompts and their acknowledgements."""

    def set_prompts(self, texts: Sequence[str]) -> None:
        """Publish an operator prompt (the node's ``prompt`` topic)."""

    def set_ack_handler(self, handler: AckHandler) -> None:
        """Call ``handler`` for every acknowledgement (the node's ``label_info``)."""


@dataclass
class VideoPlan:
    """One video under one formulation: every frame, in order, and where the prompt changes."""

    formulation: str
    video_id: int
    frames: list[FramePlan]
    changes: dict[int, int] = field(default_factory=dict)  # position in frames -> its frame_index
    already_done: int = 0  # frames of it in the run's cache (replayed, not recorded again)


def plan_videos(
    dataset: Dataset, frames: Sequence[tuple[int, Mapping[str, Any]]], formulation: str, done: set[int]
) -> tuple[list[VideoPlan], int]:
    """The videos of ``formulation`` still to do (module doc), and how many are complete."""
    infos = {int(info["image_id"]): (t, info) for t, info in frames}
    todo, complete = [], 0
    for vid, video in dataset.videos.items():
        n_done = sum(1 for i in video.image_ids if i in done)
        if n_done == len(video):
            complete += 1
            continue
        fps = [frame_plan(formulation, infos[i][1], infos[i][0]) for i in video.image_ids]
        changes = {c.frame_index: c.frame_index for c in video.prompt_changes}
        todo.append(VideoPlan(formulation, vid, fps, changes, n_done))
    return todo, complete


class PromptLog:
    """The operator prompts sent and their acknowledgements (thread-safe: acks arrive on the
    transport's thread). Each prompt is emitted as a trace record once it is acknowledged or
    given up."""

    def __init__(
        self, emit: Callable[[dict[str, Any]], None], *, session: int, now_ns: Callable[[], int]
    ) -> None:
        self._emit = emit
        self.session = session
        self._now_ns = now_ns
        self._cond = threading.Condition()
        self._open: list[dict[str, Any]] = []  # sent, not yet acknowledged

    def acknowledged(self, texts: tuple[str, ...], received_ns: int) -> None:
        """An acknowledgement: it answers the oldest open prompt with these texts."""
        with self._cond:
            for rec in self._open:
                if tuple(rec["texts"]) == tuple(texts):
                    rec["ack_ns"] = int(received_ns)
                    rec["ack_ms"] = round((received_ns - rec["sent_ns"]) / 1e6, 3)
                    self._open.remove(rec)
                    self._emit(rec)
                    self._cond.notify_all()
                    return

    def send(self, link: OperatorLink, plan: VideoPlan, position: int) -> dict[str, Any]:
        frame = plan.frames[position]
        rec: dict[str, Any] = {
            "kind": PROMPT_KIND,
            "formulation": plan.formulation,
            "session": self.session,
            "video_id": plan.video_id,
            "frame_index": position,
            "image_id": frame.image_id,
            "texts": list(frame.texts),
            "sent_ns": None,
            "ack_ns": None,
            "ack_ms": None,
        }
        with self._cond:
            self._open.append(rec)
            rec["sent_ns"] = self._now_ns()
        link.set_prompts(frame.texts)
        return rec

    def wait_ack(
        self,
        rec: Mapping[str, Any],
        timeout_s: float,
        wait: Callable[[threading.Condition, float], None],
        ok: Callable[[], bool],
    ) -> bool:
        """Until ``rec`` is acknowledged (True) or ``timeout_s`` passed (False)."""
        deadline = self._now_ns() + int(timeout_s * 1e9)
        with self._cond:
            while rec["ack_ns"] is None:
                left = (deadline - self._now_ns()) / 1e9
                if left <= 0 or not ok():
                    return False
                wait(self._cond, min(left, 0.1))
            return True

    def close(self) -> None:
        """Emit the prompts never acknowledged (``ack_ns`` null)."""
        with self._cond:
            for rec in self._open:
                self._emit(rec)
            self._open.clear()


def stream_video(
    link: OperatorLink,
    plan: VideoPlan,
    images: Iterator[Any],
    collector: Collector,
    prompts: PromptLog,
    *,
    mode: str,
    rate_hz: float,
    answer_timeout_s: float,
    ack_timeout_s: float,
) -> bool:
    """One video (module doc); returns whether its first prompt set was acknowledged in time."""
    first = prompts.send(link, plan, 0)
    acked = prompts.wait_ack(first, ack_timeout_s, collector.clock.wait, link.ok)

    def change(i: int, frame: FramePlan) -> None:
        if i in plan.changes:
            prompts.send(link, plan, i)

    stream(
        link,
        plan.frames,
        images,
        collector,
        mode=mode,
        rate_hz=rate_hz,
        answer_timeout_s=answer_timeout_s,
        announce=False,
        before_send=change,
    )
    return acked


@dataclass
class SequenceRun:
    """What :func:`run_sequences` needs of the run (plain values and callables: no import of
    :mod:`probench.realtime.eval_run`)."""

    formulations: Sequence[str]  # with frames still to do, in run order
    done: Mapping[str, set[int]]  # formulation -> images in the cache
    put: Callable[[FramePlan | None, dict[str, Any] | None, list[Any]], None]  # the recorder
    finalize: Callable[[str], None]
    images: Callable[[Sequence[int]], Iterator[Any]]  # bag times -> image messages, lazily
    info: Callable[[str], None]
    warning: Callable[[str], None]


class ReadyLink(OperatorLink, Protocol):
    def ready_for_operator_prompts(self, timeout: float) -> None:
        """Until the node answers frames with the operator's prompts without waiting for a
        stamped set (the DDS link: the node's stamped sets are no longer in use)."""


def run_sequences(
    link: ReadyLink,
    dataset: Dataset,
    frames: Sequence[tuple[int, Mapping[str, Any]]],
    run: SequenceRun,
    collector: Collector,
    *,
    mode: str,
    rate_hz: float,
    answer_timeout_s: float,
    ack_timeout_s: float,
    warmup_frames: int,
    set_policy: Callable[[str], None],
) -> None:
    """Every formulation's videos still to do (module doc), after one warm-up."""
    from probench.realtime.eval_stream import warm_up

    prompts = PromptLog(
        lambda rec: run.put(None, rec, []), session=collector.session, now_ns=collector.clock.now_ns
    )
    link.set_ack_handler(prompts.acknowledged)
    plans = {f: plan_videos(dataset, frames, f, run.done[f]) for f in run.formulations}
    try:
        first = next((p[0][0] for p in plans.values() if p[0]), None)
        # before any operator prompt, the warm-up's too: while the link's handshake (a stamped
        # set) is in use, the node would hold each frame frame_prompts_wait for a stamped set
        link.ready_for_operator_prompts(ack_timeout_s)
        if first is not None and warmup_frames > 0:
            some = first.frames[:warmup_frames]
            rec = prompts.send(link, first, 0)
            prompts.wait_ack(rec, ack_timeout_s, collector.clock.wait, link.ok)
            run.info(
                f"warm-up: {warmup_frames} frame(s) with the operator's prompts, one at a time, "
                "scored nowhere"
            )
            warm_up(
                link,
                some,
                list(run.images([fp.bag_time_ns for fp in some])),
                collector,
                n=warmup_frames,
                answer_timeout_s=answer_timeout_s,
                announce=False,
            )
        for f in run.formulations:
            videos, complete = plans[f]
            set_policy(f)
            run.info(
                f"{f}: {len(videos)} video(s) to replay in frame order with operator prompts "
                f"({complete} complete already; a partly done video is replayed whole)"
            )
            for vp in videos:
                images = run.images([fp.bag_time_ns for fp in vp.frames])
                if not stream_video(
                    link,
                    vp,
                    images,
                    collector,
                    prompts,
                    mode=mode,
                    rate_hz=rate_hz,
                    answer_timeout_s=answer_timeout_s,
                    ack_timeout_s=ack_timeout_s,
                ):
                    run.warning(
                        f"{f}: video {vp.video_id}: its prompt set was not acknowledged within "
                        f"{ack_timeout_s:g} s; replayed anyway"
                    )
            run.finalize(f)
            crash_point("eval.formulation_done")
    finally:
        prompts.close()
