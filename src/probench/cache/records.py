"""The run folder's result files as typed records: ``run.json``, ``latency.json``,
``realtime.json`` and ``metrics.json`` (docs/FORMATS.md, "Run folders").

Every writer builds one of these records and every reader gets one back
(:meth:`probench.cache.run.RunDir.read_record`); their JSON keys are the records' fields, so
no other module spells a metric key (``test/cache/test_cache_records.py`` scans for it). The
file names are here too.

Why pydantic models rather than TypedDicts or dataclasses: a reader gets attributes (a
TypedDict would leave the keys as strings in every reader), and a file read back is
*validated* (pydantic checks the types and, through :data:`Share` and friends, that every
number is finite and in its range), naming the key that is wrong. A key a writer leaves out
stays out of the file (``to_json`` dumps the fields that were set), and the files' bytes
are what the dict writers wrote before (``json.dumps`` with sorted keys, indent 2;
``test/cache/test_cache_records_golden.py`` compares them with main 778a37e's): numbers
keep their type (an int stays an int), keys a newer probench wrote are kept, keys an
older one did not write read as their defaults (None, empty).

Ranges: an AP, a share, a recall or precision is in [0, 1]; a difference of two of them in
[-1, 1]; a time, a rate, a span or a count is >= 0 (MOTA alone can be below 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainValidator, ValidationError

from probench.cache.errors import RecordError

__all__ = [
    "LATENCY_FILE",
    "METRICS_FILE",
    "REALTIME_FILE",
    "RESULT_FILES",
    "RUN_FILE",
    "Absence",
    "AbsenceFormulation",
    "AbsenceIntervals",
    "AbsenceScores",
    "Curve",
    "Curves",
    "FormulationScores",
    "GroupScores",
    "Intervals",
    "LatencyProtocol",
    "LatencyRecord",
    "MetricsRecord",
    "PromptChange",
    "RealtimeFigures",
    "RealtimeRecord",
    "Record",
    "RunDataset",
    "RunModel",
    "RunRecord",
    "Stats",
    "Temporal",
    "TemporalScores",
    "TideErrors",
    "TideScores",
    "parse_record",
]  # fmt: skip

RUN_FILE = "run.json"
LATENCY_FILE = "latency.json"
REALTIME_FILE = "realtime.json"
METRICS_FILE = "metrics.json"
RESULT_FILES = (RUN_FILE, LATENCY_FILE, METRICS_FILE, REALTIME_FILE)


_ROUNDING = 1e-9  # a share computed as a float sum may pass 1 by an ulp (1.0000000000000002)


def _number(low: float | None = None, high: float | None = None) -> PlainValidator:
    """A JSON number (never a boolean), finite, within [low, high] (up to float rounding);
    returned as given (an int stays an int, so a file keeps its bytes)."""

    def check(v: object) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError("not a number")
        if not math.isfinite(v):
            raise ValueError("not a finite number")
        if (low is not None and v < low - _ROUNDING) or (high is not None and v > high + _ROUNDING):
            raise ValueError(f"outside [{'-inf' if low is None else f'{low:g}'}, "
                             f"{'inf' if high is None else f'{high:g}'}]")
        return v

    return PlainValidator(check)


Share = Annotated[float, _number(0.0, 1.0)]  # an AP, a share, a recall, a precision
Signed = Annotated[float, _number(-1.0, 1.0)]  # a difference of two shares
Positive = Annotated[float, _number(0.0)]  # ms, Hz, s: never negative
Finite = Annotated[float, _number()]
Count = Annotated[int, Field(ge=0)]
Interval = Annotated[list[Signed], Field(min_length=2, max_length=2)]  # [low, high]


class Record(BaseModel):
    """A result file or a part of one: frozen, strict (no string read as a number, no
    boolean as a count), keys it does not know kept."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow", allow_inf_nan=False, defer_build=True)

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the fields that were set (given by the writer, or in the file
        read), and any unknown keys read."""
        return self.model_dump(mode="python", exclude_unset=True)

    def updated(self: R, **changes: object) -> R:
        """A copy with ``changes`` set (validated as a writer's are)."""
        return type(self).model_validate({**self.to_json(), **_plain(changes)})

    def without(self: R, *names: str) -> R:
        """A copy without the fields ``names`` (their keys leave the file)."""
        return type(self).model_validate({k: v for k, v in self.to_json().items() if k not in names})


R = TypeVar("R", bound=Record)


def _plain(values: Mapping[str, object]) -> dict[str, object]:
    return {k: v.to_json() if isinstance(v, Record) else v for k, v in values.items()}


def parse_record(cls: type[R], value: object, where: str | Path) -> R:
    """``value`` (a file's JSON) as a ``cls``; a :class:`RecordError` naming ``where`` and the
    first wrong key otherwise (one line)."""
    if not isinstance(value, dict):
        raise RecordError(f"{where}: expected a JSON object, not {type(value).__name__}")
    try:
        return cls.model_validate(value)
    except ValidationError as exc:
        raise RecordError(f"{where}: {_first_problem(exc)}") from None


def _first_problem(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    e = errors[0]
    key = ".".join(str(p) for p in e["loc"] if not (isinstance(p, str) and "[" in p)) or "(top level)"
    msg = str(e["msg"]).removeprefix("Value error, ")
    msg = msg[:1].lower() + msg[1:]  # pydantic's "Input should be ..."
    shown = repr(e.get("input"))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{key} is {shown}, {msg}{more}"


# -- shared parts ---------------------------------------------------------------------------
class Stats(Record):
    """:func:`probench.stats.summarize`: all None when there were no samples."""

    mean: Positive | None = None
    std: Positive | None = None
    p50: Positive | None = None
    p95: Positive | None = None
    p99: Positive | None = None
    max: Positive | None = None


class RunModel(Record):
    """run.json's ``model`` (:class:`probench.models.spec.ModelRecord`)."""

    name: str | None = None
    paper_name: str | None = None
    family: str | None = None
    backend: str | None = None
    checkpoint: str | None = None
    random_weights: bool | None = None
    weights_source: str | None = None
    runtime: str | None = None
    preprocess: str | None = None


class RunDataset(Record):
    """run.json's ``dataset`` (:meth:`probench.data.dataset.Dataset.summary`, and the bag)."""

    path: str | None = None
    hash: str | None = None
    n_images: Count | None = None
    n_queries: Count | None = None
    bag: str | None = None
    # a bag run: the dataset folder the bag was made from (absolute, as `probench bag` recorded
    # it; None for bags that do not record it), where the report finds the images again
    made_from: str | None = None


class _Identity(Record):
    """What run.json and latency.json share (:class:`probench.cache.identity.RunIdentity`)."""

    source: str | None = None
    model: RunModel = Field(default_factory=RunModel)
    dataset: RunDataset = Field(default_factory=RunDataset)
    device: str | None = None
    precision: str | None = None
    settings: dict[str, JsonValue] = Field(default_factory=dict)
    created: str | None = None
    probench_version: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)


# -- run.json -----------------------------------------------------------------------------------
class Timings(Record):
    infer_s: Positive | None = None
    eval_s: Positive | None = None
    run_s: Positive | None = None
    model_load_s: Positive | None = None
    by_formulation_s: dict[str, Positive] = Field(default_factory=dict)


class RayWorker(Record):
    """One Ray worker of a run inferred on Ray: where it ran, what it did."""

    ip: str = ""
    host: str = ""
    gpu_ids: list[str] = Field(default_factory=list)
    torch_threads: Count | None = None
    state: str | None = None
    images: Count = 0
    busy_s: Positive = 0.0
    load_s: Positive | None = None
    restarts: Count = 0


class RayInfo(Record):
    """run.json's ``ray``: the cluster, the pool and each worker (:mod:`probench.scale.ray_infer`)."""

    address: str | None = None
    local: bool | None = None
    nodes: list[str] = Field(default_factory=list)
    cpus: Positive | None = None
    gpus: Positive | None = None
    workers: Count | None = None
    cpus_per_worker: Positive | None = None
    gpus_per_worker: Positive | None = None
    worker_restarts: Count = 0
    chunk_size: Count | None = None
    images_retried: Count = 0
    per_worker: list[RayWorker] = Field(default_factory=list)


class RunRecord(_Identity):
    """``run.json``: what the run is and its status (:mod:`probench.cache.identity`)."""

    formulations: list[str] = Field(default_factory=list)
    status: str | None = None
    error: str | None = None
    finished: str | None = None
    resumed: Count | None = None
    incomplete_formulations: list[str] = Field(default_factory=list)
    timings: Timings = Field(default_factory=Timings)
    n_images_evaluated: Count | None = None
    ros: dict[str, JsonValue] = Field(default_factory=dict)
    ray: RayInfo | None = None


# -- latency.json -------------------------------------------------------------------------------
class LatencyProtocol(Record):
    warmup: Count | None = None
    runs: Count | None = None
    n_images: Count | None = None
    n_images_requested: Count | None = None
    n_samples: Count | None = None
    cuda_synchronized: bool | None = None
    end_to_end: bool | None = None
    decode_included: bool | None = None
    prompts_per_image: str | None = None
    text_encoding: str | None = None
    decode: str | None = None
    std: str | None = None
    # the CPU threads of the model work (the ``threads`` setting, models/threads.py); absent
    # where the command did not set them (a Ray worker's are in run.json's ray.workers)
    cpu_threads: Count | None = None


class TextSplit(Record):
    """The text stage of cold (the encoder ran) and warm (from the cache) samples."""

    n_cold: Count = 0
    n_warm: Count = 0
    cold: Stats | None = None
    warm: Stats | None = None
    warm_share_of_frame: Share | None = None


class TextCacheCounts(Record):
    kind: str | None = None
    capacity: Count | None = None
    entries: Count | None = None
    hits: Count | None = None
    misses: Count | None = None
    evictions: Count | None = None


class Isolation(Record):
    """How a sweep kept the measurement alone on its device."""

    how: str
    where: str


class LatencyRecord(_Identity):
    """``latency.json``: the paper's latency protocol (:mod:`probench.models.latency`)."""

    protocol: LatencyProtocol = Field(default_factory=LatencyProtocol)
    random_weights: bool | None = None
    image_ids: list[int] = Field(default_factory=list)
    summary_ms: Stats = Field(default_factory=Stats)
    stages_ms: dict[str, Stats] = Field(default_factory=dict)
    preprocess: str | None = None
    frame_sizes: list[str] = Field(default_factory=list)
    decode_ms: Stats = Field(default_factory=Stats)
    text_ms: TextSplit | None = None
    text_cache: TextCacheCounts | None = None
    text_encoder_calls: Count | None = None
    samples_ms: list[Positive] = Field(default_factory=list)
    isolation: Isolation | None = None


# -- realtime.json ------------------------------------------------------------------------------
class Warmup(Record):
    frames: Count = 0
    received: Count = 0
    latency_ms: list[Positive | None] = Field(default_factory=list)


class RealtimeFigures(Record):
    """The real-time figures of a set of measured frames (docs/EVALUATION.md): the whole
    replay, or one formulation of it (:mod:`probench.realtime.eval_realtime`)."""

    frames_sent: Count = 0
    frames_received: Count = 0
    frames_missed: Count = 0
    # frames whose model call raised (counted apart from the missed ones) and the first such
    # error, "ExcType: message": in the file only when a frame failed
    frames_failed: Count = 0
    first_error: str | None = None
    missed_share: Share | None = None
    within_budget: Share | None = None
    latency_ms: Stats = Field(default_factory=Stats)
    # first arrival - first send, last arrival - last send: the last can be negative (the last
    # frames missed, the last answer an earlier frame's)
    first_sent_to_received_ms: Finite | None = None
    last_sent_to_received_ms: Finite | None = None
    warmup: Warmup | None = None
    cold_start_ms: Positive | None = None
    achieved_send_rate_hz: Positive | None = None
    delivered_rate_hz: Positive | None = None
    output_rate_hz: Positive | None = None
    output_rate_of: str | None = None
    output_jitter_ms: Stats = Field(default_factory=Stats)
    jitter_ms: Stats = Field(default_factory=Stats)
    replay_jitter_ms: Stats = Field(default_factory=Stats)
    n_send_intervals: Count = 0
    span_s: Positive | None = None
    received_span_s: Positive | None = None


class RealtimeRecord(RealtimeFigures):
    """``realtime.json`` (and metrics.json's ``realtime``): the figures of the whole replay,
    its settings, what was never credited, and the figures per formulation."""

    budget_ms: Positive | None = None
    rate_hz: Positive | None = None
    mode: str | None = None
    warmup_frames: Count | None = None
    jitter_of: str | None = None
    stray_messages: Count = 0
    misattributed: Count = 0
    by_formulation: dict[str, RealtimeFigures] = Field(default_factory=dict)


# -- metrics.json -------------------------------------------------------------------------------
class FormulationScores(Record):
    """``by_formulation.<f>``: COCO AP of one formulation, and what its predictions were."""

    map50: Share | None = None
    map75: Share | None = None
    map50_95: Share | None = None
    ap_by_iou: dict[str, Share | None] = Field(default_factory=dict)  # "0.10" ... "0.95"
    n_predictions: Count = 0
    n_outside_label_space: Count = 0
    n_beyond_max_dets: Count = 0
    n_degenerate_boxes: Count = 0
    n_degenerate_ignored: Count = 0


class GroupScores(Record):
    """A breakdown's group (a prompt type, a domain, a size) under orig."""

    map50: Share | None = None
    map75: Share | None = None  # by_size only
    map50_95: Share | None = None
    n_queries: Count = 0


class Consistency(Record):
    """PCR and PLC (docs/METRICS.md): any-of-100, top-1, and at a score threshold."""

    n_targets: Count = 0
    pcr_single_formulation_targets: Count = 0
    pcr_multi_formulation_targets: Count = 0
    pcr_null_reason: str | None = None
    pcr_score_threshold: Share | None = None
    pcr50: Share | None = None
    pcr50_multi: Share | None = None
    plc: Share | None = None
    n_plc_targets: Count = 0
    pcr50_top1: Share | None = None
    pcr50_top1_multi: Share | None = None
    plc_top1: Share | None = None
    n_plc_top1_targets: Count = 0
    pcr50_at: Share | None = None
    pcr50_at_multi: Share | None = None
    plc_at: Share | None = None
    n_plc_at_targets: Count = 0


# metric keys that other modules use as data: the names of the bootstrap's resampled metrics
# ("<formulation>.<key>" for a formulation's), the columns of tables
MAP50, MAP75, MAP50_95 = "map50", "map75", "map50_95"
BY_FORMULATION = "by_formulation"
BEST_FORMULATION = "best_formulation"
DELTA_ORIG_CAT, DELTA_TMPL_ORIG, DELTA_MAX = "delta_orig_cat", "delta_tmpl_orig", "delta_max"
AP_KEYS = (MAP50, MAP75, MAP50_95)
# the paper's Table II: its columns are these keys (latency_ms: the mean of latency.json's summary_ms)
TABLE2_COLUMNS: tuple[str, ...] = (
    "model", MAP50, MAP75, MAP50_95, "latency_ms", "m_cat", "m_tmpl", DELTA_MAX, BEST_FORMULATION,
    "pcr50", "plc",
)  # fmt: skip
CONSISTENCY_KEYS = ("pcr50", "plc", "pcr50_top1", "plc_top1")  # PCR and PLC: any-of-100, top-1


def m_key(formulation: str) -> str:
    """The top-level key of a formulation's mAP.5: ``m_cat``."""
    return f"m_{formulation}"


def sample_name(formulation: str, key: str) -> str:
    """A formulation's resampled metric, as the bootstrap and ``compare`` name it: ``orig.map50``."""
    return f"{formulation}.{key}"


# the PCR/PLC variants: suffix of their keys -> (pcr50, pcr50_multi, plc, n_plc_targets)
PCR_VARIANTS: dict[str, tuple[str, str, str, str]] = {
    suffix: (f"pcr50{suffix}", f"pcr50{suffix}_multi", f"plc{suffix}", f"n_plc{suffix}_targets")
    for suffix in ("", "_top1", "_at")
}


class AbsenceIntervals(Record):
    """``intervals.absence``: the absence figures' intervals, per formulation and per its prompt types."""

    by_formulation: dict[str, dict[str, Interval | None]] = Field(default_factory=dict)
    by_prompt_type: dict[str, dict[str, dict[str, Interval | None]]] = Field(default_factory=dict)


class Intervals(Record):
    """``intervals``: the paired bootstrap's 95% intervals (:mod:`probench.scoring.bootstrap`)."""

    method: str | None = None
    resamples: Count | None = None
    seed: int | None = None
    level: Share | None = None
    by_formulation: dict[str, dict[str, Interval | None]] = Field(default_factory=dict)
    delta_orig_cat: Interval | None = None
    delta_tmpl_orig: Interval | None = None
    delta_max: Interval | None = None
    pcr50: Interval | None = None
    plc: Interval | None = None
    pcr50_top1: Interval | None = None
    plc_top1: Interval | None = None
    formulation_support: dict[str, Share] = Field(default_factory=dict)
    best_formulation_support: Share | None = None
    absence: AbsenceIntervals | None = None


TIDE_ERROR_TYPES: tuple[str, ...] = ("cls", "loc", "both", "dupe", "bkg", "missed")  # TIDE's, in its order


class TideScores(Record):
    """One formulation's TIDE errors (:mod:`probench.scoring.errors_tide`)."""

    ap50: Share | None = None
    delta_ap: dict[str, Signed | None] | None = None
    counts: dict[str, Count] = Field(default_factory=dict)
    delta_ap_fp: Signed | None = None
    delta_ap_fn: Signed | None = None
    n_outside_label_space: Count = 0


class TideErrors(Record):
    method: str | None = None
    by_formulation: dict[str, TideScores] = Field(default_factory=dict)


class Curve(Record):
    """One formulation's precision, recall and F1 at each score threshold."""

    score_thresholds: list[Share] = Field(default_factory=list)
    precision: list[Share | None] = Field(default_factory=list)
    recall: list[Share | None] = Field(default_factory=list)
    f1: list[Share | None] = Field(default_factory=list)
    n_targets: Count = 0
    best_f1: Share | None = None
    best_f1_threshold: Share | None = None


class Curves(Record):
    iou: Share | None = None
    by_formulation: dict[str, Curve] = Field(default_factory=dict)


# the absence metrics' figures (scoring/absence.py), as metrics.json names them and the
# bootstrap and ``compare`` resample them ("<formulation>.<key>")
ABSENCE_KEYS: tuple[str, ...] = (
    "presence_tpr", "presence_fpr", "presence_mcc", "hallucination_rate", "positive_f1", "cgf1",
)  # fmt: skip
# where the absence metrics' threshold came from: the PCR score threshold asked, or the node's default
ABSENCE_THRESHOLD_ASKED, ABSENCE_THRESHOLD_DEFAULT = "pcr_score_threshold", "node_default"
# the ones ``compare`` prints (hallucination_rate is presence_fpr under its other name)
ABSENCE_COMPARED: tuple[str, ...] = (
    "presence_tpr", "hallucination_rate", "presence_mcc", "positive_f1", "cgf1",
)  # fmt: skip


class AbsenceScores(Record):
    """Image-level presence over label-space pairs at the operating threshold, and the
    box-level F1 on the positive pairs (docs/METRICS.md, "Absence")."""

    n_positive_pairs: Count = 0
    n_negative_pairs: Count = 0
    true_positive_pairs: Count = 0  # positive pairs with a box >= the threshold
    false_negative_pairs: Count = 0
    false_positive_pairs: Count = 0  # negative pairs with a box >= the threshold: hallucinations
    true_negative_pairs: Count = 0
    box_tp: Count = 0  # on positive pairs, boxes >= the threshold matched at IoU 0.5
    box_fp: Count = 0
    box_fn: Count = 0
    presence_tpr: Share | None = None
    presence_fpr: Share | None = None
    presence_mcc: Signed | None = None
    hallucination_rate: Share | None = None
    positive_f1: Share | None = None
    cgf1: Signed | None = None


class AbsenceFormulation(AbsenceScores):
    """``absence.by_formulation.<f>``: every pair, and the pairs of each prompt type."""

    by_prompt_type: dict[str, AbsenceScores] = Field(default_factory=dict)


class Absence(Record):
    """``absence``: does the model answer a target that is not there (scoring/absence.py)."""

    score_threshold: Share | None = None
    threshold_source: str | None = None  # "pcr_score_threshold" (asked) or "node_default"
    iou: Share | None = None
    by_formulation: dict[str, AbsenceFormulation] = Field(default_factory=dict)


class PromptChange(Record):
    video_id: int
    frame_index: Count
    query_id: int
    found_frame: Count | None = None
    latency_frames: Count | None = None
    latency_ms_data: Positive | None = None
    latency_ms_ros: Finite | None = None
    ack_ms: Positive | None = None


# motmetrics' figures kept (their names) -> our keys; counts are motmetrics' num_* and mostly_*
MOT_FIELDS: dict[str, str] = {
    "idf1": "idf1", "idp": "idp", "idr": "idr", "mota": "mota", "motp": "motp",
    "num_switches": "id_switches", "num_fragmentations": "fragmentations",
    "num_false_positives": "false_positives", "num_misses": "misses",
    "mostly_tracked": "mostly_tracked", "mostly_lost": "mostly_lost",
}  # fmt: skip
HOTA_FIELDS: dict[str, str] = {"HOTA": "hota", "DetA": "deta", "AssA": "assa"}  # TrackEval's names -> ours


class TemporalScores(Record):
    """``temporal.by_formulation.<f>`` (:mod:`probench.scoring.temporal`)."""

    continuity: Share | None = None
    flicker_per_100_frames: Positive | None = None
    n_flicker: Count = 0
    n_visible_frames: Count = 0
    n_found_frames: Count = 0
    n_active_frames: Count = 0
    identity: str | None = None
    idf1: Share | None = None
    idp: Share | None = None
    idr: Share | None = None
    mota: Annotated[float, _number(high=1.0)] | None = None
    motp: Share | None = None
    id_switches: Count | None = None
    fragmentations: Count | None = None
    false_positives: Count | None = None
    misses: Count | None = None
    mostly_tracked: Count | None = None
    mostly_lost: Count | None = None
    hota: Share | None = None
    deta: Share | None = None
    assa: Share | None = None
    id_switches_per_100_frames: Positive | None = None
    prompt_change: list[PromptChange] = Field(default_factory=list)
    prompt_change_latency_frames: Positive | None = None
    prompt_change_latency_ms_data: Positive | None = None
    prompt_change_latency_ms_ros: Finite | None = None
    prompt_change_ack_ms: Positive | None = None
    prompt_changes_never_found: Count = 0


class TemporalGroup(Record):
    continuity: Share | None = None
    n_targets: Count = 0


class Temporal(Record):
    """``temporal``: a sequence dataset's temporal metrics."""

    iou_threshold: Share | None = None
    temporal_pcr_share: Share | None = None
    n_videos: Count = 0
    n_frames: Count = 0
    n_targets: Count = 0
    n_prompt_changes: Count = 0
    by_formulation: dict[str, TemporalScores] = Field(default_factory=dict)
    temporal_pcr: Share | None = None
    temporal_pcr_null_reason: str | None = None
    n_temporal_pcr_targets: Count = 0
    by_prompt_type: dict[str, TemporalGroup] = Field(default_factory=dict)
    timelines: dict[str, dict[str, str]] = Field(default_factory=dict)
    prompt_change_frames: dict[str, list[int]] = Field(default_factory=dict)


class MetricsRecord(Consistency):
    """``metrics.json``: every metric of a run (docs/METRICS.md; :mod:`probench.scoring.suite`)."""

    formulations: list[str] = Field(default_factory=list)
    formulations_missing: list[str] = Field(default_factory=list)
    formulations_incomplete: list[str] = Field(default_factory=list)
    n_images: Count = 0
    n_queries: Count = 0
    n_queries_with_gt: Count = 0
    n_annotations: Count = 0
    n_degenerate_boxes: Count = 0
    n_unknown_predictions: Count = 0
    by_formulation: dict[str, FormulationScores] = Field(default_factory=dict)
    map50: Share | None = None
    map75: Share | None = None
    map50_95: Share | None = None
    m_orig: Share | None = None
    m_cat: Share | None = None
    m_tmpl: Share | None = None
    m_policy: Share | None = None
    delta_orig_cat: Signed | None = None
    delta_tmpl_orig: Signed | None = None
    delta_policy_orig: Signed | None = None
    delta_max: Share | None = None
    best_formulation: str | None = None
    best_formulation_ties: list[str] | None = None
    intervals: Intervals | None = None
    curves: Curves | None = None
    errors: TideErrors | None = None
    absence: Absence | None = None
    by_prompt_type: dict[str, GroupScores] = Field(default_factory=dict)
    by_domain: dict[str, GroupScores] = Field(default_factory=dict)
    by_size: dict[str, GroupScores] = Field(default_factory=dict)
    temporal: Temporal | None = None
    latency_ms: Stats | None = None
    realtime: RealtimeRecord | None = None
    model: str | None = None
    dataset_hash: str | None = None
    dataset_hash_matches: bool | None = None
    dataset_mismatch_allowed: bool | None = None

    def number(self, key: str) -> float | None:
        """A top-level number by its key (a Table II column, a bootstrap name): None when
        absent or not a number."""
        v = getattr(self, key, None)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def formulation(self, f: str) -> FormulationScores:
        """``by_formulation.<f>`` (empty scores when the formulation was not scored)."""
        return self.by_formulation.get(f) or FormulationScores()

