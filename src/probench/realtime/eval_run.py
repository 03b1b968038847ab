"""The evaluator's run, as its four steps: ``plan``, ``stream``, ``collect``, ``finish``.

1. :func:`plan`: the run's identity (the grounding node's model settings, the bag's dataset,
   the replay settings) opens or resumes the run folder (:mod:`probench.cache.identity`),
   and each formulation gets the frames still to do (:mod:`probench.realtime.eval_plan`).
2. :func:`probench.realtime.eval_stream.stream`: per formulation, each frame's stamped prompt set
   then its image, at ``rate_hz`` or as fast as answered.
3. :meth:`probench.realtime.eval_stream.Collector.collect` credits each answer to its frame;
   :class:`Recorder` (one thread, so that no file write delays the replay clock) appends a
   trace record per frame (``realtime_frames.jsonl``) and the frame's results to the
   prediction cache (resumable: docs/FORMATS.md, "predictions/<formulation>.json"), then
   finalizes each formulation.
4. :func:`finish`: ``realtime.json`` from the trace, run.json's status, ``metrics.json``.

No rclpy here: the transport is an :class:`EvaluatorLink` (the evaluator node over DDS,
an in-process fake in the tests).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from probench.cache.crash import crash_point
from probench.cache.identity import RunIdentity, RunSession
from probench.cache.records import METRICS_FILE, REALTIME_FILE, MetricsRecord, RealtimeFigures
from probench.cache.run import JsonlLog, RunDir
from probench.cache.trace import TRACE_FILE, read_trace
from probench.data.negatives import NEGATIVES_SETTING, Negatives
from probench.realtime.eval_plan import FormulationPlan, FramePlan, plan_formulation
from probench.realtime.eval_realtime import realtime_summary
from probench.realtime.eval_stream import MONOTONIC, Answer, Clock, Collector, Link, stream, warm_up
from probench.realtime.node_spec import EvaluatorConfig, budget_ms
from probench.vocabulary import POLICY_FORMULATION, CocoResult

if TYPE_CHECKING:
    from probench.bags.reader import ProbenchBag
    from probench.data.dataset import Dataset

# one write for the Recorder's thread: (frame, its trace record, its results); None ends it
_Write = tuple[FramePlan | None, dict[str, Any] | None, list[CocoResult]]


class EvaluatorLink(Link, Protocol):
    """The transport (:class:`probench.realtime.eval_stream.Link`) plus what the run needs."""

    def grounding_parameters(self, timeout: float) -> dict[str, Any]:
        """The grounding node's model settings (model, device, precision, weights, ...)."""

    def wait_ready(self, compressed: bool, timeout: float) -> None:
        """Until the grounding node subscribes to the image and frame_prompts topics."""

    def image_from_bag(self, raw: bytes) -> object:
        """The image message to publish, from its serialized bytes in the bag."""

    def set_answer_handler(self, handler: Callable[[Answer], object]) -> None: ...

    def set_prompt_policy(self, policy: str, profile: str, timeout: float) -> None:
        """The grounding node's prompt policy for the frames that follow (docs/PROMPTING.md)."""

    def info(self, text: str) -> None: ...

    def warning(self, text: str) -> None: ...


