"""``probench eval`` as a typed command: :class:`EvalOptions` in, :class:`EvalResult` out.

:func:`run_eval` checks the options and the bag, refuses a run folder of another experiment
before any node starts (so before any model loads), runs the two nodes of
:func:`probench.ros.graph.eval_graph` as subprocesses of their console scripts
(:class:`~probench.ros.node_processes.NodeSupervisor`: ``--ros-args`` from the description
the launch file uses), reads the evaluator's result record and the run's records, and
returns them; the CLI (``ros/cli_eval.py``) parses the flags into the options and prints the
result. DDS stays on loopback (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``), a random
``ROS_DOMAIN_ID`` keeps concurrent runs apart and ``config/fastdds.xml`` delivers whole
frames, unless the environment sets them.

A replay whose model raised on some frames is not silently complete: its result says
``failed`` with the first error (``probench eval`` exits 1 naming it, as ``infer`` does).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from probench.cache.records import METRICS_FILE, MetricsRecord, RunRecord
from probench.cache.run import RunDir
from probench.errors import Interrupted, UsageError
from probench.limits import MAX_PERIOD_S, MAX_RATE_HZ, MAX_TIMEOUT_S, MIN_RATE_HZ, check_flag
from probench.ros.node_processes import NodeSupervisor

if TYPE_CHECKING:
    from probench.bags.reader import ProbenchBag
    from probench.ros.graph import NodeDescription

FINISHED = ("complete", "incomplete")  # the evaluator's result record: it got to the end


@dataclass(frozen=True)
class EvalOptions:
    """What ``probench eval`` is asked (its flags, docs/EVALUATION.md); None: the parameter
    file's value. ``profile``: a prompt profile's absolute path, or ``paper``."""

    model: str
    bag: Path
    out: Path
    rate: float | None = None
    mode: str | None = None
    formulations: tuple[str, ...] | None = None
    device: str | None = None
    weights: Path | None = None
    answer_timeout: float | None = None
    warmup_frames: int | None = None
    budget_ms: float | None = None
    find_max_rate: bool = False
    max_missed: float | None = None
    parity: bool = False
    dataset: Path | None = None
    overwrite: bool = False
    params_file: Path | None = None
    timeout_s: float = 3600.0
    domain_id: int | None = None
    prompt_policy: str | None = None
    profile: str | None = None
    negatives: int = 0  # absent queries per frame (data/negatives.py); 0: none
    negatives_seed: int = 0
    # more grounding node parameters, by name, passed as given (e.g. the CPU threads of its model)
    grounding_parameters: Mapping[str, object] = field(default_factory=dict)

    def check(self) -> None:
        """The flags' ranges and combinations, one line each (:class:`UsageError`)."""
        if self.domain_id is not None and not 0 <= self.domain_id <= 232:
            raise UsageError(f"--domain-id must be in 0..232, got {self.domain_id}")
        check_flag("--rate", self.rate, low=0.0, low_open=True)
        check_flag("--rate", self.rate, low=MIN_RATE_HZ, high=MAX_RATE_HZ)
        check_flag("--answer-timeout", self.answer_timeout, low=0.0, low_open=True, high=MAX_TIMEOUT_S)
        check_flag("--timeout", self.timeout_s, low=0.0, low_open=True, high=MAX_TIMEOUT_S)
        if self.warmup_frames is not None and self.warmup_frames < 0:
            raise UsageError(f"--warmup-frames must be >= 0, got {self.warmup_frames}")
        check_flag("--budget-ms", self.budget_ms, low=0.0, low_open=True, high=1000.0 * MAX_PERIOD_S)
        if self.max_missed is not None and not 0.0 <= self.max_missed <= 1.0:
            raise UsageError(f"--max-missed must lie in [0, 1], got {self.max_missed}")
        self._check_combinations()

    def _check_combinations(self) -> None:
        if self.max_missed is not None and not self.find_max_rate:
            raise UsageError("--max-missed is for --find-max-rate")
        if self.find_max_rate and self.parity:
            raise UsageError("--find-max-rate and --parity are two different runs: give one")
        if self.parity and not self.dataset:
            raise UsageError("--parity needs --dataset: the dataset folder the bag was made from")
        if self.parity and self.mode == "camera-rate":
            raise UsageError("--parity replays as fast as answered (every frame answered); drop --mode "
                             "camera-rate")
        if self.profile is not None and self.prompt_policy is None:
            raise UsageError("--profile needs --prompt-policy")
        if self.parity and self.negatives:
            raise UsageError("--parity does not take --negatives yet (its offline run asks the dataset's own "
                             "label spaces)")


