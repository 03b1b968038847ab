"""A ``probench ground`` run: bag in, the grounding node's answers out (see the package doc).

Everything that can be checked without the model is checked first (bag, topics, prompts,
the first frame's encoding, outputs), so bad input fails in a second, not after a model load.
"""

from __future__ import annotations

import heapq
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from probench.bags.errors import BagError
from probench.bags.source import BagSource, Topic
from probench.ground.errors import GroundUsageError
from probench.ground.frames import Frame, decode, dropped, ground
from probench.ground.outputs import LABEL_INFO_MSGTYPE, GroundOutputs, output_topics
from probench.ground.prompts import (
    FramePromptSet,
    PolicyEvent,
    PromptEvent,
    read_schedule,
    recorded_event,
    recorded_frame_prompts,
)
from probench.ground.replay import MailboxReplay
from probench.ground.sequences import SequenceBag
from probench.ground.spatial import (
    LOOKAHEAD_S,
    GroundSpatial,
    SpatialTopics,
    choose_topics,
    depth_topics,
    read_ahead,
    spatial_events,
)
from probench.ground.summary import GroundSummary
from probench.msgs.images import DEFAULT_MAX_PIXELS
from probench.msgs.shapes import stamp_at
from probench.prompting.policy import PromptPolicy, resolve_policy
from probench.realtime.frame_core import FrameCore, Wanted, enable_masks, node_core
from probench.realtime.grounding_worker import Prompts
from probench.realtime.node_spec import GROUNDING_PARAMS, GroundingConfig
from probench.spatial.depth import DEFAULT_MAX_DEPTH_M


@dataclass(frozen=True)
class GroundPlan:
    bag: Path
    out: Path
    model: str
    prompts: Prompts = ()  # --prompt: active from the start
    schedule: Path | None = None
    image_topic: str | None = None  # None: the bag's only camera
    prompt_topic: str | None = None  # None: auto (".../prompt"), "none": ignore recorded prompts
    frame_prompts_topic: str | None = None  # None: auto (".../frame_prompts" LabelInfo), "none": ignore
    profile: str | None = None  # the formulation profile for a scheduled `--policy best`
    realtime: bool = False
    prefix: str = "/ground"
    keep_images: bool = False
    video: Path | None = None
    jsonl: Path | None = None
    overwrite: bool = False
    jpeg_quality: int = 85
    score_threshold: float = 0.3
    max_detections: int = 100
    progress: bool = True
    depth_topic: str | None = None  # None: the bag's only depth topic (with one CameraInfo); "none": off
    camera_info_topic: str | None = None
    track: bool = False
    depth_tolerance: float = 0.02
    min_depth_pixels: int = 50
    max_depth: float = DEFAULT_MAX_DEPTH_M  # metres: farther depth pixels are invalid (the node's)
    max_pixels: int = DEFAULT_MAX_PIXELS  # compressed frames over it are refused from their header


