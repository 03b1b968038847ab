"""``probench sweep``: the paper's whole table in one resumable command.

For each model, one step after the other (never two at once):

1. ``infer`` over the formulations into ``OUT/runs/<model>/`` (in this process, or on Ray
   workers with ``--ray``; the same run folder either way);
2. ``latency``: the paper's protocol, measured alone on the model's device: in this
   process after the model's inference has finished, or on Ray as one task that reserves
   every CPU and GPU of one node, after the model's inference workers have been stopped
   (so Ray places nothing else there). latency.json records how (``isolation``), and the
   report prints it;
3. ``score`` into ``metrics.json``;

then one ``report`` over every scored model with the paper's published rows, in
``OUT/report/``. Each step is skipped when its output is already complete and up to date
(a rerun after a crash redoes only what is missing; an interrupted inference resumes
image by image). ``OUT/sweep.json`` and ``OUT/sweep.md`` say what ran, where and how long.
"""

from __future__ import annotations

import re
import socket
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from probench.cache import lock
from probench.cache.atomic import write_json_atomic, write_text_atomic
from probench.cache.identity import SHARED_FIELDS, RunIdentity, check_folder, first_difference, utc_now
from probench.cache.records import LATENCY_FILE, METRICS_FILE, Isolation, LatencyRecord, RayInfo
from probench.cache.run import RunDir
from probench.data.dataset import Dataset
from probench.errors import ProbenchError, UsageError
from probench.models.infer import offline_identity
from probench.scale.cluster import Cluster
from probench.scale.options import RayOptions
from probench.scale.worker import ModelArgs

if TYPE_CHECKING:
    from probench.models.base import Detector
    from probench.prompting.policy import PromptPolicy

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class LatencyProtocol:
    images: int = 50
    warmup: int = 3
    runs: int = 10


@dataclass
class SweepConfig:
    models: list[str]
    out: Path
    formulations: list[str]
    device: str = "cpu"
    precision: str = "fp32"
    runtime: str = "torch"
    limit: int | None = None
    latency: LatencyProtocol | None = field(default_factory=LatencyProtocol)
    reference: str | None = "paper"
    ray: RayOptions = field(default_factory=RayOptions)  # address None: this process
    weights: dict[str, str] = field(default_factory=dict)  # model -> local weights (--weights M=PATH)
    progress: bool | None = None  # None: bars on a terminal only
    prompt_policy: str | None = None  # adds the formulation `policy` to every model's run
    prompt_profile: str | None = None


@dataclass
class Step:
    """One line of the summary."""

    model: str
    step: str
    status: str = "ran"  # ran | skipped | failed
    where: str = ""
    seconds: float = 0.0
    detail: str = ""
    earlier_s: float | None = None  # skipped: what the step took in the sweep that did it


def run_folder(out: Path, model: str) -> RunDir:
    if not _SAFE_NAME.match(model):
        raise UsageError(f"model name {model!r} cannot name a folder")
    return RunDir(out / "runs" / model)


class _LazyCluster:
    """The Ray cluster of a ``--ray`` sweep, connected (or started) the first time a step
    needs it: a rerun with everything complete starts nothing."""

    def __init__(self, address: str | None, stack: ExitStack, timeout_s: float) -> None:
        self.address, self.stack, self.timeout_s = address, stack, timeout_s
        self.cluster: Cluster | None = None

    @property
    def wanted(self) -> bool:
        return self.address is not None

    def get(self) -> Cluster:
        if self.cluster is None:
            from probench.scale.cluster import ray_cluster

            self.cluster = self.stack.enter_context(ray_cluster(self.address, timeout_s=self.timeout_s))
        return self.cluster