@dataclass(frozen=True)
class EvalResult:
    """What the run left: its folder, the evaluator's status (``complete``, ``incomplete``, or
    ``failed`` when the model raised on some frames: ``failure`` says how many and the first
    error), run.json and metrics.json, and the peak-rate search's or the parity check's file."""

    run: Path
    status: str
    info: RunRecord
    metrics: MetricsRecord | None = None
    failure: str | None = None
    max_rate: Mapping[str, object] | None = None
    parity: Mapping[str, object] | None = None


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


def bag_rate_hz(bag: ProbenchBag) -> float | None:
    """The bag's frame rate: its median frame spacing (None for a single frame)."""
    import numpy as np

    times = [t for t, _ in bag.frame_infos()]
    gaps = np.diff(times)
    gaps = gaps[gaps > 0]
    return round(1e9 / float(np.median(gaps)), 6) if len(gaps) else None


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


def run_eval(options: EvalOptions, log: Callable[[str], None] = _stderr) -> EvalResult:
    """The evaluation ``options`` ask for (module doc); ``log``: the one progress line."""
    from probench.realtime.eval_run import read_result
    from probench.ros.graph import command_line

    options.check()
    _check_paths(options)
    with tempfile.TemporaryDirectory(prefix="probench-eval-") as tmp:
        result_file = Path(tmp) / "result.json"
        graph, n_frames = _graph(options, result_file)
        env = child_environment(options.domain_id)
        log(f"probench eval: {options.model} on {options.bag} ({n_frames} frames), "
            f"ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}")
        with NodeSupervisor([command_line(desc) for desc in graph], env) as nodes:
            exits = nodes.wait(options.timeout_s)
        exits.check()
        record = read_result(result_file)  # the evaluator's own record of how it ended
    status = str((record or {}).get("status", "not started"))
    finished = status in FINISHED or (status == "failed" and bool((record or {}).get("metrics")))
    if exits.grounding_first and finished:  # ended after the grounding node had gone: frames missed
        raise exits.grounding_gone()
    if not finished:
        # The nodes exit 0 when signalled (they did what they were asked): the record says why it ended.
        raise Interrupted(f"the evaluation was interrupted before it finished (status: {status}); "
                          "rerun the same command to resume")
    return _result(options, graph, status)


def _check_paths(options: EvalOptions) -> None:
    """The folders and names the options give, before any node starts."""
    from probench.cache.lock import check_out_folder
    from probench.models.zoo import check_model_name

    if options.dataset and not options.dataset.is_dir():
        raise UsageError(f"--dataset {options.dataset}: no such folder")
    if options.out.exists() and not options.out.is_dir():
        raise UsageError(f"--out {options.out}: exists and is not a folder; name a run folder")
    check_out_folder(options.out)  # cannot be created, or another process writes it: before any node starts
    if options.weights is not None and not options.weights.exists():
        raise UsageError(f"--weights {options.weights}: no such file or folder")
    check_model_name(options.model)  # a one-line usage error, before any node starts
    if options.prompt_policy is not None:  # checked before any node starts; its warning once
        from probench.models.zoo import model_record
        from probench.prompting.policy import resolve_policy

        record = model_record(options.model)
        policy = resolve_policy(options.prompt_policy, model=options.model, paper_name=record["paper_name"],
                                profile=options.profile)
        if policy.warning:
            print(f"probench eval: warning: {policy.warning}", file=sys.stderr)


