"""``probench eval --model M --bag BAG --out RUN``: the eval graph of eval.launch.py, scored.

Runs the two nodes of :func:`probench.ros.graph.eval_graph` as subprocesses of their
console scripts (``--ros-args`` from the same description the launch file uses), waits for
the evaluator to finish (global ``--timeout``), stops the grounding node, reads the
evaluator's result record and prints a summary of RUN/metrics.json (``--parity``: and of
RUN/parity.json; ``--find-max-rate``: of RUN/max_rate.json instead). The children stay in
this process's group (so killing the group kills all) and get SIGTERM if this process dies;
DDS stays on loopback (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``), a random
``ROS_DOMAIN_ID`` keeps concurrent runs apart and ``config/fastdds.xml`` delivers whole
frames, unless the environment sets them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probench.cache.records import METRICS_FILE, MetricsRecord, RealtimeRecord, RunRecord
from probench.cache.run import RunDir
from probench.errors import CheckFailed, Interrupted, UsageError
from probench.limits import MAX_PERIOD_S, MAX_RATE_HZ, MAX_TIMEOUT_S, MIN_RATE_HZ, check_flag
from probench.realtime.eval_run import read_result
from probench.realtime.node_spec import GROUNDING_PARAMS, MODES
from probench.scoring.printed import pcr_lines
from probench.scoring.temporal import temporal_lines
from probench.vocabulary import RUN_FORMULATIONS

if TYPE_CHECKING:
    from probench.bags.reader import ProbenchBag

_SIGTERM_GRACE_S = 5.0


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
    parser.add_argument("--warmup-frames", type=int, default=None, metavar="N",
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
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID for the graph (default: $ROS_DOMAIN_ID, else a random one)")
    from probench.prompting.options import add_policy_arguments

    add_policy_arguments(parser)  # --prompt-policy P [--profile PROFILE]: the fourth formulation `policy`


def child_environment(domain_id: int | None = None) -> dict[str, str]:
    """The nodes' environment: loopback discovery, an isolated domain and probench's Fast
    DDS profile (whole frames over shared memory), each unless chosen already."""
    from probench.ros.dds_profile import apply_profile

    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    apply_profile(env)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    elif not env.get("ROS_DOMAIN_ID"):
        env["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 101))
    return env


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux), so none is orphaned."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop_escalating(proc: subprocess.Popen[bytes], *, signalled: bool = False) -> None:
    """Stop a node as ``ros2 launch`` does: SIGINT (a ROS node's clean shutdown), then
    SIGTERM, then SIGKILL, each after a grace period (kept here: the ``probench eval`` path
    needs no ros2cli/launch). ``signalled``: the child got the terminal's Ctrl-C already; a
    second SIGINT would cut its clean-up short."""
    if signalled:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_SIGTERM_GRACE_S)
    for sig, grace in ((signal.SIGINT, _SIGTERM_GRACE_S), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def _finished(result: dict[str, Any] | None) -> bool:
    """The evaluator of this command finished: its result record says complete or
    incomplete. Signalled nodes exit 0 either way, so this is how an interruption is told
    apart."""
    return (result or {}).get("status") in ("complete", "incomplete")


def _grounding_exited(code: int) -> CheckFailed:
    return CheckFailed(f"grounding_node failed (exit code {code}) before the evaluation finished, e.g. its "
                       "model did not load: its error is printed above")


def check_run_folder(graph: list[dict[str, Any]], bag: ProbenchBag) -> None:
    """Refuse (naming the field) a run folder that holds another experiment, from the
    parameters both nodes will get: before any node starts, so before any model loads."""
    from probench.cache.identity import check_folder
    from probench.realtime.eval_run import ros_identity
    from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS
    from probench.ros.graph import resolved_parameters

    g_desc, e_desc = graph
    try:
        given = {**GROUNDING_PARAMS.defaults(), **resolved_parameters(g_desc)}
        given.pop("prompts", None)  # live operator prompts: not part of the identity, [] by default
        grounding = GROUNDING_PARAMS.check_all(given)
        evaluator = EVALUATOR_PARAMS.check_all({**EVALUATOR_PARAMS.defaults(), **resolved_parameters(e_desc)})
    except ValueError as exc:
        raise UsageError(f"bad parameter: {exc}") from None
    identity = ros_identity(evaluator, grounding, bag.dataset.summary(), bag=str(evaluator["bag"]),
                            compressed=bag.compressed, sequence=bool(bag.dataset.videos))
    check_folder(evaluator["out"], identity)


def run(args: argparse.Namespace) -> int:
    from probench.bags.reader import ProbenchBag
    from probench.cache.lock import check_out_folder
    from probench.models.zoo import check_model_name
    from probench.ros.graph import command_line, eval_graph, resolved_parameters
    from probench.vocabulary import parse_formulations

    if args.domain_id is not None and not 0 <= args.domain_id <= 232:
        raise UsageError(f"--domain-id must be in 0..232, got {args.domain_id}")
    check_flag("--rate", args.rate, low=0.0, low_open=True)
    check_flag("--rate", args.rate, low=MIN_RATE_HZ, high=MAX_RATE_HZ)
    for name in ("answer_timeout", "timeout"):
        check_flag(f"--{name.replace('_', '-')}", getattr(args, name), low=0.0, low_open=True,
                   high=MAX_TIMEOUT_S)
    if args.warmup_frames is not None and args.warmup_frames < 0:
        raise UsageError(f"--warmup-frames must be >= 0, got {args.warmup_frames}")
    check_flag("--budget-ms", args.budget_ms, low=0.0, low_open=True, high=1000.0 * MAX_PERIOD_S)
    if args.max_missed is not None and not 0.0 <= args.max_missed <= 1.0:
        raise UsageError(f"--max-missed must lie in [0, 1], got {args.max_missed}")
    if args.max_missed is not None and not args.find_max_rate:
        raise UsageError("--max-missed is for --find-max-rate")
    if args.find_max_rate and args.parity:
        raise UsageError("--find-max-rate and --parity are two different runs: give one")
    if args.parity and not args.dataset:
        raise UsageError("--parity needs --dataset: the dataset folder the bag was made from")
    if args.parity and args.mode == "camera-rate":
        raise UsageError("--parity replays as fast as answered (every frame answered); drop --mode "
                         "camera-rate")
    if args.dataset and not Path(args.dataset).is_dir():
        raise UsageError(f"--dataset {args.dataset}: no such folder")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder; name a run folder")
    check_out_folder(out)  # cannot be created, or another process writes it: before any node starts
    if args.weights is not None and not Path(args.weights).exists():
        raise UsageError(f"--weights {args.weights}: no such file or folder")
    check_model_name(args.model)  # a one-line usage error, before any node starts
    result_dir = tempfile.TemporaryDirectory(prefix="probench-eval-")
    result_file = Path(result_dir.name) / "result.json"
    extra: dict[str, Any] = {"result_file": str(result_file)}
    if args.budget_ms is not None:
        extra["budget_ms"] = float(args.budget_ms)
    if args.find_max_rate:
        extra["find_max_rate"] = True
        if args.max_missed is not None:
            extra["max_missed"] = float(args.max_missed)
    if args.prompt_policy is not None or args.profile is not None:  # checked before any node starts
        from probench.models.zoo import model_record
        from probench.prompting.options import policy_from_args

        policy_from_args(args, model_record(args.model), "eval")
        if args.profile not in (None, "", "paper"):
            args.profile = str(Path(args.profile).resolve())  # the nodes read it
    with ProbenchBag(args.bag) as bag:  # a bad bag fails here, in one line, before any node starts
        n_frames = bag.n_frames
        sequence = bool(bag.dataset.videos)  # a sequence bag: the node tracks (docs/EVALUATION.md)
        if sequence and args.rate is None:  # replayed at the rate it was recorded at
            args.rate = bag_rate_hz(bag)
        graph = eval_graph(
            bag=args.bag, out=args.out, model=args.model, device=args.device,
            mode="as-fast-as-answered" if args.parity else args.mode, rate=args.rate,
            formulations=parse_formulations(args.formulations) if args.formulations else None,
            answer_timeout=args.answer_timeout, warmup_frames=args.warmup_frames, overwrite=args.overwrite,
            params_file=args.params_file, evaluator_extra=extra, prompt_policy=args.prompt_policy,
            prompt_profile=args.profile, weights=args.weights, tracking=True if sequence else None,
        )
        if not args.overwrite and not args.find_max_rate:  # the search writes max_rate.json only
            check_run_folder(graph, bag)
    env = child_environment(args.domain_id)
    print(f"probench eval: {args.model} on {args.bag} ({n_frames} frames), "
          f"ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}", file=sys.stderr)
    run = RunDir(args.out)
    procs: list[subprocess.Popen[bytes]] = []
    interrupted = False
    # when the grounding node exits first: its exit code and the evaluator's (None: still running)
    early_exit: tuple[int, int | None] | None = None
    try:
        for desc in graph:
            procs.append(subprocess.Popen(command_line(desc), env=env, preexec_fn=_die_with_parent))
        grounding, evaluator = procs
        deadline = time.monotonic() + args.timeout
        while evaluator.poll() is None:
            if grounding.poll() is not None:
                # both were told to stop (a signal to the whole group): let the evaluator record it
                with contextlib.suppress(subprocess.TimeoutExpired):
                    evaluator.wait(timeout=_SIGTERM_GRACE_S)
                early_exit = (grounding.returncode, evaluator.returncode)
                break
            if time.monotonic() > deadline:
                raise CheckFailed(f"evaluation did not finish within --timeout {args.timeout:g} s; "
                                  "rerun the same command to resume")
            time.sleep(0.2)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        for p in reversed(procs):
            stop_escalating(p, signalled=interrupted)
    if early_exit is not None and early_exit[1] != 0:  # the evaluator failed, or ran on without it
        raise _grounding_exited(early_exit[0])
    if evaluator.returncode != 0:
        raise CheckFailed(f"evaluator_node exited with code {evaluator.returncode} (its error is printed "
                          "above); rerun the same command to resume")
    result = read_result(result_file)  # the evaluator's own record of how it ended
    result_dir.cleanup()
    finished = _finished(result)
    if early_exit is not None and finished:  # ended after the grounding node had gone: frames missed
        raise _grounding_exited(early_exit[0])
    if not finished:
        # The nodes exit 0 when signalled (they did what they were asked): the record says why it ended.
        status = (result or {}).get("status", "not started")
        raise Interrupted(f"the evaluation was interrupted before it finished (status: {status}); "
                          "rerun the same command to resume")
    if args.find_max_rate:
        from probench.realtime.eval_peak import MAX_RATE_FILE, trial_table

        print("\n".join(trial_table(run.read_json(MAX_RATE_FILE))))
        print(f"written: {run.path / MAX_RATE_FILE}")
        return 0
    info = run.info
    metrics = run.read_record(METRICS_FILE, MetricsRecord) or MetricsRecord()
    print(summary_table(metrics, info))
    if args.parity:
        from probench.realtime.eval_parity import PARITY_FILE, parity_check, parity_lines

        settings = {**GROUNDING_PARAMS.defaults(), **resolved_parameters(graph[0]),
                    "model": info.model.name or args.model}
        settings.pop("prompts", None)
        parity = parity_check(run.path, args.bag, args.dataset, settings)
        print("\n".join(["", *parity_lines(parity)]))
        print(f"written: {run.path / PARITY_FILE}")
    print(f"run folder: {args.out}  (probench report {args.out} --out DIR)")
    return 0


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * float(v):.1f}%"
    return f"{float(v):.3f}" if isinstance(v, float) else str(v)


def bag_rate_hz(bag: ProbenchBag) -> float | None:
    """The bag's frame rate: its median frame spacing (None for a single frame)."""
    import numpy as np

    times = [t for t, _ in bag.frame_infos()]
    gaps = np.diff(times)
    gaps = gaps[gaps > 0]
    return round(1e9 / float(np.median(gaps)), 6) if len(gaps) else None


def summary_table(metrics: MetricsRecord, info: RunRecord) -> str:
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
