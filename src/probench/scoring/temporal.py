"""Temporal metrics of a run on a sequence dataset (docs/METRICS.md, "Temporal metrics").

A **target** is one query in one video, on the frames whose prompt set holds it (its
*active* frames); it is **visible** on the active frames where it has non-crowd ground
truth. On every active frame the run's answer for the target is its query's top-1
prediction (the highest score; the first in file order on a tie), and the target is
**found** on a visible frame when that prediction overlaps one of its query's boxes there
with IoU >= ``IOU`` (0.5). Per formulation:

- ``continuity``: found visible target-frames / visible target-frames (pooled);
- ``flicker_per_100_frames``: found -> lost -> found transitions (a run of lost visible
  frames with found visible frames on both sides; frames where the target is not visible
  are skipped, so an occlusion is no loss) per 100 visible target-frames;
- the CLEAR MOT and identity metrics of motmetrics (``mota``, ``motp``, ``idf1``,
  ``id_switches``, ``num_fragmentations``, ...), over one accumulator per target: ground
  truth ids are the annotations' ``track_id``, hypotheses the top-1 prediction of every
  active frame (a top-1 on a frame where the target is not visible is a false positive),
  matched at IoU >= 0.5. A hypothesis's id is the prediction's ``track_id`` (the grounding
  node's tracker, ``tracking`` on) when the run's predictions carry one, else its query
  (``identity`` says which: with ``query`` an ID switch cannot happen, and IDF1 measures
  whether one answer keeps to one object). With ``track_id``, a top-1 without one (a
  detection the tracker has not confirmed yet: a track's first frame) has no identity: it
  is no hypothesis (neither a match nor a false positive: the target is missed on that
  frame, as a tracker's output without unconfirmed tracks is scored), never an ID switch;
  continuity and flicker still count it as found;
- ``hota``, ``deta``, ``assa``: HOTA and its detection and association parts (TrackEval's
  definition, averaged over IoU thresholds 0.05..0.95; the ``trackers`` library's port of
  TrackEval) over the same sequences;
- ``id_switches_per_100_frames``: ID switches per 100 active target-frames;
- ``prompt_change``: per prompt change and each query it adds, the frames from the change
  to the first frame where that target is found, and the same in ms: on the dataset's
  timestamps (``latency_ms_data``) and, for a ROS run, to the arrival of the answer that
  found it (``latency_ms_ros``, from the run's trace: from the operator prompt's publication
  when the change was sent as one, else from the changed frame's stamp; :func:`_ros_latency`).

``temporal_pcr``: the share of targets (with a visible frame) found on at least
``TEMPORAL_PCR_SHARE`` of their visible frames under every formulation of their query's
coref set; null, with ``temporal_pcr_null_reason``, when the run lacks one of them.
``timelines`` holds each target's frames as one character each (``1`` found, ``0`` lost,
``-`` not visible, `` `` not active): what the report's timeline figure draws.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from probench.cache.records import (
    HOTA_FIELDS,
    MOT_FIELDS,
    PromptChange,
    Temporal,
    TemporalGroup,
    TemporalScores,
)
from probench.scoring.constants import PCR_IOU

if TYPE_CHECKING:
    from pathlib import Path

    from probench.cache.run import RunDir
    from probench.data.dataset import Dataset

__all__ = ["IOU", "TEMPORAL_PCR_SHARE", "Target", "TrackedTop1", "temporal_metrics", "top1_by_pair"]

PROMPT_KIND = "prompt"  # the trace records of operator prompts (realtime/eval_sequence.py)
IOU = PCR_IOU  # a target is found when its top-1 overlaps it this much
TEMPORAL_PCR_SHARE = 0.8  # of a target's visible frames, under every formulation of its coref set
FOUND, LOST, HIDDEN, INACTIVE = "1", "0", "-", " "
MOT_KEYS = MOT_FIELDS  # the motmetrics figures kept (their names), and under which key


@dataclass(frozen=True)
class TrackedTop1:
    """One (image, query) pair's top-1 prediction."""

    box: tuple[float, float, float, float]  # x, y, w, h
    score: float
    track_id: int | None


@dataclass
class Target:
    """One query in one video: its active frames' image ids, ground truth and answers."""

    video_id: int
    query_id: int
    frames: list[int] = field(default_factory=list)  # frame indices where active
    image_ids: list[int] = field(default_factory=list)
    gt: list[list[tuple[int, tuple[float, float, float, float]]]] = field(default_factory=list)  # (id, xywh)

    @property
    def key(self) -> str:
        return f"{self.video_id}:{self.query_id}"


