"""One frame, one answer: the single core under every caller that answers a camera frame.

The grounding node's worker, ``probench ground`` (on a bag's clock) and the evaluator's
fake link all hand a serialized image message to :meth:`FrameCore.answer` and publish (or
write, or hand back) what it returns. It owns every step of answering a frame, in order:

1. decoding, under the pixel budget (a compressed frame is refused from its header);
2. taking the frame's stamped prompt set (:class:`~probench.realtime.grounding_worker.StampedPromptSets`:
   the wait rule, written once), else the operator's set active when the frame started;
3. the prompt policy's plan (derived forms, explicit ``ORIG => CAT``): the model's texts in,
   boxes back under the operator's prompts, an ensemble fused
   (:class:`~probench.prompting.policy.PromptPlan`);
4. the published set: at most ``max_detections``, best first;
5. track ids, the depth image paired by stamp and 3D (:class:`~probench.realtime.spatial_stage.SpatialStage`);
6. instance masks (:mod:`probench.msgs.masks`), the target's points, a drawn debug image --
   each only when the caller wants it (someone subscribes);
7. the encoded output messages, through the one encoder (:mod:`probench.msgs.wire`).

A frame whose model call raises (the detector, its prompt plan, its output's checks) gets no
detections: :attr:`FrameAnswer.failed` names the error (``"ExcType: message"``) and
:attr:`FrameAnswer.failure_cdr` is the report every caller publishes for it (a
``diagnostic_msgs/DiagnosticArray`` with the frame's header on ``frame_errors``): the
evaluator counts the frame failed, apart from missed frames.

A caller keeps only what is its own: its transport (DDS topics, a bag, the fake link's
in-process delivery), its clock, its counters and its lifecycle. Operator prompt sets are
made ready with :meth:`FrameCore.make_ready` (the text side encoded once, the
acknowledgement's bytes returned).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from probench.detections import Detections
from probench.errors import ProbenchError
from probench.msgs.images import DEFAULT_MAX_PIXELS
from probench.msgs.shapes import Header, Stamp, stamp_at, stamp_ns
from probench.realtime.grounding_stats import DECODE_STAGE
from probench.realtime.grounding_worker import Prompts, StampedPromptSets
from probench.realtime.spatial_stage import (
    DEPTH_BUFFER,
    DEPTH_STAGE,
    DepthFields,
    SpatialSettings,
    SpatialStage,
)

if TYPE_CHECKING:
    from probench.models.base import Detector
    from probench.models.spec import ModelRecord
    from probench.prompting.policy import PromptPlan, PromptPolicy
    from probench.realtime.node_spec import GroundingConfig
    from probench.spatial.depth import Detections3D
    from probench.spatial.target import TargetChoice, TargetSelector

MASKS_STAGE = "masks"  # building the segmentation images (only while subscribed)
NO_PROMPTS = "no prompts yet: publish one on 'prompt' (or set the prompts parameter)"


@dataclass(frozen=True)
class CoreSettings:
    """The configure-time values the core answers frames with."""

    max_detections: int = 100
    max_pixels: int | None = DEFAULT_MAX_PIXELS
    frame_prompts_wait: float = 0.5  # seconds a frame waits for its stamped prompt set (while in use)
    score_threshold: float = 0.0  # stated in the acknowledgement (LabelInfo.threshold)


@dataclass(frozen=True)
class Wanted:
    """The optional outputs a caller wants for this frame (built only then: they cost)."""

    debug_image: bool = False  # the frame with boxes (and masks) drawn, RGB
    masks: bool = False  # segmentation/instances, semantic, confidence
    points: bool = False  # the target's points (PointCloud2), with depth and masks


@dataclass
class FrameAnswer:
    """What one frame was answered with. ``detections_cdr`` is None when the frame gets no
    answer at all (an undecodable image, a frame whose stamped set never came while there
    are no operator prompts, or a failed model call: ``failed``); ``error`` / ``problems``
    say why and what to log."""

    # the input frame's header (stamp 0 and no frame id until the frame is decoded)
    header: Header = field(default_factory=lambda: _Header(stamp_at(0), ""))
    stamp_ns: int = -1
    rgb: np.ndarray | None = None
    prompts: Prompts = ()  # the operator's prompts the frame was answered with: the class ids
    # the published set, best first; its tracker_id: the track ids (-1: none), None without a spatial stage
    detections: Detections = field(default_factory=Detections.empty)
    d3: Detections3D | None = None
    detections_cdr: bytes | None = None  # vision_msgs/Detection2DArray
    detections_3d_cdr: bytes | None = None  # vision_msgs/Detection3DArray (depth on, paired)
    target_pose_cdr: bytes | None = None  # geometry_msgs/PoseStamped (depth on, a target found)
    mask_cdr: dict[str, bytes] = field(default_factory=dict)  # topic -> sensor_msgs/Image
    mask_labels_cdr: bytes | None = None  # segmentation/label_info, when the class map changed
    points_cdr: bytes | None = None  # sensor_msgs/PointCloud2 of the target's mask pixels
    target_cdr: bytes | None = None  # vision_msgs/Detection2D: the target (tracking or depth on)
    target_index: int | None = None  # the target's row in ``detections``
    debug_rgb: np.ndarray | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)  # decode, text, ..., track, depth_3d
    processing_ms: float = 0.0  # the core's own time for this frame
    published_at: float = 0.0  # time.perf_counter() once the 2D answer was handed over (``on_2d``)
    bound: bool = False  # answered with its own stamped prompt set
    prompt_wait_ms: float = 0.0  # waited for the stamped set
    error: str = ""  # the frame could not be answered (counted as an error)
    failed: str = ""  # the model call raised: "ExcType: message" (the frame failed)
    failure_cdr: bytes | None = None  # the failed frame's report (diagnostic_msgs/DiagnosticArray)
    problems: list[str] = field(default_factory=list)  # lines to log (throttled by the caller)

    @property
    def answered(self) -> bool:
        return self.detections_cdr is not None


@dataclass(frozen=True)
class ReadyPrompts:
    """An operator prompt set made ready: its plan and the acknowledgement to publish."""

    plan: PromptPlan
    label_info_cdr: bytes  # vision_msgs/LabelInfo: the operator's prompts (the class ids)


class FrameCore:
    """The frame-answering core of one detector (module doc). Thread use: the caller's one
    worker answers frames and makes prompt sets ready; stamped sets and depth images may be
    put from another thread."""

    def __init__(self, detector: Detector, *, settings: CoreSettings | None = None,
                 spatial: SpatialStage | None = None, frame_sets: StampedPromptSets | None = None,
                 target: TargetSelector | None = None) -> None:
        from probench.prompting.policy import resolve_policy
        from probench.spatial.target import TargetSelector

        self.detector = detector
        self.settings = settings or CoreSettings()
        self.as_typed: PromptPolicy = resolve_policy("as_typed")  # without a policy: prompts as typed
        self.spatial = spatial
        self.frame_sets = frame_sets if frame_sets is not None else StampedPromptSets()
        self._mask_problem_said: set[str] = set()
        self._mask_problems: list[str] = []  # said once each, handed to the next answer
        self.masks_seen = False  # a frame's detections carried masks
        self._mask_prompts: Prompts | None = None  # the class map last handed out with mask images
        # which detection is the target (the operator's track, else the first prompt's best)
        self.target = target if target is not None else TargetSelector()
        self.target_state = "-"  # how the last frame's target was chosen (/diagnostics)

    # -- inputs besides the frame ------------------------------------------------------------
    def put_frame_prompts(self, stamp_ns: int, prompts: Prompts) -> None:
        """A prompt set stamped for one frame (checked by the caller's transport)."""
        self.frame_sets.put(stamp_ns, prompts)

    def put_depth_cdr(self, data: bytes) -> str | None:
        """A serialized depth ``sensor_msgs/Image``: only its header is read here, the pixels
        stay in the bytes until a colour frame pairs them. Returns a problem to log or None."""
        from probench.msgs.wire import image_from_cdr

        if self.spatial is None:
            return None
        try:
            img = image_from_cdr(data)
        except ProbenchError as exc:
            return self.spatial.once(f"depth image dropped: {exc}")
        self.spatial.put_depth(DepthFields(stamp_ns(img.header.stamp), img.height, img.width, img.encoding,
                                           img.is_bigendian, img.step, img.data))
        return None

    def put_camera_info(self, k: list[float], width: int, height: int) -> str | None:
        """The colour camera's intrinsics; a problem to log (once per reason) or None."""
        return None if self.spatial is None else self.spatial.put_camera_info(k, width, height)

    # -- operator prompts -------------------------------------------------------------------
    def make_ready(self, prompts: Prompts, stamp: Stamp, policy: PromptPolicy | None = None) -> ReadyPrompts:
        """Plan ``prompts`` under ``policy`` (the one in force: the caller's worker holds it;
        None: as typed) and make the model's text side ready; raises the model's
        :class:`ProbenchError` when it refuses them (the previous stay)."""
        from probench.msgs.wire import label_info_to_cdr

        plan = (policy or self.as_typed).plan(prompts)
        self.detector.set_prompts(list(plan.model_texts))
        header = _Header(stamp, "")
        # the acknowledgement lists the operator's prompts (the class ids), whatever the model gets
        return ReadyPrompts(plan, label_info_to_cdr(plan.operator, header, self.settings.score_threshold))

    # -- the frame -----------------------------------------------------------------------------
    def answer(self, data: bytes, *, compressed: bool, prompts: Prompts, policy: PromptPolicy | None = None,
               wanted: Wanted = Wanted(), on_2d: Callable[[FrameAnswer], None] | None = None) -> FrameAnswer:
        """Answer one serialized image message with the operator's ``prompts`` (the set active
        when the frame started), or with the set stamped for it, under ``policy`` (the one in
        force; None: as typed) (module doc). ``on_2d`` is
        called with the answer the moment its Detection2DArray is encoded, before 3D (which
        may wait for the frame's depth image), masks and drawing: a node publishes it there."""
        t0 = time.perf_counter()
        out = FrameAnswer()
        try:
            header, rgb = decode_frame(data, compressed=compressed, max_pixels=self.settings.max_pixels)
        except ProbenchError as exc:
            out.error = f"image dropped: {exc}"
            return out
        out.header, out.rgb = header, rgb
        out.stamp_ns = stamp_ns(header.stamp)
        out.stages_ms[DECODE_STAGE] = (time.perf_counter() - t0) * 1000.0
        if not self._take_prompts(out, prompts):
            out.processing_ms = (time.perf_counter() - t0) * 1000.0
            return out
        try:
            self._detect(out, policy or self.as_typed)
        except Exception as exc:  # noqa: BLE001 - a model that raises fails its frame, never the caller
            self._fail(out, exc)
            out.processing_ms = (time.perf_counter() - t0) * 1000.0
            return out
        self._encode(out, wanted, on_2d)
        out.processing_ms = (time.perf_counter() - t0) * 1000.0
        return out

    def _fail(self, out: FrameAnswer, exc: Exception) -> None:
        """The frame's model call raised: named, and its report encoded (module doc)."""
        from probench.msgs.wire import frame_failure_to_cdr

        out.failed = f"{type(exc).__name__}: {exc}"
        out.failure_cdr = frame_failure_to_cdr(out.header, out.failed, str(self.detector.name))

    def _take_prompts(self, out: FrameAnswer, operator: Prompts) -> bool:
        """The frame's prompts into ``out.prompts``; False: the frame gets no answer."""
        sets, wait_s = self.frame_sets, self.settings.frame_prompts_wait
        t_wait = sets.clock.monotonic()
        own = sets.take(out.stamp_ns, wait_s)
        out.prompt_wait_ms = (sets.clock.monotonic() - t_wait) * 1000.0
        out.bound = own is not None
        if own is not None:
            out.prompts = own
            return True
        out.prompts = operator
        if sets.in_use():
            # Per-frame sets are being sent but this frame's never came. An empty answer would
            # read as "nothing found with its set": without operator prompts, no answer at all.
            what = ("answered with the operator's prompts" if operator
                    else "not answered (no operator prompts)")
            out.problems.append(f"no prompt set stamped for the frame within {wait_s} s "
                                f"(frame_prompts_wait): {what}")
            return bool(operator)
        if not operator:
            out.problems.append(NO_PROMPTS)
        return True

    def _detect(self, out: FrameAnswer, policy: PromptPolicy) -> None:
        from probench.msgs.wire import top_order

        assert out.rgb is not None  # decoded by answer()
        if out.prompts:
            # the text side is made ready here (LRU-cached), so it counts in this frame's latency;
            # the policy's texts go to the model, the boxes come back under the operator's prompts
            plan = policy.plan(out.prompts)
            dets = plan.detect(self.detector, out.rgb)
            out.prompts = plan.operator
        else:
            dets = Detections.empty()
        dets = self._checked_masks(dets, out.rgb.shape[:2])
        dets = dets.filter(top_order(dets, self.settings.max_detections))  # the published set
        if self.spatial is not None:  # ids and 3D for exactly the detections published
            dets = self.spatial.track(dets, out.prompts, out.stamp_ns)
        out.stages_ms.update((k, v) for k, v in dets.timings_ms.items() if k != "total")
        out.detections = dets

    def _checked_masks(self, dets: Detections, image_hw: tuple[int, int]) -> Detections:
        """Masks of another size than the image (a plugin's bug) are dropped with one logged
        problem: the frame is still answered with its boxes."""
        from probench.spatial.errors import MaskShapeError
        from probench.spatial.masks import checked_masks

        if dets.masks is None:
            return dets
        try:
            checked_masks(dets, image_hw)
            return dets
        except MaskShapeError as exc:
            self._say_once(f"{exc}: masks dropped, boxes published")
        return dets.without_masks()

    def _say_once(self, why: str) -> None:
        if why not in self._mask_problem_said:
            self._mask_problem_said.add(why)
            self._mask_problems.append(why)

    def _encode(self, out: FrameAnswer, wanted: Wanted, on_2d: Callable[[FrameAnswer], None] | None) -> None:
        from probench.msgs.wire import detections_to_cdr

        dets = out.detections
        out.problems.extend(self._mask_problems)
        self._mask_problems.clear()
        out.detections_cdr = detections_to_cdr(dets, out.header, out.prompts)
        if on_2d is not None:
            on_2d(out)
        out.published_at = time.perf_counter()
        if dets.masks is not None:
            self.masks_seen = True
        choice = self._choose_target(out) if dets.tracker_id is not None else None
        spatial = self.spatial
        if spatial is not None and spatial.settings.depth:
            self._locate(out, spatial, choice)
        if (wanted.masks or wanted.points) and dets.masks is not None:
            self._masks(out, wanted)
        if wanted.debug_image:
            from probench.realtime.spatial_stage import spatial_labels
            from probench.viz import draw_detections

            assert out.rgb is not None
            extras = spatial_labels(dets, out.d3)
            out.debug_rgb = draw_detections(out.rgb, dets, out.prompts, extras=extras, masks=dets.masks)

    def _masks(self, out: FrameAnswer, wanted: Wanted) -> None:
        """The segmentation images (and the target's points) of the published detections."""
        from probench.msgs.masks import mono_image_to_cdr, points_to_cdr, semantic_label_info_to_cdr
        from probench.realtime.node_spec import MASK_TOPICS
        from probench.spatial.masks import compose_masks, target_detection, target_points

        dets, header = out.detections, out.header
        assert out.rgb is not None and dets.masks is not None
        t0 = time.perf_counter()
        try:
            if wanted.masks:
                images = compose_masks(dets, np.arange(len(dets)), out.rgb.shape[:2])
                out.mask_cdr = {topic: mono_image_to_cdr(image, header) for topic, image in zip(
                    MASK_TOPICS, (images.instances, images.semantic, images.confidence), strict=True)}
                if out.prompts != self._mask_prompts:  # the semantic image's class map, when it changes
                    out.mask_labels_cdr = semantic_label_info_to_cdr(out.prompts, header)
                    self._mask_prompts = out.prompts
            depth = self.spatial.last_depth if self.spatial is not None and out.d3 is not None else None
            target = out.target_index if out.target_cdr is not None else target_detection(dets, 0)
            if wanted.points and depth is not None and target is not None:
                points = target_points(depth[0], dets.masks[target], depth[1])
                out.points_cdr = points_to_cdr(points, header)
        except ProbenchError as exc:  # e.g. more prompts than the semantic image holds
            self._say_once(f"no mask images: {exc}")
            out.problems.extend(self._mask_problems)
            self._mask_problems.clear()
        out.stages_ms[MASKS_STAGE] = (time.perf_counter() - t0) * 1000.0

    def _choose_target(self, out: FrameAnswer) -> TargetChoice:
        """The frame's target (docs/GROUNDING_NODE.md, "Choosing the target"), encoded."""
        from probench.spatial.target import target_cdr

        choice = self.target.choose(out.detections, out.prompts, out.stamp_ns / 1e9)
        self.target_state, out.target_index = choice.state, choice.index
        out.target_cdr = target_cdr(choice, out.detections, out.header)
        return choice

    def _locate(self, out: FrameAnswer, spatial: SpatialStage, choice: TargetChoice | None) -> None:
        """After the 2D answer: the frame's depth paired, the 3D outputs encoded."""
        from probench.spatial.messages import detections_3d_cdr, target_pose_cdr
        from probench.spatial.target import target_pose_cdr_for

        assert out.rgb is not None
        est, ms, problem = spatial.locate(out.detections, out.stamp_ns, out.rgb.shape[:2])
        out.stages_ms[DEPTH_STAGE] = ms
        if problem:
            out.problems.append(f"no 3D output: {problem} (2D detections go on)")
        if est is None:
            return
        out.d3 = est
        out.detections_3d_cdr = detections_3d_cdr(est, out.detections, out.header, out.prompts)
        # the operator's track, when one is chosen; else the first prompt's best with a 3D estimate
        out.target_pose_cdr = (target_pose_cdr_for(choice, est, out.header) if choice is not None and
                               choice.mode != "best" else target_pose_cdr(est, out.detections, out.header))


    def output_diagnostics(self) -> dict[str, Any]:
        """/diagnostics keys of the core's optional outputs."""
        return {"masks_seen": self.masks_seen, "target": self.target_state}


REPLAY_DEPTH_BUFFER = 16  # depth images a bag's replay keeps while their colour frame is awaited


def node_core(detector: Detector, cfg: GroundingConfig, frame_sets: StampedPromptSets | None = None,
              target: TargetSelector | None = None, *, replay: bool = False) -> FrameCore:
    """The core of a grounding node configured with ``cfg`` (its spatial stage with tracking
    or a depth topic): the node's, ``probench ground``'s and the fake link's, built here
    only. ``frame_sets``: the stamped-set map (a simulated clock's); ``target``: the node's
    target selection (it outlives configure); ``replay``: a bag's replay (``probench
    ground``), which hands depth images and stamped prompt sets over ahead of their frames,
    so a frame never waits for one (one not there by its frame never comes) and more depth
    images are kept."""
    depth = bool(cfg.depth_topic.strip())
    spatial = None
    if depth or cfg.tracking:
        spatial = SpatialStage(SpatialSettings(depth=depth, tracking=cfg.tracking,
                                               tolerance_s=cfg.depth_tolerance,
                                               min_depth_pixels=cfg.min_depth_pixels,
                                               max_depth=cfg.max_depth,
                                               wait_s=0.0 if replay else None,
                                               depth_buffer=REPLAY_DEPTH_BUFFER if replay else DEPTH_BUFFER))
    settings = CoreSettings(max_detections=cfg.max_detections, max_pixels=cfg.max_image_pixels,
                            frame_prompts_wait=0.0 if replay else cfg.frame_prompts_wait,
                            score_threshold=cfg.score_threshold)
    return FrameCore(detector, settings=settings, spatial=spatial, frame_sets=frame_sets, target=target)


def free_model_memory() -> None:
    """After a detector is dropped: collect it, and give cached GPU memory back."""
    import gc
    import sys

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def decode_frame(data: bytes, *, compressed: bool, max_pixels: int | None) -> tuple[Header, np.ndarray]:
    """``(header, writable rgb)`` of a serialized Image / CompressedImage; a compressed one
    over ``max_pixels`` is refused from its header (a one-line :class:`ProbenchError`)."""
    from probench.msgs.wire import rgb_from_cdr

    header, rgb = rgb_from_cdr(data, compressed=compressed, max_pixels=max_pixels)
    if not rgb.flags.writeable:  # a view of the immutable wire bytes: models may write
        rgb = rgb.copy()
    return header, rgb


@runtime_checkable
class _MaskSwitch(Protocol):
    return_masks: bool  # a model that builds masks only on request


def enable_masks(detector: Detector, wanted: bool) -> bool:
    """Ask a mask-capable detector for instance masks (``wanted``); True when its frames will
    carry them. A model that builds masks on request has a ``return_masks`` attribute
    (SAM3, YOLOE, ``test-masks``); a model whose zoo or plugin spec says it predicts masks
    gives them always."""
    if isinstance(detector, _MaskSwitch) and detector.return_masks is not None:
        detector.return_masks = bool(wanted)
        return bool(wanted)
    info: ModelRecord | None = getattr(detector, "model_info", None)  # (a test double may have none)
    try:
        from probench.models.zoo import resolve

        spec, _ = resolve(str(info.get("name", "")) if info else "")
    except ProbenchError:
        return False
    return bool(wanted) and spec.capabilities.masks


@dataclass(frozen=True)
class _Header:
    stamp: Stamp
    frame_id: str