class _Model:
    """One model's steps; in this process the detector loads once for infer and latency."""

    def __init__(self, cfg: SweepConfig, dataset: Dataset, name: str, cluster: _LazyCluster) -> None:
        self.cfg, self.dataset, self.cluster = cfg, dataset, cluster
        self.args = ModelArgs(name, device=cfg.device, precision=cfg.precision, runtime=cfg.runtime,
                              weights=cfg.weights.get(name))
        self.run = run_folder(cfg.out, name)
        self._detector: Detector | None = None
        self._load_s: float | None = None
        self.policy: PromptPolicy | None = None
        if cfg.prompt_policy:  # per model: best reads the model's own profile entry
            from probench.prompting.policy import resolve_policy

            record = self.args.record()
            self.policy = resolve_policy(cfg.prompt_policy, model=name, paper_name=str(record["paper_name"]),
                                         profile=cfg.prompt_profile)

    def detector(self) -> Detector:
        if self._detector is None:
            t0 = time.perf_counter()
            self._detector = self.args.load()
            self._load_s = time.perf_counter() - t0
        return self._detector

    def identity(self) -> RunIdentity:
        policy = None if self.policy is None else self.policy.record()
        return offline_identity(self.args.record(), self.dataset, device=self.args.device,
                                precision=self.args.precision, limit=self.cfg.limit,
                                prompt_policy=policy)  # fmt: skip

    # -- infer ---------------------------------------------------------------------------
    def infer_complete(self) -> bool:
        info = self.run.info
        return (
            info.status == "complete"
            and first_difference(info.to_json(), self.identity().record()) is None
            and set(self.formulations) <= set(self.run.formulations())
        )  # fmt: skip

    @property
    def formulations(self) -> list[str]:
        from probench.models.infer import run_formulations

        return run_formulations(self.cfg.formulations, self.policy)

    def infer(self, step: Step) -> None:
        cfg = self.cfg
        check_folder(self.run.path, self.identity())  # another experiment's folder: refused, named
        if self.cluster.wanted:
            from probench.scale.ray_infer import run_ray_inference

            info = run_ray_inference(
                self.args, self.dataset, self.run.path, cfg.formulations, self.cluster.get(),
                workers=cfg.ray.workers, cpus_per_worker=cfg.ray.cpus_per_worker,
                chunk_size=cfg.ray.chunk_size, limit=cfg.limit, progress=cfg.progress,
            )  # fmt: skip
            ray = info.ray or RayInfo()
            nodes = sorted({w.ip for w in ray.per_worker if w.ip})  # where they ran
            step.where = f"Ray: {ray.workers} worker(s) on {', '.join(nodes) or '?'}"
            if ray.worker_restarts:
                step.detail = (f"{ray.worker_restarts} worker restart(s), "
                               f"{ray.images_retried} image(s) retried")  # fmt: skip
            return
        from probench.models.infer import run_inference

        detector = self.detector()
        run_inference(detector, self.dataset, self.run.path, cfg.formulations, progress=cfg.progress,
                      device=self.args.device, precision=self.args.precision, limit=cfg.limit,
                      model_load_s=self._load_s, policy=self.policy)  # fmt: skip
        step.where = f"this process ({socket.gethostname()}, {self.args.device})"

    # -- latency -------------------------------------------------------------------------
    def latency_identity(self) -> RunIdentity:
        from probench.models.latency import latency_identity

        return latency_identity(self.args.record(), self.dataset, device=self.args.device,
                                precision=self.args.precision)  # fmt: skip

    @property
    def protocol(self) -> LatencyProtocol:
        return self.cfg.latency or LatencyProtocol()

    def latency_complete(self) -> bool:
        proto = self.protocol
        lat = self.run.read_record(LATENCY_FILE, LatencyRecord)
        if lat is None:
            return False
        p = lat.protocol
        return (
            first_difference(lat.to_json(), self.latency_identity().record(), SHARED_FIELDS) is None
            and (p.n_images_requested, p.warmup, p.runs) == (proto.images, proto.warmup, proto.runs)
        )  # fmt: skip

    def latency(self, step: Step) -> None:
        from probench.models.latency import measure_record, write_latency

        proto = self.protocol
        check_folder(self.run.path, self.latency_identity(), shared_only=True)
        if self.cluster.wanted:
            record, isolation = _latency_on_ray(self.args, self.dataset, self.cluster.get(), proto)
        else:
            record = measure_record(self.detector(), self.dataset, n_images=proto.images, warmup=proto.warmup,
                                    runs=proto.runs, device=self.args.device, precision=self.args.precision,
                                    progress=self.cfg.progress)  # fmt: skip
            isolation = Isolation(
                how="in the sweep's process after this model's inference had finished; the sweep runs "
                    "one step at a time, so no other probench work shared the device",
                where=f"{socket.gethostname()} ({self.args.device})",
            )  # fmt: skip
        record = record.updated(isolation=isolation)
        write_latency(self.run, record)
        s = record.summary_ms
        step.where = isolation.where
        step.detail = f"mean {s.mean or 0.0:.2f} ms, p95 {s.p95 or 0.0:.2f} ms"

    # -- score ---------------------------------------------------------------------------
    def score_complete(self) -> bool:
        metrics = self.run.path / METRICS_FILE
        if not metrics.exists():
            return False
        inputs = [*self.run.predictions_dir.glob("*.json"), self.run.path / LATENCY_FILE]
        newest = max((p.stat().st_mtime_ns for p in inputs if p.exists()), default=0)
        return metrics.stat().st_mtime_ns >= newest

    def score(self, step: Step) -> None:
        from probench.scoring.bootstrap import DEFAULT_RESAMPLES
        from probench.scoring.suite import score_run

        # the same metrics.json as `probench score` gives (intervals and error types included)
        metrics = score_run(self.dataset, self.run.path, bootstrap=DEFAULT_RESAMPLES, errors=True)
        self.run.write_record(METRICS_FILE, metrics)
        step.where = "this process"
        step.detail = f"mAP.5 {metrics.map50:.4f}" if metrics.map50 is not None else ""