class _Grounder:
    """The replay's callbacks, over the node's core: ground, apply prompts, mark drops;
    everything goes to outputs."""

    def __init__(
        self, core: FrameCore, outputs: GroundOutputs, summary: GroundSummary, plan: GroundPlan,
        spatial: GroundSpatial | None = None, sequences: SequenceBag | None = None,
    ) -> None:
        self.core, self.outputs, self.summary, self.plan = core, outputs, summary, plan
        self.spatial, self.sequences = spatial, sequences
        self.wanted = Wanted(masks=outputs.masks)
        self._said: set[str] = set()

    def ground(self, frame: Frame, prompts: Prompts, wait_s: float, policy: PromptPolicy | None) -> float:
        item, problems = ground(frame, self.core, prompts, policy, self.wanted)
        for line in problems:
            if line not in self._said:  # each kind of problem once (the node throttles its logs)
                self._said.add(line)
                _warn(f"{line} (from {frame.where()} on)")
        busy_ms = item.processing_ms or 0.0
        item.latency_ms = wait_s * 1000.0 + busy_ms
        s = self.summary
        if item.failed:  # as the node: reported (frame_errors), logged, and the run goes on
            s.failed += 1
            s.first_failure = s.first_failure or f"{frame.where()}: {item.failed}"
            if item.failed not in self._said:
                self._said.add(item.failed)
                _warn(f"frame failed: {item.failed} ({frame.where()})")
        elif item.prompts:
            s.grounded += 1
            s.detections += len(item.detections)
        else:
            s.no_prompts += 1
        if self.spatial is not None and item.prompts and item.detections.tracker_id is not None:
            self.spatial.figures.observe(item.detections, item.d3)
        s.processing_ms.append(busy_ms)
        s.latency_ms.append(item.latency_ms)
        self.outputs.frame(item)
        if self.sequences is not None:
            self.sequences.observe(item)
        return busy_ms / 1000.0

    def put_spatial(self, kind: str, raw: bytes) -> None:
        """A recorded depth image or CameraInfo, handed to the core as the node hands them."""
        problem = (self.core.put_depth_cdr(raw) if kind == "depth"
                   else self.core.put_camera_info(*GroundSpatial.camera_info(raw)))
        if problem:
            _warn(f"no 3D output: {problem}")

    def apply(self, prompts: Prompts, t_ns: int, policy: PromptPolicy | None) -> tuple[bool, float]:
        from probench.errors import ProbenchError

        t0 = time.perf_counter()
        stamp = stamp_at(t_ns)
        try:
            ready = self.core.make_ready(prompts, stamp, policy)
        except ProbenchError as exc:  # the node keeps its previous prompts, and so do we
            self.summary.prompts_rejected += 1
            _warn(f"model refused prompts at t={t_ns} ns, previous stay active: {exc}")
            return False, time.perf_counter() - t0
        busy = time.perf_counter() - t0
        self.summary.prompt_sets += 1
        self.outputs.label_info(t_ns, ready.label_info_cdr)
        return True, busy

    def put_frame_prompts(self, item: FramePromptSet) -> None:
        """A recorded per-frame prompt set, taken as the node takes one off ``frame_prompts``."""
        if item.prompts is None:
            self.summary.prompts_rejected += 1
            _warn(f"frame prompt set rejected ({item.source}), its frame gets the operator's prompts: "
                  f"{item.problem}")
            return
        self.core.put_frame_prompts(item.stamp_ns, item.prompts)

    def dropped(self, frame: Frame, reason: str) -> None:
        self.summary.dropped += 1
        self.outputs.frame(dropped(frame, reason, self.plan.max_pixels))


def _warn(text: str) -> None:
    from tqdm import tqdm

    tqdm.write(f"probench ground: warning: {text}", file=sys.stderr)


def frame_prompts_topic(source: BagSource, requested: str | None) -> Topic | None:
    """The recorded per-frame prompt sets: ``requested``, "none", or (None) the bag's only
    vision_msgs/LabelInfo topic named ``.../frame_prompts``."""
    return source.named_topic(requested, LABEL_INFO_MSGTYPE, "frame_prompts", "--frame-prompts-topic")


Schedule = list[PromptEvent | PolicyEvent]


def node_config(plan: GroundPlan, topics: SpatialTopics) -> GroundingConfig:
    """The grounding node's configuration ``plan`` amounts to: its flags as the node's
    parameters, every other parameter at its default. The core is then built by the node's
    own builder (:func:`~probench.realtime.frame_core.node_core`), so a setting is wired once."""
    defaults = GROUNDING_PARAMS.to_config(GroundingConfig, GROUNDING_PARAMS.defaults())
    depth_on = topics.depth is not None and topics.camera_info is not None
    return replace(
        defaults, model=plan.model, score_threshold=plan.score_threshold, max_detections=plan.max_detections,
        max_image_pixels=plan.max_pixels, tracking=plan.track,
        depth_topic=topics.depth.name if depth_on and topics.depth else "",
        camera_info_topic=topics.camera_info.name if depth_on and topics.camera_info else "",
        depth_tolerance=plan.depth_tolerance, min_depth_pixels=plan.min_depth_pixels,
        max_depth=plan.max_depth)


