"""``probench eval --model M --bag BAG --out RUN``: the eval graph of eval.launch.py, scored.

Runs the two nodes of :func:`probench.ros.graph.eval_graph` as subprocesses of their
console scripts (``--ros-args`` from the same description the launch file uses), waits for
the evaluator to finish (global ``--timeout``), stops the grounding node and prints a
summary of RUN/metrics.json. The children stay in this process's group (so killing the
group kills all) and get SIGTERM if this process dies; DDS stays on loopback
(``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``), a random ``ROS_DOMAIN_ID`` keeps
concurrent runs apart and ``config/fastdds.xml`` delivers whole frames, unless the
environment sets them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probench.cache.run import RunDir
from probench.errors import CheckFailed, Interrupted, UsageError
from probench.realtime.node_spec import MODES
from probench.scoring.printed import pcr_lines
from probench.vocabulary import FORMULATIONS

if TYPE_CHECKING:
    from probench.bags.reader import ProbenchBag

_SIGTERM_GRACE_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="zoo model name (`probench models`), e.g. tiny-owlv2")
    parser.add_argument("--bag", required=True, help="probench bag (`probench bag`)")
    parser.add_argument("--out", required=True, help="run folder (resumed if it holds a partial run)")
    parser.add_argument("--rate", type=float, default=None, help="camera-rate replay rate in Hz (default 30)")
    parser.add_argument("--mode", choices=MODES, default=None,
                        help="camera-rate (default: frames the model cannot keep up with are missed) or "
                             "as-fast-as-answered (every frame answered: for accuracy)")
    parser.add_argument("--formulations", default=None, help="comma-separated subset of orig,cat,tmpl")
    parser.add_argument("--device", default=None, help="torch device of the grounding node (default cpu)")
    parser.add_argument("--answer-timeout", type=float, default=None,
                        help="seconds to wait for a frame's detections before counting it missed (default 5)")
    parser.add_argument("--warmup-frames", type=int, default=None, metavar="N",
                        help="first N frames of each session reported apart, not in the latency figures "
                             "(default 3)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a run folder that holds another model/dataset/settings instead of "
                             "refusing")
    parser.add_argument("--params-file", default=None, help="parameter YAML (default: config/eval.yaml)")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="give up (and stop both nodes) after this many seconds (default 3600)")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID for the graph (default: $ROS_DOMAIN_ID, else a random one)")


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


def _stop(proc: subprocess.Popen[bytes], *, signalled: bool = False) -> None:
    """SIGINT (a ROS node's clean shutdown), then SIGTERM, then SIGKILL. ``signalled``: the
    child got the terminal's Ctrl-C already; a second SIGINT would cut its clean-up short."""
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


def _file_state(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _session_info(run: RunDir, before: tuple[int, int] | None) -> dict[str, Any] | None:
    """run.json as this command's evaluator left it; None when it was not written since the
    command began (absent, or a previous session's). A :class:`CacheError` names the file
    when it cannot be read."""
    if _file_state(run.path / "run.json") == before:
        return None
    return run.info


def _finished(run: RunDir, info: dict[str, Any] | None) -> bool:
    """The evaluator of this command finished its run: its run.json (:func:`_session_info`)
    says complete or incomplete, and metrics.json exists. Signalled nodes exit 0 either way,
    so this is how an interruption is told apart."""
    return (info or {}).get("status") in ("complete", "incomplete") and (run.path / "metrics.json").is_file()


def _grounding_exited(code: int) -> CheckFailed:
    return CheckFailed(f"grounding_node exited with code {code} before the evaluation finished (its error "
                       "is printed above)")


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
                            compressed=bag.compressed)
    check_folder(evaluator["out"], identity)


def run(args: argparse.Namespace) -> int:
    from probench.bags.reader import ProbenchBag
    from probench.models.zoo import check_model_name
    from probench.ros.graph import command_line, eval_graph
    from probench.vocabulary import parse_formulations

    if args.domain_id is not None and not 0 <= args.domain_id <= 232:
        raise UsageError(f"--domain-id must be in 0..232, got {args.domain_id}")
    for name in ("rate", "answer_timeout", "timeout"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if args.warmup_frames is not None and args.warmup_frames < 0:
        raise UsageError(f"--warmup-frames must be >= 0, got {args.warmup_frames}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder; name a run folder")
    check_model_name(args.model)  # a one-line usage error, before any node starts
    graph = eval_graph(
        bag=args.bag, out=args.out, model=args.model, device=args.device, mode=args.mode, rate=args.rate,
        formulations=parse_formulations(args.formulations) if args.formulations else None,
        answer_timeout=args.answer_timeout, warmup_frames=args.warmup_frames, overwrite=args.overwrite,
        params_file=args.params_file,
    )
    with ProbenchBag(args.bag) as bag:  # a bad bag fails here, in one line, before any node starts
        n_frames = bag.n_frames
        if not args.overwrite:
            check_run_folder(graph, bag)
    env = child_environment(args.domain_id)
    print(f"probench eval: {args.model} on {args.bag} ({n_frames} frames), "
          f"ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}", file=sys.stderr)
    run = RunDir(args.out)
    before = _file_state(run.path / "run.json")
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
            _stop(p, signalled=interrupted)
    if early_exit is not None and early_exit[1] != 0:  # the evaluator failed, or ran on without it
        raise _grounding_exited(early_exit[0])
    if evaluator.returncode != 0:
        raise CheckFailed(f"evaluator_node exited with code {evaluator.returncode} (its error is printed "
                          "above); rerun the same command to resume")
    info = _session_info(run, before)  # read once, here: the nodes have exited
    finished = _finished(run, info)
    if early_exit is not None and finished:  # ended after the grounding node had gone: frames missed
        raise _grounding_exited(early_exit[0])
    if not finished:
        # The nodes exit 0 when signalled (they did what they were asked): the run says why it ended.
        status = (info or {}).get("status", "not started")
        raise Interrupted(f"the evaluation was interrupted before it finished (run.json status: {status}); "
                          "rerun the same command to resume")
    metrics = run.read_json("metrics.json")
    print(summary_table(metrics, info or {}))
    print(f"run folder: {args.out}  (probench report {args.out} --out DIR)")
    return 0


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * float(v):.1f}%"
    return f"{float(v):.3f}" if isinstance(v, float) else str(v)


def summary_table(metrics: dict[str, Any], info: dict[str, Any]) -> str:
    model = info.get("model") or {}
    ros = info.get("ros") or {}
    rt = metrics.get("realtime") or {}
    weights = "random weights: the numbers test the pipeline, not the model" if model.get(
        "random_weights") else f"weights: {model.get('weights_source', '?')}"
    mode = ros.get("mode", "?")
    rate = f" at {ros.get('rate_hz')} Hz" if mode == "camera-rate" else ""
    lines = [f"model {model.get('name', '?')} ({weights}); mode {mode}{rate}", "",
             "| formulation | mAP.5 | mAP.75 | mAP.5:.95 |", "| --- | --- | --- | --- |"]
    by_f = metrics.get("by_formulation") or {}
    for f in [k for k in FORMULATIONS if k in by_f]:
        m = by_f[f]
        lines.append(f"| {f} | {_fmt(m.get('map50'))} | {_fmt(m.get('map75'))} | {_fmt(m.get('map50_95'))} |")
    lines += ["", *pcr_lines(metrics)]
    lines += realtime_lines(rt)
    return "\n".join(lines)


def realtime_lines(rt: dict[str, Any]) -> list[str]:
    """The stream in a few lines: what was sent at which rate, what was missed, latency of
    the measured frames, and what the warm-up left out."""
    if not rt:
        return []
    lat = rt.get("latency_ms") or {}
    warm = rt.get("warmup") or {}
    sent_rate = rt.get("achieved_send_rate_hz")
    stream = (f"stream: {rt.get('frames_sent', '-')} frames sent at {_fmt(sent_rate)} Hz"
              if rt.get("mode") == "camera-rate" else
              f"stream: {rt.get('frames_sent', '-')} frames sent, each when the previous was answered "
              f"({_fmt(sent_rate)} Hz)")
    extra = []
    if rt.get("stray_messages"):
        extra.append(f"{rt['stray_messages']} stray answer(s), not credited")
    if rt.get("misattributed"):
        extra.append(f"{rt['misattributed']} answer(s) with class ids outside their frame's set, "
                     "not credited")
    out = [
        f"{stream}; received {rt.get('frames_received', '-')}, missed {rt.get('frames_missed', '-')}; "
        f"answers at {_fmt(rt.get('output_rate_hz'))} Hz",
        f"latency p50 {_fmt(lat.get('p50'))} ms, p95 {_fmt(lat.get('p95'))} ms; within "
        f"{rt.get('budget_ms', '-')} ms budget: {_fmt(rt.get('within_budget'), pct=True)}",
    ]
    if warm.get("frames"):
        first = _fmt(rt.get("first_latency_ms"))
        out.append(f"warm-up: the first {warm['frames']} frame(s) were sent one at a time and are left out "
                   f"of the latency, budget and rate figures (first frame {first} ms); they count in the "
                   "frames and the scores")
    if extra:
        out.append("; ".join(extra))
    return out