def top1_by_pair(records: Iterable[Mapping[str, Any]]) -> dict[tuple[int, int], TrackedTop1]:
    """Each (image, query) pair's highest-scoring prediction (the first on a tie)."""
    out: dict[tuple[int, int], TrackedTop1] = {}
    for r in records:
        key = (int(r["image_id"]), int(r["category_id"]))
        score = float(r["score"])
        best = out.get(key)
        if best is None or score > best.score:
            tid = r.get("track_id")
            x, y, w, h = (float(v) for v in r["bbox"])
            out[key] = TrackedTop1((x, y, w, h), score, None if tid is None else int(tid))
    return out


def _targets(dataset: Dataset) -> list[Target]:
    by_image = dataset.annotations_by_image
    out: dict[tuple[int, int], Target] = {}
    for vid, video in dataset.videos.items():
        for k, iid in enumerate(video.image_ids):
            for q in dataset.label_space(iid):
                t = out.setdefault((vid, q), Target(vid, q))
                t.frames.append(k)
                t.image_ids.append(iid)
                t.gt.append(
                    [
                        (a.track_id if a.track_id is not None else -a.id, a.bbox)
                        for a in by_image.get(iid, [])
                        if a.query_id == q and not a.iscrowd
                    ]
                )
    return [out[k] for k in sorted(out)]


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    iw, ih = min(ax1, bx1) - max(a[0], b[0]), min(ay1, by1) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def timeline(target: Target, top1: Mapping[tuple[int, int], TrackedTop1], n_frames: int) -> str:
    """The target's frames as characters (module doc)."""
    chars = [INACTIVE] * n_frames
    for k, iid, gt in zip(target.frames, target.image_ids, target.gt, strict=True):
        if not gt:
            chars[k] = HIDDEN
            continue
        best = top1.get((iid, target.query_id))
        chars[k] = FOUND if best is not None and max(_iou(best.box, b) for _, b in gt) >= IOU else LOST
    return "".join(chars)


def flicker_count(line: str) -> int:
    """found -> lost -> found transitions of a timeline (visible frames only)."""
    seen = line.replace(HIDDEN, "").replace(INACTIVE, "")
    runs = seen.strip(LOST)  # a loss at either end is not bounded by founds
    return sum(1 for i in range(1, len(runs)) if runs[i] == LOST and runs[i - 1] == FOUND)


def iou_distances(gt: Sequence[Sequence[float]], hyps: Sequence[Sequence[float]]) -> np.ndarray:
    """motmetrics' distance matrix: 1 - IoU, NaN (no match) where IoU < ``IOU``. (motmetrics
    1.4.0's own ``iou_matrix`` calls ``np.asfarray``, which NumPy 2 removed.)"""
    out = np.full((len(gt), len(hyps)), np.nan)
    for i, g in enumerate(gt):
        for j, h in enumerate(hyps):
            iou = _iou(g, h)
            if iou >= IOU:
                out[i, j] = 1.0 - iou
    return out


def _mot(
    targets: Sequence[Target], top1: Mapping[tuple[int, int], TrackedTop1], by_track: bool
) -> dict[str, Any]:
    """motmetrics over one accumulator per target (module doc)."""
    import motmetrics as mm

    accs, names = [], []
    for t in targets:
        acc = mm.MOTAccumulator(auto_id=False)
        hyp_index: dict[int | None, int] = {}  # the answer's identity -> motmetrics' (numeric) id
        for k, iid, gt in zip(t.frames, t.image_ids, t.gt, strict=True):
            best = _identified(top1.get((iid, t.query_id)), by_track)
            hyp_ids: list[int] = []
            hyp_boxes: list[Sequence[float]] = []
            if best is not None:
                hyp_ids = [hyp_index.setdefault(best.track_id if by_track else None, len(hyp_index))]
                hyp_boxes = [best.box]
            acc.update([g for g, _ in gt], hyp_ids, iou_distances([b for _, b in gt], hyp_boxes), frameid=k)
        accs.append(acc)
        names.append(t.key)
    if not accs:
        return {}
    summary = mm.metrics.create().compute_many(
        accs, metrics=list(MOT_KEYS), names=names, generate_overall=True
    )
    row = summary.loc["OVERALL"]
    out: dict[str, Any] = {}
    for name, key in MOT_KEYS.items():
        v = float(row[name])
        out[key] = (
            None
            if not np.isfinite(v)
            else (int(v) if name.startswith(("num_", "mostly")) else round(v, 6) + 0.0)
        )  # no -0.0
    return out