def check_plan(source: BagSource, plan: GroundPlan, sequences: SequenceBag | None = None
               ) -> tuple[Topic, Topic | None, Schedule, SpatialTopics]:
    """The camera topic, the recorded prompt topic, the scheduled prompts and the depth and
    CameraInfo topics, or a one-line error. A bag of a sequence dataset (``sequences``)
    without a prompt source of its own is grounded with its videos' own prompts."""
    spatial = choose_topics(source, plan.depth_topic, plan.camera_info_topic)
    # depth images are no camera to ground, unless the bag has nothing else
    depth_names = [t.name for t in depth_topics(source)]
    exclude = depth_names if source.image_topics(depth_names) else []
    image = source.image_topic(plan.image_topic, exclude=exclude)
    prompt_topic = source.prompt_topic(plan.prompt_topic)
    schedule = read_schedule(plan.schedule, source.start_ns) if plan.schedule is not None else []
    if not plan.prompts and not schedule and prompt_topic is None and sequences is not None:
        schedule = list(sequences.prompt_events())
    elif not plan.prompts and not schedule and prompt_topic is None:
        raise GroundUsageError(
            "no prompts: give --prompt \"a red backpack; a door handle\", a --prompt-schedule file, "
            "or a bag with a recorded prompt topic"
        )
    first = source.first(image.name)
    if first is None:
        raise BagError(f"{source.path}: {image.name} holds no message")
    # the encoding and the pixel budget, before the model
    decode(Frame(0, first[0], image.msgtype, first[1], image.name), plan.max_pixels)
    if plan.keep_images:
        kept = {image.name} | ({prompt_topic.name} if prompt_topic else set())
        clash = sorted(kept & set(output_topics(plan.prefix, plan.realtime, spatial.depth is not None)))
        if clash:
            raise GroundUsageError(f"--keep-images: {', '.join(clash)} is also an output topic; choose "
                                   "another --prefix")
    return image, prompt_topic, schedule, spatial


def _events(source: BagSource, image: Topic, prompt_topic: Topic | None,
            schedule: Schedule, *ahead: Iterator[tuple[int, str, Any]]
            ) -> Iterator[tuple[int, str, Any]]:
    """``(t_ns, kind, item)`` in time order: kind "frame" (a Frame), "prompts" (a PromptEvent),
    "copy" ((topic, raw), a recorded prompt message kept with --keep-images), "depth"/"info"
    (raw, read ahead: :func:`probench.ground.spatial.spatial_events`). Scheduled prompts come
    before a recorded message of the same time."""
    topics = [image.name] + ([prompt_topic.name] if prompt_topic else [])

    def recorded() -> Iterator[tuple[int, str, Any]]:
        index = 0
        for topic, t, raw in source.messages(topics):
            if topic == image.name:
                yield t, "frame", Frame(index, t, image.msgtype, raw, topic)
                index += 1
            else:
                yield t, "copy", (topic, raw)
                yield t, "prompts", recorded_event(t, raw, topic)

    scheduled = ((e.t_ns, "policy" if isinstance(e, PolicyEvent) else "prompts", e) for e in schedule)
    yield from heapq.merge(scheduled, *ahead, recorded(), key=lambda e: e[0])