def _latency_on_ray(
    model: ModelArgs, dataset: Dataset, cluster: Cluster, proto: LatencyProtocol
) -> tuple[LatencyRecord, Isolation]:
    """The protocol as one Ray task holding a whole node: every CPU and GPU of the node
    (with the most GPUs on cuda, the most CPUs otherwise), so nothing else Ray schedules
    runs beside it. The node gets the images it needs (encoded), not a path."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from probench.models.latency import latency_subset
    from probench.scale.cluster import import_ray
    from probench.scale.errors import RayUsageError
    from probench.scale.worker import ShippedDataset, latency_task

    ray = import_ray()
    key: Literal["gpus", "cpus"] = "gpus" if model.device == "cuda" else "cpus"
    nodes = [n for n in cluster.nodes if n[key] >= 1 and n["cpus"] >= 1]
    if not nodes:
        raise RayUsageError(f"no node of the Ray cluster has a {key[:-1].upper()} to measure latency on "
                            f"({cluster.describe()})")  # fmt: skip
    node = max(nodes, key=lambda n: (n[key], n["cpus"]))
    shipped = ShippedDataset.of(dataset, latency_subset(dataset, proto.images))
    task = ray.remote(latency_task).options(
        num_cpus=node["cpus"], num_gpus=node["gpus"], max_retries=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node["id"], soft=False),
    )
    try:
        record, worker = ray.get(task.remote(model, shipped, n_images=proto.images, warmup=proto.warmup,
                                             runs=proto.runs))  # fmt: skip
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, ProbenchError):
            raise cause from None
        raise
    record = record.updated(dataset=dataset.summary())  # the driver's dataset, not the shipped copy's view
    isolation = Isolation(
        how=f"one Ray task holding every CPU ({node['cpus']:g}) and GPU ({node['gpus']:g}) of node "
            f"{node['ip']}, started after this model's inference workers had been stopped, so Ray "
            "placed nothing else on that node",
        where=f"{worker.get('host', '?')} ({node['ip']}, {model.device})",
    )  # fmt: skip
    return record, isolation


def _timed(
    steps: list[Step], model: str, name: str, complete: bool, action: Callable[[Step], None],
    previous: dict[str, Any],
) -> None:
    step = Step(model, name)
    steps.append(step)
    if complete:
        step.status = "skipped"
        step.detail = "already complete"
        # what the sweep that did it recorded, carried forward so the summary stays whole
        before = next((s for s in previous.get("steps", []) if isinstance(s, dict)
                       and (s.get("model"), s.get("step")) == (model, name)), {})  # fmt: skip
        earlier = before.get("seconds") if before.get("status") == "ran" else before.get("earlier_s")
        if isinstance(earlier, (int, float)):
            step.where, step.earlier_s = str(before.get("where", "")), float(earlier)
            step.detail += f" (took {earlier:.1f} s in an earlier sweep)"
        return
    t0 = time.perf_counter()
    try:
        action(step)
    except ProbenchError:
        raise
    except BaseException as exc:  # Ctrl-C, SIGTERM, a bug: the summary says where it stopped
        step.status, step.detail = "interrupted", f"{type(exc).__name__}: {exc}".rstrip(": ")
        raise
    finally:
        step.seconds = round(time.perf_counter() - t0, 3)


def _report_step(cfg: SweepConfig, steps: list[Step], previous: dict[str, Any]) -> list[str]:
    from probench.report.build import build_report

    runs = [str(run_folder(cfg.out, m).path) for m in cfg.models
            if (run_folder(cfg.out, m).path / METRICS_FILE).exists()]  # fmt: skip
    report_md = cfg.out / "report" / "report.md"
    newest = max((Path(r, METRICS_FILE).stat().st_mtime_ns for r in runs), default=0)
    complete = (
        report_md.exists() and report_md.stat().st_mtime_ns >= newest
        and previous.get("report_runs") == runs and previous.get("reference") == cfg.reference
    )  # fmt: skip
    if not runs:
        steps.append(Step("(all)", "report", "failed", detail="no model was scored"))
        return runs

    def build(step: Step) -> None:
        inputs: list[str | Path] = list(runs)
        build_report(inputs, cfg.out / "report", reference=cfg.reference, overwrite=True,  # the sweep's own
                     progress=sys.stderr.isatty() if cfg.progress is None else cfg.progress)
        step.where = "this process"
        step.detail = f"{len(runs)} run(s)" + (" + the paper's rows" if cfg.reference == "paper" else "")

    try:
        _timed(steps, "(all)", "report", complete, build, previous)
    except ProbenchError as exc:
        steps[-1].status, steps[-1].detail = "failed", str(exc)
    return runs


def run_sweep(cfg: SweepConfig, dataset: Dataset) -> dict[str, Any]:
    """Every model's steps, then the report; returns sweep.json's content (also written,
    with the steps done so far, when the sweep is interrupted)."""
    with lock.locked(cfg.out):  # one sweep per folder: two would time their latency side by side
        return _run_sweep_locked(cfg, dataset)


def _run_sweep_locked(cfg: SweepConfig, dataset: Dataset) -> dict[str, Any]:
    t0 = time.perf_counter()
    previous = RunDir(cfg.out).read_json("sweep.json", default={}) or {}
    steps: list[Step] = []
    runs: list[str] = []
    cluster_record: dict[str, Any] | None = None
    try:
        with ExitStack() as stack:
            cluster = _LazyCluster(cfg.ray.address, stack, cfg.ray.connect_timeout_s)
            try:
                for name in cfg.models:
                    _model_steps(_Model(cfg, dataset, name, cluster), steps, previous)
            finally:
                cluster_record = cluster.cluster.record() if cluster.cluster is not None else None
        runs = _report_step(cfg, steps, previous)
    finally:
        summary = {
            "created": utc_now(),
            "dataset": dataset.summary(),
            "models": cfg.models,
            "formulations": cfg.formulations,
            "device": cfg.device,
            "latency_protocol": asdict(cfg.latency) if cfg.latency is not None else None,
            "ray_requested": cfg.ray.address is not None,
            "ray": cluster_record,
            "steps": [asdict(s) for s in steps],
            "report": str(cfg.out / "report" / "report.md"),
            "report_runs": runs,
            "reference": cfg.reference,
            "total_s": round(time.perf_counter() - t0, 3),
            "failed": sum(s.status in ("failed", "interrupted") for s in steps),
        }
        write_json_atomic(cfg.out / "sweep.json", summary)
        write_text_atomic(cfg.out / "sweep.md", summary_markdown(summary))
    return summary


def _model_steps(model: _Model, steps: list[Step], previous: dict[str, Any]) -> None:
    """infer, latency, score of one model; a failed step ends this model's turn."""
    # (step name, whether it is already done, the step)
    plan: list[tuple[str, Callable[[], bool], Callable[[Step], None]]] = [
        ("infer", model.infer_complete, model.infer)
    ]
    if model.cfg.latency is not None:
        plan.append(("latency", model.latency_complete, model.latency))
    plan.append(("score", model.score_complete, model.score))
    name = model.args.name
    for step_name, is_complete, action in plan:
        try:
            _timed(steps, name, step_name, is_complete(), action, previous)
        except ProbenchError as exc:  # this model stops here; the others go on
            if not steps or (steps[-1].model, steps[-1].step) != (name, step_name):
                steps.append(Step(name, step_name))
            steps[-1].status, steps[-1].detail = "failed", str(exc).splitlines()[0]
            return