# -- 1. plan -------------------------------------------------------------------------------
def ros_identity(
    evaluator: Mapping[str, Any], grounding: Mapping[str, Any], dataset: Mapping[str, Any], *,
    bag: str, compressed: bool, sequence: bool = False, negatives: Negatives | None = None,
    made_from: str | None = None,
) -> RunIdentity:
    """The identity of an evaluation through the ROS graph, from the evaluator's parameters,
    the grounding node's and the bag's dataset summary. ``probench eval`` builds the same
    from the parameter files before starting any node (so a mismatch is refused before a
    model loads); the evaluator builds it from the running nodes. ``made_from``: the dataset
    folder the bag records (:attr:`probench.bags.reader.ProbenchBag.dataset_folder`)."""
    from probench.models.zoo import model_record

    weights = str(grounding.get("weights") or "") or None
    settings = {
        "mode": evaluator["mode"],
        "rate_hz": float(evaluator["rate_hz"]),
        "budget_ms": budget_ms(float(evaluator["budget_ms"]), float(evaluator["rate_hz"])),
        "answer_timeout": float(evaluator["answer_timeout"]),
        "warmup_frames": int(evaluator["warmup_frames"]),
        "score_threshold": grounding.get("score_threshold"),
        "max_detections": grounding.get("max_detections"),
        "image_reliability": grounding.get("image_reliability"),
        "compressed": bool(compressed),
        "prompts": "per frame: its label space, stamped (frame_prompts)",
    }
    if sequence:  # a sequence bag: realtime/eval_sequence.py
        settings["prompts"] = "per video: operator prompts (prompt), at its start and at each prompt change"
        settings["tracking"] = bool(grounding.get("tracking"))
    if negatives is not None:  # absent queries in the frames' label spaces (data/negatives.py); only then
        settings[NEGATIVES_SETTING] = negatives.record()
    if evaluator.get("prompt_policy"):
        from probench.prompting.policy import resolve_policy

        settings["prompt_policy"] = resolve_policy(
            str(evaluator["prompt_policy"]), model=str(grounding.get("model") or ""),
            paper_name=str(model_record(str(grounding.get("model") or ""))["paper_name"]),
            profile=str(evaluator.get("prompt_profile") or "") or None).record()
    return RunIdentity(
        source="ros", model=model_record(str(grounding.get("model") or ""), weights=weights,
                                         preprocess=str(grounding.get("preprocess") or "device")),
        # the dataset came embedded in the bag: no folder path, the bag instead
        dataset={**dataset, "path": None, "bag": str(Path(bag).resolve()), "made_from": made_from},
        device=str(grounding.get("device")), precision=str(grounding.get("precision")), settings=settings,
    )


def evaluator_negatives(evaluator: EvaluatorConfig | Mapping[str, Any]) -> Negatives | None:
    """The absent queries the evaluator's ``negatives`` / ``negatives_seed`` ask (None: none)."""
    values = asdict(evaluator) if isinstance(evaluator, EvaluatorConfig) else evaluator
    k = int(values.get("negatives") or 0)
    return Negatives(k, int(values.get("negatives_seed") or 0)) if k > 0 else None


@dataclass
class RunPlan:
    session: RunSession
    recorder: Recorder
    formulations: list[FormulationPlan] = field(default_factory=list)  # with frames still to do
    skipped: list[str] = field(default_factory=list)  # complete already


def plan(cfg: EvaluatorConfig, bag: ProbenchBag, grounding: Mapping[str, Any]) -> RunPlan:
    """Open (or resume) the run folder and plan each formulation's frames still to do."""
    from probench.cache.identity import open_run

    identity = ros_identity(asdict(cfg), grounding, bag.dataset.summary(), bag=cfg.bag,
                            compressed=bag.compressed, sequence=bool(bag.dataset.videos),
                            negatives=bag.negatives, made_from=bag.dataset_folder)
    session = open_run(cfg.out, identity, formulations=cfg.run_formulations, overwrite=cfg.overwrite,
                       timing_key="eval_s", extra={"ros": {
                           "mode": cfg.mode, "rate_hz": cfg.rate_hz, "bag": str(Path(cfg.bag).resolve()),
                           "grounding_node": cfg.grounding_node, "warmup_frames": cfg.warmup_frames}})
    recorder = Recorder(session.run, cfg.run_formulations)
    frames = bag.frame_infos()
    out = RunPlan(session, recorder)
    for f in cfg.run_formulations:
        if f in recorder.writers:
            out.formulations.append(plan_formulation(frames, f, recorder.writers[f].done_images))
        else:
            out.skipped.append(f)
    return out