def ground_bag(plan: GroundPlan, load_detector: Callable[[], Any], policy: PromptPolicy | None = None
               ) -> GroundSummary:
    """Run ``plan``: the detector is built by ``load_detector`` once every input checked out,
    and answers every frame through the node's core under ``policy`` (as typed when None)."""
    from tqdm import tqdm

    with BagSource(plan.bag) as source:
        sequences = SequenceBag.open(plan.bag)  # a bag of a sequence dataset: its temporal metrics
        image, prompt_topic, schedule, topics = check_plan(source, plan, sequences)
        keep = [image] + ([prompt_topic] if prompt_topic else []) if plan.keep_images else []
        summary = GroundSummary(image.name, plan.model, plan.realtime)
        t0 = time.perf_counter()
        detector = load_detector()
        summary.model_load_s = time.perf_counter() - t0
        spatial = None
        if plan.track or topics.depth is not None:
            spatial = GroundSpatial(topics, plan.track)
            summary.spatial = spatial.figures
            summary.depth_topic = topics.depth.name if topics.depth else None
        masks = enable_masks(detector, True)
        outputs = GroundOutputs(
            plan.out, prefix=plan.prefix, realtime=plan.realtime, keep=keep, video=plan.video,
            jsonl=plan.jsonl, overwrite=plan.overwrite, jpeg_quality=plan.jpeg_quality,
            depth=topics.depth is not None, masks=masks,
        )
        # depth and frame_prompts are read ahead of their frames (replay): a frame never waits
        core = node_core(detector, node_config(plan, topics), replay=True)
        grounder = _Grounder(core, outputs, summary, plan, spatial, sequences)
        replay = MailboxReplay(grounder.ground, grounder.apply, grounder.dropped, realtime=plan.realtime)
        replay.worker.policy = policy
        start = source.start_ns
        # on a terminal only (like eval), and never with --no-progress
        bar = tqdm(total=image.count, desc="ground", unit="frame", disable=None if plan.progress else True)
        t_loop = time.perf_counter()
        try:
            if plan.prompts:  # active before the first frame, as a node configured with them
                replay.prompts(float("-inf"), plan.prompts, start)
            ahead = [spatial_events(plan.bag, topics, plan.depth_tolerance)] if topics.depth else []
            sets_topic = frame_prompts_topic(source, plan.frame_prompts_topic)
            sets_name = sets_topic.name if sets_topic is not None else ""
            if sets_topic is not None:
                ahead.append(read_ahead(plan.bag, {sets_name: "frame_prompts"}, LOOKAHEAD_S))
            for t, kind, item in _events(source, image, prompt_topic, schedule, *ahead):
                t_s = (t - start) / 1e9
                if kind == "frame":
                    summary.frames += 1
                    if plan.keep_images:
                        outputs.copy(image.name, t, item.raw)
                    replay.frame(t_s, item)
                    bar.update(1)
                    if plan.realtime:
                        bar.set_postfix(dropped=summary.dropped, refresh=False)
                elif kind == "copy":
                    outputs.copy(item[0], t, item[1])
                elif kind in ("depth", "info"):
                    grounder.put_spatial(kind, item)
                elif kind == "frame_prompts":
                    grounder.put_frame_prompts(recorded_frame_prompts(item, sets_name, t))
                elif kind == "policy":
                    replay.policy(t_s, resolve_policy(item.policy, model=plan.model, profile=plan.profile), t)
                elif item.prompts is None:
                    summary.prompts_rejected += 1
                    _warn(f"prompt rejected ({item.source}), previous prompts stay active: {item.problem}")
                else:
                    replay.prompts(t_s, item.prompts, t)
            replay.finish()
            if sequences is not None:
                summary.temporal = sequences.metrics()
            outputs.finish()
            summary.wall_s = time.perf_counter() - t_loop
            _describe(outputs, plan, summary)
            outputs.commit()
        except BaseException as exc:
            outputs.abort(exc)
            raise
        finally:
            bar.close()
    return summary


def _describe(outputs: GroundOutputs, plan: GroundPlan, summary: GroundSummary) -> None:
    """What the run wrote, in the summary and in the bag's metadata."""
    depth = summary.depth_topic is not None
    failed = summary.failed > 0
    topics = ", ".join(output_topics(plan.prefix, plan.realtime, depth, outputs.masks, failed))
    summary.outputs = [f"{plan.out} (mcap: {topics}{'; input images kept' if plan.keep_images else ''})"]
    if outputs.video is not None:
        summary.video_fps = outputs.video.fps
        summary.outputs.append(f"{plan.video} ({outputs.video.frames_written} frames, "
                               f"{outputs.video.fps:.2f} fps, mp4v)")
    if plan.jsonl is not None:
        summary.outputs.append(f"{plan.jsonl} ({summary.frames} lines)")
    outputs.set_custom_data("probench.ground.source", str(plan.bag))
    outputs.set_custom_data("probench.ground.image_topic", summary.image_topic)
    outputs.set_custom_data("probench.ground.model", plan.model)
    outputs.set_custom_data("probench.ground.summary", json.dumps(summary.as_dict(), sort_keys=True))