def summary_markdown(summary: dict[str, Any]) -> str:
    ray = summary.get("ray")
    where = (f"Ray cluster {ray['address']} ({len(ray['nodes'])} node(s), {ray['cpus']:g} CPU, "
             f"{ray['gpus']:g} GPU)" if ray else "this process")  # fmt: skip
    if not ray and summary.get("ray_requested"):
        where = "Ray (not started: nothing left to run on it)"
    lines = [
        "# probench sweep", "",
        f"{len(summary['models'])} model(s) on {summary['dataset'].get('path')} "
        f"({summary['dataset'].get('n_images')} images), device {summary['device']}, on {where}; "
        f"{summary['total_s']:.1f} s in all. Report: [{summary['report']}]({summary['report']}).", "",
        "| model | step | status | seconds | where | detail |", "|---|---|---|--:|---|---|",
    ]  # fmt: skip
    for s in summary["steps"]:
        cells = (s["model"], s["step"], s["status"], f"{s['seconds']:.1f}", s["where"], s["detail"])
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def summary_text(summary: dict[str, Any], steps: Sequence[dict[str, Any]] | None = None) -> str:
    steps = summary["steps"] if steps is None else steps
    counts = {k: sum(s["status"] == k for s in steps) for k in ("ran", "skipped", "failed")}
    head = (f"sweep: {len(summary['models'])} model(s), {counts['ran']} step(s) ran, {counts['skipped']} "
            f"skipped (complete), {counts['failed']} failed, {summary['total_s']:.1f} s")  # fmt: skip
    rows = [f"{'model':<24} {'step':<8} {'status':<8} {'seconds':>8}  where / detail"]
    for s in steps:
        extra = " / ".join(x for x in (s["where"], s["detail"]) if x)
        rows.append(f"{s['model']:<24} {s['step']:<8} {s['status']:<8} {s['seconds']:>8.1f}  {extra}")
    return "\n".join([head, *rows, f"report: {summary['report']}"])