# -- 3. collect (the writer) -------------------------------------------------------------
class Recorder:
    """The one thread that writes: trace records and prediction lines, in the order the
    collector resolves frames. :meth:`put` never blocks (it runs on the transport's thread)."""

    def __init__(self, run: RunDir, formulations: Sequence[str]) -> None:
        self.writers = run.open_writers(formulations)
        self.trace = JsonlLog(run.path / TRACE_FILE)
        self._queue: queue.Queue[_Write | None] = queue.Queue()
        self._failure: BaseException | None = None
        self.on_frame: Callable[[], None] = lambda: None  # progress bar
        self._thread = threading.Thread(target=self._loop, name="evaluator-writer", daemon=True)
        self._thread.start()

    def put(self, frame: FramePlan | None, record: dict[str, Any] | None, results: list[CocoResult]) -> None:
        self._queue.put((frame, record, results))

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                frame, record, results = item
                if self._failure is None:
                    if record is not None:
                        self.trace.append(record)
                    if frame is not None:
                        self.writers[frame.formulation].add_image(frame.image_id, results)
                        self.on_frame()
                        crash_point("eval.record")
            except BaseException as exc:  # noqa: BLE001 - raised on the main thread by check()
                self._failure = exc
            finally:
                self._queue.task_done()

    def check(self) -> None:
        if self._failure is not None:
            raise self._failure

    def finalize(self, formulation: str) -> None:
        """Every frame of the formulation written: its predictions file, atomically."""
        self._queue.join()
        self.check()
        self.writers[formulation].finalize()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30.0)
        self.trace.close()
        for w in self.writers.values():
            w.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the run ------------------------------------------------------------------------------
def run_evaluation(link: EvaluatorLink, cfg: EvaluatorConfig, clock: Clock | None = None) -> MetricsRecord:
    """Plan, warm up, stream and collect every formulation, finish. Returns the metrics
    (also in RUN/metrics.json)."""
    from probench.bags.reader import ProbenchBag

    bag = ProbenchBag(cfg.bag)
    try:
        bag.add_negatives(evaluator_negatives(cfg))
        return _run(link, cfg, bag, clock)
    finally:
        bag.close()


def warm_up_session(link: EvaluatorLink, bag: ProbenchBag, frames: Sequence[FramePlan], collector: Collector,
                    cfg: EvaluatorConfig) -> None:
    """The session's discarded trial (:func:`probench.realtime.eval_stream.warm_up`): the
    first ``warmup_frames`` of ``frames`` (cycled when there are fewer), before any
    measured frame."""
    if cfg.warmup_frames <= 0 or not frames:
        return
    some = list(frames[: cfg.warmup_frames])
    images = [link.image_from_bag(raw) for raw in bag.images_at([fp.bag_time_ns for fp in some])]
    link.info(f"warm-up: {cfg.warmup_frames} frame(s), one at a time, scored nowhere")
    warm_up(link, some, images, collector, n=cfg.warmup_frames, answer_timeout_s=cfg.answer_timeout)


