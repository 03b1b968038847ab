"""``probench eval --model M --bag BAG --out RUN``: the eval graph of eval.launch.py, scored.

The flags become an :class:`~probench.ros.eval_command.EvalOptions`;
:func:`~probench.ros.eval_command.run_eval` runs the two nodes and returns what the run left
(:class:`~probench.ros.eval_command.EvalResult`), printed here: a summary of RUN/metrics.json
(``--parity``: and of RUN/parity.json; ``--find-max-rate``: of RUN/max_rate.json instead). A
replay whose model raised on some frames prints its summary, then exits 1 naming the first
error.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from probench.errors import CheckFailed
from probench.limits import MAX_DOMAIN_ID, IntRange
from probench.realtime.node_spec import EVALUATOR_PARAMS, MODES
from probench.vocabulary import RUN_FORMULATIONS

if TYPE_CHECKING:
    from probench.cache.records import MetricsRecord, RealtimeRecord, RunRecord
    from probench.ros.eval_command import EvalOptions, EvalResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="zoo model name (`probench models`), e.g. tiny-owlv2")
    parser.add_argument("--bag", required=True, help="probench bag (`probench bag`)")
    parser.add_argument("--out", required=True, help="run folder (resumed if it holds a partial run)")
    parser.add_argument("--rate", type=float, default=None,
                        help="camera-rate replay rate in Hz (default 30; a sequence bag: its own frame rate)")
    parser.add_argument("--mode", choices=MODES, default=None,
                        help="camera-rate (default: frames the model cannot keep up with are missed) or "
                             "as-fast-as-answered (every frame answered: for accuracy)")
    parser.add_argument("--formulations", default=None, help="comma-separated subset of orig,cat,tmpl")
    parser.add_argument("--device", default=None, help="torch device of the grounding node (default cpu)")
    parser.add_argument("--weights", default=None, metavar="DIR",
                        help="local folder (or file) with the model's weights (default: the checkpoint in "
                             "the Hugging Face / ultralytics cache; `probench fetch MODEL` fills it)")
    parser.add_argument("--answer-timeout", type=float, default=None,
                        help="seconds to wait for a frame's detections before counting it missed (default 5)")
    parser.add_argument("--warmup-frames", type=EVALUATOR_PARAMS["warmup_frames"].int_flag(), default=None,
                        metavar="N",
                        help="frames sent one at a time before each session's first stream, scored nowhere "
                             "(default 3)")
    parser.add_argument("--budget-ms", type=float, default=None,
                        help="real-time budget of one frame in ms (default: one period, 1000 / rate)")
    parser.add_argument("--find-max-rate", action="store_true",
                        help="search the highest camera rate with at most --max-missed of the frames missed "
                             "(writes RUN/max_rate.json; nothing is scored)")
    parser.add_argument("--max-missed", type=float, default=None,
                        help="missed share a rate may have in --find-max-rate (default 0.01)")
    parser.add_argument("--parity", action="store_true",
                        help="replay as fast as answered, then run the same detector offline on the "
                             "dataset's files and compare (writes RUN/parity.json; needs --dataset)")
    parser.add_argument("--dataset", default=None,
                        help="the dataset folder the bag was made from (for --parity)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a run folder that holds another model/dataset/settings instead of "
                             "refusing")
    parser.add_argument("--params-file", default=None, help="parameter YAML (default: config/eval.yaml)")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="give up (and stop both nodes) after this many seconds (default 3600)")
    parser.add_argument("--domain-id", type=IntRange(0, MAX_DOMAIN_ID), default=None,
                        help="ROS_DOMAIN_ID for the graph (default: $ROS_DOMAIN_ID, else a random one)")
    from probench.models.head import add_runtime_arguments
    from probench.models.threads import add_threads_argument
    from probench.prompting.options import add_policy_arguments

    add_threads_argument(parser)  # the grounding node's `threads`
    add_runtime_arguments(parser)  # its `runtime` and `warmup_size`
    add_policy_arguments(parser)  # --prompt-policy P [--profile PROFILE]: the fourth formulation `policy`
    from probench.data.negatives import add_negatives_arguments

    add_negatives_arguments(parser)  # --negatives K --negatives-seed S: absent prompts (data/negatives.py)


def options_from_args(args: argparse.Namespace) -> EvalOptions:
    """The typed options of the flags (nothing checked but their syntax: :func:`run_eval`
    checks the rest)."""
    from probench.models.head import warmup_size_flag
    from probench.models.threads import check_threads
    from probench.ros.eval_command import EvalOptions
    from probench.vocabulary import parse_formulations

    check_threads(args.threads)  # a range, like the other flags' syntax: before any node starts
    warmup_size_flag(args.warmup_size)
    node_params: dict[str, object] = {"threads": int(args.threads)} if args.threads else {}
    if args.runtime != "torch":  # the node's own defaults otherwise (config/grounding.yaml)
        node_params["runtime"] = args.runtime
    if args.warmup_size:
        node_params["warmup_size"] = args.warmup_size
    profile = args.profile
    if profile not in (None, "", "paper"):
        profile = str(Path(profile).resolve())  # the nodes read it
    return EvalOptions(
        model=args.model, bag=Path(args.bag), out=Path(args.out), rate=args.rate, mode=args.mode,
        formulations=tuple(parse_formulations(args.formulations)) if args.formulations else None,
        device=args.device, weights=None if args.weights is None else Path(args.weights),
        answer_timeout=args.answer_timeout, warmup_frames=args.warmup_frames, budget_ms=args.budget_ms,
        find_max_rate=args.find_max_rate, max_missed=args.max_missed, parity=args.parity,
        dataset=None if args.dataset is None else Path(args.dataset), overwrite=args.overwrite,
        params_file=None if args.params_file is None else Path(args.params_file), timeout_s=args.timeout,
        domain_id=args.domain_id, prompt_policy=args.prompt_policy, profile=profile,
        grounding_parameters=node_params,
        negatives=args.negatives, negatives_seed=args.negatives_seed,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from probench.ros.eval_command import run_eval

    result = run_eval(options_from_args(args))
    print("\n".join(result_lines(result)))
    if result.failure:  # the numbers above are of an incomplete replay: not silently complete
        raise CheckFailed(f"{result.failure}; the run is not complete (run.json: failed)")
    return 0


def result_lines(result: EvalResult) -> list[str]:
    """What ``probench eval`` prints of its result."""
    if result.max_rate is not None:
        from probench.realtime.eval_peak import MAX_RATE_FILE, trial_table

        return [*trial_table(result.max_rate), f"written: {result.run / MAX_RATE_FILE}"]
    from probench.cache.records import MetricsRecord

    lines = [summary_table(result.metrics or MetricsRecord(), result.info)]
    if result.parity is not None:
        from probench.realtime.eval_parity import PARITY_FILE, parity_lines

        lines += ["", *parity_lines(result.parity), f"written: {result.run / PARITY_FILE}"]
    return [*lines, f"run folder: {result.run}  (probench report {result.run} --out DIR)"]


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * float(v):.1f}%"
    return f"{float(v):.3f}" if isinstance(v, float) else str(v)


def summary_table(metrics: MetricsRecord, info: RunRecord) -> str:
    from probench.scoring.printed import pcr_lines
    from probench.scoring.temporal import temporal_lines

    model = info.model
    ros = info.ros
    weights = "random weights: the numbers test the pipeline, not the model" if model.random_weights \
        else f"weights: {model.weights_source or '?'}"
    mode = ros.get("mode", "?")
    rate = f" at {ros.get('rate_hz')} Hz" if mode == "camera-rate" else ""
    lines = [f"model {model.name or '?'} ({weights}); mode {mode}{rate}", "",
             "| formulation | mAP.5 | mAP.75 | mAP.5:.95 |", "| --- | --- | --- | --- |"]
    by_f = metrics.by_formulation
    for f in [k for k in RUN_FORMULATIONS if k in by_f]:
        m = by_f[f]
        lines.append(f"| {f} | {_fmt(m.map50)} | {_fmt(m.map75)} | {_fmt(m.map50_95)} |")
    lines += ["", *pcr_lines(metrics)]
    lines += temporal_lines(metrics.temporal)  # a sequence bag: continuity, flicker, IDF1, prompt changes
    lines += realtime_lines(metrics.realtime)
    return "\n".join(lines)


def realtime_lines(rt: RealtimeRecord | None) -> list[str]:
    """The stream in a few lines: the delivered rate (the headline) against the send rate,
    what was missed (and failed), latency of the measured frames, and the warm-up apart
    (docs/EVALUATION.md, "Real-time figures")."""
    if rt is None:
        return []
    lat = rt.latency_ms
    sent_rate = _fmt(rt.achieved_send_rate_hz)
    how = f"at {sent_rate} Hz" if rt.mode == "camera-rate" else \
        f"each when the previous was answered ({sent_rate} Hz)"
    extra = []
    if rt.stray_messages:
        extra.append(f"{rt.stray_messages} stray answer(s), not credited")
    if rt.misattributed:
        extra.append(f"{rt.misattributed} answer(s) with class ids outside their frame's set, not credited")
    failed = f"; failed {rt.frames_failed} (the model raised)" if rt.frames_failed else ""
    out = [
        f"delivered {_fmt(rt.delivered_rate_hz)} Hz: {rt.frames_received} of "
        f"{rt.frames_sent} measured frames answered, sent {how}; missed "
        f"{rt.frames_missed} ({_fmt(rt.missed_share, pct=True)}){failed}",
        f"latency p50 {_fmt(lat.p50)} ms, p95 {_fmt(lat.p95)} ms; within "
        f"{'-' if rt.budget_ms is None else rt.budget_ms} ms budget: {_fmt(rt.within_budget, pct=True)}; "
        f"first/last sent to received {_fmt(rt.first_sent_to_received_ms)}/"
        f"{_fmt(rt.last_sent_to_received_ms)} ms; answer spacing {_fmt(rt.output_rate_hz)} Hz",
    ]
    if rt.warmup is not None and rt.warmup.frames:
        out.append(f"warm-up: {rt.warmup.frames} frame(s) before the measured streams, one at a time, scored "
                   f"nowhere (cold start {_fmt(rt.cold_start_ms)} ms)")
    if extra:
        out.append("; ".join(extra))
    return out
