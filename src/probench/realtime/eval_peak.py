"""The peak-rate search (``probench eval --find-max-rate``): the highest camera rate at which
the grounding node misses at most ``max_missed`` of the frames, as ros2_benchmark's
peak-throughput mode finds it.

Each trial replays the bag's frames (its first formulation, cycled to fill ``trial_s``
seconds) at one rate in camera-rate mode, after one warm-up (:func:`warm_up`) for the whole
search, and measures the missed share of its frames with the evaluator's rules
(:mod:`probench.realtime.eval_stream`). The search (:func:`search_max_rate`) starts at
``rate_hz``: doubling while a rate passes, halving while it fails, until one rate passes and
its double fails; then bisecting until the bracket is narrower than ``tolerance`` of its top.
It writes ``max_rate.json`` into the run folder: ``max_rate_hz``, the limit, and every rate
tried with its missed share and latency p50/p95 (docs/EVALUATION.md, "Peak rate"). Nothing
is scored: the frames' answers are counted, not kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probench.limits import MAX_RATE_HZ
from probench.realtime.eval_plan import FramePlan, plan_formulation
from probench.realtime.eval_realtime import figures
from probench.realtime.eval_stream import MONOTONIC, Clock, Collector, stream, warm_up
from probench.realtime.node_spec import MAX_TRIAL_S, EvaluatorConfig

if TYPE_CHECKING:
    from probench.realtime.eval_run import EvaluatorLink

MAX_RATE_FILE = "max_rate.json"


@dataclass(frozen=True)
class Trial:
    """One rate tried: its frames, the missed share, latency of the answered ones."""

    rate_hz: float
    frames_sent: int
    frames_missed: int
    missed_share: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    achieved_send_rate_hz: float | None
    passed: bool


def search_max_rate(
    trial: Callable[[float], Trial], *, start_hz: float, low_hz: float = 0.5, high_hz: float = MAX_RATE_HZ,
    tolerance: float = 0.05, max_trials: int = 16,
) -> tuple[float | None, list[Trial]]:
    """The highest passing rate found (None when even ``low_hz`` fails) and every trial, in
    the order tried (module doc)."""
    tried: list[Trial] = []

    def run(rate: float) -> bool:
        result = trial(round(rate, 3))
        tried.append(result)
        return result.passed

    lo: float | None = None
    hi: float | None = None
    rate = min(max(float(start_hz), low_hz), high_hz)  # the search stays in its bounds (and in memory)
    if run(rate):
        lo = rate
        while rate * 2 <= high_hz and len(tried) < max_trials:
            rate *= 2
            if not run(rate):
                hi = rate
                break
            lo = rate
    else:
        hi = rate
        while rate / 2 >= low_hz and len(tried) < max_trials:
            rate /= 2
            if run(rate):
                lo = rate
                break
            hi = rate
    while lo is not None and hi is not None and (hi - lo) > tolerance * hi and len(tried) < max_trials:
        mid = (lo + hi) / 2
        if run(mid):
            lo = mid
        else:
            hi = mid
    return (None if lo is None else round(lo, 3)), tried


def trial_frames(frames: Sequence[FramePlan], rate_hz: float, trial_s: float) -> list[int]:
    """Indices into ``frames`` for one trial: at least every frame once, cycled to fill
    ``trial_s`` seconds at ``rate_hz``."""
    n = max(len(frames), math.ceil(min(rate_hz, MAX_RATE_HZ) * min(trial_s, MAX_TRIAL_S)))
    return [i % len(frames) for i in range(n)]  # bounded: at most MAX_RATE_HZ * MAX_TRIAL_S cycled frames


def run_trials(link: EvaluatorLink, cfg: EvaluatorConfig, frames: Sequence[FramePlan], images: Sequence[Any],
               clock: Clock = MONOTONIC) -> dict[str, Any]:
    """Warm up once, then search (module doc); returns the content of ``max_rate.json``."""
    records: list[dict[str, Any]] = []

    def emit(frame: FramePlan | None, record: dict[str, Any], results: list[Any]) -> None:
        records.append(record)

    collector = Collector(emit, answer_timeout_s=cfg.answer_timeout, ok=link.ok, clock=clock)
    link.set_answer_handler(collector.collect)
    warm_up(link, frames, images, collector, n=cfg.warmup_frames, answer_timeout_s=cfg.answer_timeout)

    def trial(rate: float) -> Trial:
        records.clear()
        picks = trial_frames(frames, rate, cfg.trial_s)
        stream(link, [frames[i] for i in picks], iter([images[i] for i in picks]), collector,
               mode="camera-rate", rate_hz=rate, answer_timeout_s=cfg.answer_timeout)
        measured = [r for r in records if r.get("kind") == "frame"]
        fig = figures(measured, budget_ms=1000.0 / rate, rate_hz=rate, mode="camera-rate")
        unanswered = fig.frames_missed + fig.frames_failed  # a failed frame is not delivered either
        share = unanswered / fig.frames_sent if fig.frames_sent else 0.0
        result = Trial(rate, fig.frames_sent, unanswered, round(share, 4), fig.latency_ms.p50,
                       fig.latency_ms.p95, fig.achieved_send_rate_hz, share <= cfg.max_missed)
        link.info(f"peak-rate trial {rate:g} Hz: {result.frames_missed}/{result.frames_sent} missed "
                  f"({'pass' if result.passed else 'fail'})")
        return result

    best, tried = search_max_rate(trial, start_hz=cfg.rate_hz)
    return {
        "max_rate_hz": best,
        "max_missed": cfg.max_missed,
        "trial_s": cfg.trial_s,
        "answer_timeout": cfg.answer_timeout,
        "warmup_frames": cfg.warmup_frames,
        "formulation": frames[0].formulation if frames else None,
        "n_bag_frames": len(frames),
        "trials": [asdict(t) for t in tried],
    }


def find_max_rate_run(link: EvaluatorLink, cfg: EvaluatorConfig, clock: Clock = MONOTONIC) -> dict[str, Any]:
    """The peak-rate search on ``cfg.bag``'s frames through ``link``; ``max_rate.json`` in
    ``cfg.out`` (the grounding node's model settings in it too)."""
    from probench.bags.reader import ProbenchBag
    from probench.cache.atomic import write_json_atomic
    from probench.realtime.errors import ParameterValueError

    grounding = link.grounding_parameters(cfg.startup_timeout)
    with ProbenchBag(cfg.bag) as bag:
        plans = [plan_formulation(bag.frame_infos(), f) for f in cfg.formulations]
        frames = next((p.frames for p in plans if p.frames), [])
        if not frames:
            raise ParameterValueError(f"{cfg.bag}: no frame with a label space to replay")
        link.wait_ready(bag.compressed, cfg.startup_timeout)  # (the image type is known from here)
        images = [link.image_from_bag(raw) for raw in bag.images_at([fp.bag_time_ns for fp in frames])]
    out = run_trials(link, cfg, frames, images, clock)
    out["grounding"] = {k: v for k, v in grounding.items() if k != "prompts"}
    out["bag"] = str(Path(cfg.bag).resolve())
    Path(cfg.out).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(cfg.out) / MAX_RATE_FILE, out)
    return out


def trial_table(found: Mapping[str, Any]) -> list[str]:
    """``max_rate.json`` as printed lines."""
    lines = [f"max rate: {found.get('max_rate_hz')} Hz with at most {found.get('max_missed')} of the frames "
             "missed", "", "| rate (Hz) | sent | missed | missed share | p50 (ms) | p95 (ms) | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in (Trial(**trial) for trial in found.get("trials", [])):  # as run_trials wrote them
        verdict = "pass" if t.passed else "fail"
        lines.append(f"| {t.rate_hz:g} | {t.frames_sent} | {t.frames_missed} | {t.missed_share:.3f} | "
                     f"{t.latency_p50_ms} | {t.latency_p95_ms} | {verdict} |")
    return lines