def _run(link: EvaluatorLink, cfg: EvaluatorConfig, bag: ProbenchBag, clock: Clock | None) -> MetricsRecord:

    from tqdm import tqdm

    clock = clock or MONOTONIC
    grounding = link.grounding_parameters(cfg.startup_timeout)
    if grounding.get("prompts"):
        link.warning(f"the grounding node has operator prompts {list(grounding['prompts'])!r}: a frame whose "
                     "own prompt set does not reach it in time would be answered with them (never credited)")
    run_plan = plan(cfg, bag, grounding)
    session, recorder = run_plan.session, run_plan.recorder
    todo = sum(len(p.frames) + len(p.empty) for p in run_plan.formulations)
    # exits in reverse: the recorder is closed (its last writes done) before a failure is
    # recorded in run.json, then the bar
    with tqdm(total=todo, desc="eval", unit="frame", disable=None) as bar, session.recording(), recorder:
        recorder.on_frame = lambda: bar.update(1)  # the bar on stderr, only on a terminal
        crash_point("eval.started")
        emit = _with_video(recorder.put, bag.dataset) if bag.dataset.videos else recorder.put
        collector = Collector(emit, answer_timeout_s=cfg.answer_timeout,
                              session=session.info.resumed or 0, ok=link.ok, clock=clock)
        link.set_answer_handler(collector.collect)
        for f in run_plan.skipped:
            link.info(f"{f}: already complete, skipped")
        if bag.dataset.videos:  # a sequence bag: video by video, with operator prompts
            _run_sequences(link, cfg, bag, run_plan, collector, recorder)
            recorder.check()
            return finish(session, bag.dataset, cfg)
        todo_plans = [p for p in run_plan.formulations if p.frames]
        if todo_plans:
            link.wait_ready(bag.compressed, cfg.startup_timeout)
            warm_up_session(link, bag, todo_plans[0].frames, collector, cfg)
        for fplan in run_plan.formulations:
            empty = f", {len(fplan.empty)} with an empty label space (recorded with no detections)"
            link.info(f"{fplan.formulation}: {len(fplan.frames)} frame(s) to replay, each with its own "
                      f"prompt set ({fplan.already_done} already done{empty if fplan.empty else ''})")
            if cfg.prompt_policy:  # the policy for its own frames only, as typed for the paper's
                own = fplan.formulation == POLICY_FORMULATION
                policy, profile = (cfg.prompt_policy, cfg.prompt_profile) if own else ("as_typed", "")
                link.set_prompt_policy(policy, profile, cfg.startup_timeout)
            for fp in fplan.empty:  # nothing to ask: no detections
                recorder.put(fp, None, [])
            raws = bag.iter_images([fp.bag_time_ns for fp in fplan.frames])
            # read and decoded ahead by a thread (a few frames in memory at a time), so
            # that neither a long stream nor a zstd chunk upsets the replay clock
            images = prefetch(link.image_from_bag(raw) for raw in raws)
            stream(link, fplan.frames, images, collector, mode=cfg.mode, rate_hz=cfg.rate_hz,
                   answer_timeout_s=cfg.answer_timeout)
            recorder.finalize(fplan.formulation)
            crash_point("eval.formulation_done")
        recorder.check()
    return finish(session, bag.dataset, cfg)


def _with_video(put: Callable[[FramePlan | None, dict[str, Any] | None, list[CocoResult]], None],
                dataset: Dataset) -> Callable[[FramePlan | None, dict[str, Any], list[CocoResult]], None]:
    """The recorder's ``put`` adding each frame record's ``video_id``: a video is streamed on
    its own, and the real-time figures take each as a stream (eval_realtime._streams)."""
    video_of = {i: vid for vid, v in dataset.videos.items() for i in v.image_ids}

    def emit(frame: FramePlan | None, record: dict[str, Any], results: list[CocoResult]) -> None:
        if "image_id" in record and int(record["image_id"]) in video_of:
            record["video_id"] = video_of[int(record["image_id"])]
        put(frame, record, results)

    return emit