def _graph(options: EvalOptions, result_file: Path) -> tuple[list[NodeDescription], int]:
    """The two nodes' descriptions (grounding first) and the bag's frame count; the run
    folder checked against them (another experiment is refused before any node starts)."""
    from probench.bags.reader import ProbenchBag
    from probench.ros.graph import eval_graph

    evaluator: dict[str, object] = {"result_file": str(result_file)}
    if options.budget_ms is not None:
        evaluator["budget_ms"] = float(options.budget_ms)
    if options.negatives:  # only then: the evaluator's defaults are today's
        evaluator.update(negatives=int(options.negatives), negatives_seed=int(options.negatives_seed))
    if options.find_max_rate:
        evaluator["find_max_rate"] = True
        if options.max_missed is not None:
            evaluator["max_missed"] = float(options.max_missed)
    with ProbenchBag(options.bag) as bag:  # a bad bag fails here, in one line, before any node starts
        sequence = bool(bag.dataset.videos)  # a sequence bag: the node tracks (docs/EVALUATION.md)
        rate = options.rate if options.rate is not None or not sequence else bag_rate_hz(bag)  # its own rate
        graph = eval_graph(
            bag=options.bag, out=options.out, model=options.model, device=options.device,
            mode="as-fast-as-answered" if options.parity else options.mode, rate=rate,
            formulations=list(options.formulations) if options.formulations else None,
            answer_timeout=options.answer_timeout, warmup_frames=options.warmup_frames,
            overwrite=options.overwrite, params_file=options.params_file, evaluator_extra=evaluator,
            prompt_policy=options.prompt_policy, prompt_profile=options.profile, weights=options.weights,
            tracking=True if sequence else None, grounding_extra=options.grounding_parameters,
        )  # fmt: skip
        if not options.overwrite and not options.find_max_rate:  # the search writes max_rate.json only
            check_run_folder(graph, bag)
        return graph, bag.n_frames


def check_run_folder(graph: list[NodeDescription], bag: ProbenchBag) -> None:
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
    from probench.realtime.eval_run import evaluator_negatives

    bag.add_negatives(evaluator_negatives(evaluator))  # a bag made with other negatives: refused here
    identity = ros_identity(evaluator, grounding, bag.dataset.summary(), bag=str(evaluator["bag"]),
                            compressed=bag.compressed, sequence=bool(bag.dataset.videos),
                            negatives=bag.negatives, made_from=bag.dataset_folder)
    check_folder(str(evaluator["out"]), identity)


def _result(options: EvalOptions, graph: list[NodeDescription], status: str) -> EvalResult:
    """What the run folder holds once the evaluator has finished."""
    run = RunDir(options.out)
    if options.find_max_rate:
        from probench.realtime.eval_peak import MAX_RATE_FILE

        return EvalResult(run.path, status, run.info, max_rate=run.read_json(MAX_RATE_FILE))
    from probench.realtime.eval_run import failed_frames_error

    info, metrics = run.info, run.read_record(METRICS_FILE, MetricsRecord)
    # the realtime record says whether frames failed: how many, and the first error
    failure = failed_frames_error(None if metrics is None else metrics.realtime)
    if status == "failed" and failure is None:
        failure = info.error or "the evaluator recorded the run as failed"
    parity = _parity(options, graph, info) if options.parity else None
    return EvalResult(run.path, status, info, metrics, failure, parity=parity)


def _parity(options: EvalOptions, graph: list[NodeDescription], info: RunRecord) -> Mapping[str, object]:
    """``--parity``: the same detector offline on the dataset's files, compared (parity.json)."""
    from probench.realtime.eval_parity import parity_check
    from probench.realtime.node_spec import GROUNDING_PARAMS
    from probench.ros.graph import resolved_parameters

    settings = {**GROUNDING_PARAMS.defaults(), **resolved_parameters(graph[0]),
                "model": info.model.name or options.model}
    settings.pop("prompts", None)
    return parity_check(Path(options.out), str(options.bag), str(options.dataset), settings)