def _identified(best: TrackedTop1 | None, by_track: bool) -> TrackedTop1 | None:
    """The top-1 as a hypothesis of the identity metrics: with track ids, one without an id
    (unconfirmed) is none (module doc)."""
    return None if best is None or (by_track and best.track_id is None) else best


def _hota(
    targets: Sequence[Target], top1: Mapping[tuple[int, int], TrackedTop1], by_track: bool
) -> dict[str, Any]:
    """HOTA, DetA and AssA (TrackEval's definition, as ported by the ``trackers`` library's
    ``trackers.eval``), over the same per-target sequences as :func:`_mot`."""
    from trackers.eval import aggregate_hota_metrics, compute_hota_metrics

    seqs = []
    for t in targets:
        hyp_index: dict[int | None, int] = {}
        gt_ids, hyp_ids, sims = [], [], []
        for iid, gt in zip(t.image_ids, t.gt, strict=True):
            best = _identified(top1.get((iid, t.query_id)), by_track)
            hyps = [] if best is None else [best]
            gt_ids.append(np.array([g for g, _ in gt], dtype=np.int64))
            key = [(h.track_id if by_track else None) for h in hyps]
            hyp_ids.append(np.array([hyp_index.setdefault(k, len(hyp_index)) for k in key], dtype=np.int64))
            sims.append(np.array([[_iou(b, h.box) for h in hyps] for _, b in gt]).reshape(len(gt), len(hyps)))
        seqs.append(compute_hota_metrics(gt_ids, hyp_ids, sims))
    if not seqs:
        return {}
    agg = aggregate_hota_metrics(seqs)
    return {key: round(float(agg[name]), 6) for name, key in HOTA_FIELDS.items()}


def _mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None