def _run_sequences(link: EvaluatorLink, cfg: EvaluatorConfig, bag: ProbenchBag, run_plan: RunPlan,
                   collector: Collector, recorder: Recorder) -> None:
    """A sequence bag's replay (:mod:`probench.realtime.eval_sequence`)."""
    from probench.realtime.eval_sequence import SequenceRun, run_sequences

    if not all(hasattr(link, m) for m in ("set_prompts", "set_ack_handler", "ready_for_operator_prompts")):
        raise TypeError(f"{type(link).__name__} cannot send operator prompts: a sequence bag needs them")
    for f in run_plan.skipped:
        link.info(f"{f}: already complete, skipped")
    forms = [p.formulation for p in run_plan.formulations]
    if forms:
        link.wait_ready(bag.compressed, cfg.startup_timeout)

    def set_policy(f: str) -> None:
        if cfg.prompt_policy:  # the policy for its own frames only, as typed for the paper's
            own = f == POLICY_FORMULATION
            policy, profile = (cfg.prompt_policy, cfg.prompt_profile) if own else ("as_typed", "")
            link.set_prompt_policy(policy, profile, cfg.startup_timeout)

    def images(times: Sequence[int]) -> Iterator[Any]:
        return prefetch(link.image_from_bag(raw) for raw in bag.iter_images(list(times)))

    run = SequenceRun(forms, {f: recorder.writers[f].done_images for f in forms}, recorder.put,
                      recorder.finalize, images, link.info, link.warning)
    run_sequences(link, bag.dataset, bag.frame_infos(), run, collector,  # type: ignore[arg-type]
                  mode=cfg.mode, rate_hz=cfg.rate_hz, answer_timeout_s=cfg.answer_timeout,
                  ack_timeout_s=cfg.startup_timeout, warmup_frames=cfg.warmup_frames, set_policy=set_policy)


# -- 4. finish -----------------------------------------------------------------------------
def finish(session: RunSession, dataset: Dataset, cfg: EvaluatorConfig) -> MetricsRecord:
    """``realtime.json`` from the whole trace (every session), run.json's status, then the
    scores (``metrics.json``, with ``realtime`` in it). A replay with frames whose model
    call raised is not complete: run.json says ``failed``, naming the first error."""
    from probench.scoring import score_run
    from probench.scoring.bootstrap import DEFAULT_RESAMPLES

    crash_point("eval.finishing")
    run = session.run
    realtime = realtime_summary(read_trace(run.path / TRACE_FILE), budget_ms=cfg.budget,
                                rate_hz=cfg.rate_hz, mode=cfg.mode, warmup_frames=cfg.warmup_frames)
    run.write_record(REALTIME_FILE, realtime)
    session.finish(error=failed_frames_error(realtime))
    crash_point("eval.scoring")
    # the same metrics.json as `probench score` gives (intervals and error types included)
    metrics = score_run(dataset, run.path, bootstrap=DEFAULT_RESAMPLES, errors=True)
    run.write_record(METRICS_FILE, metrics)
    return metrics


def failed_frames_error(realtime: RealtimeFigures | None) -> str | None:
    """The one line that says a replay had frames whose model call raised (None: it had
    none): how many, and the first error."""
    if realtime is None or not realtime.frames_failed:
        return None
    return (f"{realtime.frames_failed} frame(s) failed in the grounding node's model (counted apart from the "
            f"missed ones), the first with {realtime.first_error}")


# -- the result record ---------------------------------------------------------------------
RESULT_STATUSES = ("complete", "incomplete", "interrupted", "failed")


def write_result(path: str | Path, status: str, *, error: str | None = None, **files: str | None) -> None:
    """The evaluator's result record (``result_file``), written atomically as it exits:
    ``status`` (complete | incomplete | interrupted | failed), ``error`` and the files it
    wrote (``metrics``, ``max_rate``: paths). ``probench eval`` reads it instead of guessing
    from the run folder; a missing record means the node never got that far."""
    from probench.cache.atomic import write_json_atomic

    if status not in RESULT_STATUSES:
        raise ValueError(f"result status must be one of {', '.join(RESULT_STATUSES)}, got {status!r}")
    write_json_atomic(Path(path), {"status": status, "error": error, **files})


def read_result(path: str | Path) -> dict[str, Any] | None:
    """The result record at ``path`` (None when there is none, or it is unreadable)."""
    import json

    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and value.get("status") in RESULT_STATUSES else None


def prefetch(items: Iterator[Any], depth: int = 8) -> Iterator[Any]:
    """``items``, produced by a background thread at most ``depth`` ahead of the consumer;
    an exception in the producer is raised in the consumer."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)  # items, then `done` or the producer's exception
    done = object()
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            q.put(exc)

    thread = threading.Thread(target=produce, name="evaluator-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