def _mean_of(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are there (None when none is)."""
    return _mean([v for v in values if v is not None])


def _share(num: int, den: int, per: float = 1.0) -> float | None:
    return round(per * num / den, 6) if den else None


FrameTimes = Mapping[int, Mapping[str, Any]]  # image id -> its trace record (stamp_ns, sent_ns, received_ns)


PromptEvents = Mapping[tuple[int, int], Mapping[str, Any]]  # (video, frame index) -> its prompt record


def _ros_latency(start: Mapping[str, Any] | None, end: Mapping[str, Any] | None,
                 event: Mapping[str, Any] | None) -> float | None:
    """ms from the new prompt to the arrival of the answer that found the target: from the
    operator prompt's send (same session: one monotonic clock), else from the changed frame's
    stamp (a replay with stamped sets: the stamps' grid plus that answer's own latency)."""
    if end is None or end.get("received_ns") is None:
        return None
    if event is not None:
        if event.get("sent_ns") is None or event.get("session") != end.get("session"):
            return None
        return round(float(end["received_ns"] - event["sent_ns"]) / 1e6, 3)
    if start is None:
        return None
    return round(float(end["stamp_ns"] - start["stamp_ns"] + end["received_ns"] - end["sent_ns"]) / 1e6, 3)


def _prompt_changes(dataset: Dataset, lines: Mapping[str, str], times: FrameTimes | None,
                    events: PromptEvents | None) -> list[PromptChange]:
    out = []
    for vid, video in dataset.videos.items():
        previous = set(dataset.label_space(video.image_ids[0]))
        for ch in video.prompt_changes:
            new = [q for q in ch.query_ids if q not in previous] or list(ch.query_ids)
            previous = set(ch.query_ids)
            event = (events or {}).get((vid, ch.frame_index))
            for q in new:
                line = lines.get(f"{vid}:{q}", "")
                hit = next((k for k in range(ch.frame_index, len(line)) if line[k] == FOUND), None)
                ms_data = ms_ros = None
                if hit is not None and video.timestamps is not None:
                    ms_data = round(1000 * (video.timestamps[hit] - video.timestamps[ch.frame_index]), 3)
                if hit is not None and times is not None:
                    ms_ros = _ros_latency(times.get(video.image_ids[ch.frame_index]),
                                          times.get(video.image_ids[hit]), event)
                out.append(PromptChange(
                    video_id=vid, frame_index=ch.frame_index, query_id=q, found_frame=hit,
                    latency_frames=None if hit is None else hit - ch.frame_index,
                    latency_ms_data=ms_data, latency_ms_ros=ms_ros,
                    ack_ms=None if event is None else event.get("ack_ms")))  # fmt: skip
    return out


def _formulation(
    dataset: Dataset,
    targets: Sequence[Target],
    records: Sequence[Mapping[str, Any]],
    times: FrameTimes | None,
    events: PromptEvents | None,
) -> tuple[TemporalScores, dict[str, str]]:
    top1 = top1_by_pair(records)
    by_track = any(r.get("track_id") is not None for r in records)
    lines = {t.key: timeline(t, top1, len(dataset.videos[t.video_id])) for t in targets}
    visible = sum(len(line) - line.count(HIDDEN) - line.count(INACTIVE) for line in lines.values())
    found = sum(line.count(FOUND) for line in lines.values())
    active = sum(len(t.frames) for t in targets)
    flicker = sum(flicker_count(line) for line in lines.values())
    mot = _mot(targets, top1, by_track) | _hota(targets, top1, by_track)
    changes = _prompt_changes(dataset, lines, times, events)
    out = TemporalScores(
        continuity=_share(found, visible),
        flicker_per_100_frames=_share(flicker, visible, 100.0),
        n_flicker=flicker,
        n_visible_frames=visible,
        n_found_frames=found,
        n_active_frames=active,
        identity="track_id" if by_track else "query",
        **mot,
        prompt_change=changes,
        prompt_change_latency_frames=_mean_of([c.latency_frames for c in changes]),
        prompt_change_latency_ms_data=_mean_of([c.latency_ms_data for c in changes]),
        prompt_change_latency_ms_ros=_mean_of([c.latency_ms_ros for c in changes]),
        prompt_change_ack_ms=_mean_of([c.ack_ms for c in changes]),
        prompt_changes_never_found=sum(1 for c in changes if c.found_frame is None),
    )
    if mot:  # ID switches per 100 active target-frames (none without a target)
        out = out.updated(id_switches_per_100_frames=_share(out.id_switches or 0, active, 100.0))
    else:
        out = out.updated(id_switches_per_100_frames=None)
    return out, lines


def _continuity(line: str) -> float | None:
    visible = len(line) - line.count(HIDDEN) - line.count(INACTIVE)
    return line.count(FOUND) / visible if visible else None


def _temporal_pcr(
    dataset: Dataset, targets: Sequence[Target], lines: Mapping[str, Mapping[str, str]]
) -> tuple[float | None, str | None, int]:
    """Temporal PCR, why it is null (None when it is not) and the targets it counts."""
    counted = [t for t in targets if any(t.gt)]  # with a visible frame
    need = sorted({k for t in counted for k in dataset.queries[t.query_id].coref})
    missing = [k for k in need if k not in lines]
    if missing or not counted:
        reason = (
            f"the run lacks formulation(s) {', '.join(missing)} that coref sets need"
            if missing
            else "no target has a visible frame"
        )
        return None, reason, len(counted)
    ok = 0
    for t in counted:
        shares = [_continuity(lines[k][t.key]) for k in dataset.queries[t.query_id].coref]
        ok += all(s is not None and s >= TEMPORAL_PCR_SHARE for s in shares)
    return round(ok / len(counted), 6), None, len(counted)


def _by_prompt_type(
    dataset: Dataset, targets: Sequence[Target], lines: Mapping[str, str]
) -> dict[str, TemporalGroup]:
    groups: dict[str, list[str]] = {}
    for t in targets:
        for p in dataset.queries[t.query_id].prompt_types:
            groups.setdefault(p, []).append(lines[t.key])
    out = {}
    for p, ls in sorted(groups.items()):
        visible = sum(len(x) - x.count(HIDDEN) - x.count(INACTIVE) for x in ls)
        out[p] = TemporalGroup(continuity=_share(sum(x.count(FOUND) for x in ls), visible), n_targets=len(ls))
    return out


def temporal_metrics(
    dataset: Dataset,
    predictions: Mapping[str, Sequence[Mapping[str, Any]]],
    frame_times: Mapping[str, FrameTimes] | None = None,
    prompt_events: Mapping[str, PromptEvents] | None = None,
) -> Temporal | None:
    """The temporal metrics (module doc) of ``predictions`` (formulation -> COCO results,
    optionally with ``track_id``) on a sequence dataset; None for a dataset without videos.
    ``frame_times``: per formulation, each image's trace record of a ROS run, and
    ``prompt_events``: its operator prompts' records by (video, frame index) (a sequence
    bag's replay, realtime/eval_sequence.py): the prompt-change latency through ROS 2."""
    if not dataset.videos:
        return None
    targets = _targets(dataset)
    by_f: dict[str, TemporalScores] = {}
    lines: dict[str, dict[str, str]] = {}
    for f, records in predictions.items():
        by_f[f], lines[f] = _formulation(
            dataset, targets, records, (frame_times or {}).get(f), (prompt_events or {}).get(f)
        )
    temporal_pcr, null_reason, n_pcr_targets = _temporal_pcr(dataset, targets, lines)
    return Temporal(
        iou_threshold=IOU,
        temporal_pcr_share=TEMPORAL_PCR_SHARE,
        n_videos=len(dataset.videos),
        n_frames=sum(len(v) for v in dataset.videos.values()),
        n_targets=len(targets),
        n_prompt_changes=sum(len(v.prompt_changes) for v in dataset.videos.values()),
        by_formulation=by_f,
        temporal_pcr=temporal_pcr,
        temporal_pcr_null_reason=null_reason,
        n_temporal_pcr_targets=n_pcr_targets,
        by_prompt_type=_by_prompt_type(dataset, targets, lines["orig"]) if "orig" in lines else {},
        timelines=lines,
        prompt_change_frames={
            str(v.id): [c.frame_index for c in v.prompt_changes]
            for v in dataset.videos.values()
            if v.prompt_changes
        },
    )


def run_temporal(
    dataset: Dataset, run_dir: RunDir | str | Path, formulations: Sequence[str]
) -> Temporal | None:
    """:func:`temporal_metrics` of a run folder's complete formulations, with its trace
    (``realtime_frames.jsonl``, a ROS run) for the prompt-change latency through ROS 2."""
    from probench.cache.run import RunDir
    from probench.cache.trace import TRACE_FILE, latest_frames, read_trace

    if not dataset.videos:
        return None
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    preds = {f: run.predictions(f) for f in formulations}
    times: dict[str, dict[int, Mapping[str, Any]]] = {}
    events: dict[str, dict[tuple[int, int], Mapping[str, Any]]] = {}
    records = read_trace(run.path / TRACE_FILE)
    for r in latest_frames(records):
        if r.get("stamp_ns") is not None and r.get("sent_ns") is not None:
            times.setdefault(str(r["formulation"]), {})[int(r["image_id"])] = r
    for r in records:  # operator prompts (a sequence bag's replay): the last sent for each change
        if r.get("kind") == PROMPT_KIND:
            events.setdefault(str(r["formulation"]), {})[(int(r["video_id"]), int(r["frame_index"]))] = r
    return temporal_metrics(dataset, preds, times or None, events or None)


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def temporal_lines(t: Temporal | None) -> list[str]:
    """metrics.json's ``temporal`` as printed (``probench score``, ``probench eval`` and
    ``ground``): one row per formulation, then temporal PCR; [] when the run is not on a
    sequence dataset."""
    if t is None:
        return []
    rows = [
        "",
        f"temporal: {t.n_videos} videos, {t.n_targets} targets, {t.n_prompt_changes} prompt "
        f"change(s); found = top-1 IoU >= {t.iou_threshold}",
        "formulation  continuity flicker/100 HOTA   IDF1   MOTA   IDsw/100 | prompt change: frames  "
        "ms (data)  ms (ROS 2)  ack ms",
    ]
    for f, s in t.by_formulation.items():
        rows.append(
            f"{f:<12} {_fmt(s.continuity):<10} {_fmt(s.flicker_per_100_frames):<11} "
            f"{_fmt(s.hota):<6} {_fmt(s.idf1):<6} {_fmt(s.mota):<6} "
            f"{_fmt(s.id_switches_per_100_frames):<8} | {_fmt(s.prompt_change_latency_frames):<21} "
            f"{_fmt(s.prompt_change_latency_ms_data):<10} {_fmt(s.prompt_change_latency_ms_ros):<11} "
            f"{_fmt(s.prompt_change_ack_ms)}  (identity: {s.identity})"
        )
    share = t.temporal_pcr_share or 0.0
    null = t.temporal_pcr_null_reason
    rows.append(
        f"temporal PCR (found on >= {share:g} of the visible frames under every coref formulation) "
        f"{_fmt(t.temporal_pcr)}" + (f"  null: {null}" if null else "")
    )
    return rows
