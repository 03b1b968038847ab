"""``probench infer --ray``: the same offline inference, on a pool of Ray actors.

The driver (this process) is the only writer of the run folder. It opens it through
:func:`probench.cache.identity.open_run` with the identity a single-process run of the same
model and dataset has (:func:`probench.models.infer.offline_identity`), so either kind of
run resumes the other's folder. Each actor loads the model once (one GPU per actor on
``--device cuda``, ``--cpus-per-worker`` CPUs otherwise) and takes chunks of
(formulation, images) (:mod:`probench.scale.plan`); it streams each image's results back
the moment it is done (a Ray streaming generator), and the driver appends them to the same
resumable prediction log (:class:`probench.cache.run.PredictionWriter`) a single process
uses, the first time they arrive: records are exactly-once. The final
``<formulation>.json`` is sorted as always, so the bytes do not depend on which worker did
what, in which order.

Failures: a worker killed mid-chunk is restarted by Ray (the model loads again) and the
images of its chunk not yet received go to the next free worker. A driver killed outright
leaves the prediction logs with every image received so far; the same command resumes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probench.cache.crash import crash_point
from probench.cache.identity import RunSession, check_folder, open_run
from probench.cache.records import RayInfo, RunRecord
from probench.cache.run import PredictionWriter
from probench.data.dataset import Dataset
from probench.errors import ProbenchError
from probench.models.errors import InferenceError
from probench.models.infer import empty_label_spaces, offline_identity, select_images
from probench.models.progress import bar_disabled
from probench.scale.cluster import Cluster, import_ray, ray_cluster
from probench.scale.errors import RayClusterError, RayUsageError, WorkerLostError
from probench.scale.options import RayOptions
from probench.scale.plan import Chunk, WorkPlan, default_chunk_size
from probench.scale.worker import InferWorker, ModelArgs, read_encoded
from probench.vocabulary import parse_formulations

if TYPE_CHECKING:  # names for the checker only: mypy skips ray (pyproject)
    from ray import ObjectRef, ObjectRefGenerator
    from ray.actor import ActorHandle
    from tqdm import tqdm

MAX_RESTARTS = 3  # Ray restarts a dead worker this often (the model loads again each time)
IN_FLIGHT = 2  # chunks queued per worker, so it never waits for the driver between chunks
START_TIMEOUT_S = 900.0  # no worker up after this long: the cluster cannot place them
WAIT_S = 0.5  # the driver's polling period (progress, start timeout, re-probes)

# Called after each image is recorded: (formulation, image_id, pid of the worker). Tests use
# it to kill a worker at a known point.
OnRecord = Callable[[str, int, int], None]


@dataclass
class WorkerSlot:
    """One actor of the pool and what the driver knows about it."""

    index: int
    actor: ActorHandle
    state: str = "starting"  # starting | ready | dead
    probe: ObjectRef | None = None  # the pending describe() while starting
    probe_after: float = 0.0  # re-probe time after a failed probe (restart in progress)
    info: dict[str, Any] = field(default_factory=dict)
    images: int = 0
    busy_s: float = 0.0  # this run
    deaths: int = 0  # this run
    failures: int = 0  # the actor's lifetime (Ray's restart budget)


@dataclass
class Flight:
    slot: WorkerSlot
    chunk: Chunk
    received: set[int] = field(default_factory=set)


def plan_workers(
    device: str, cluster: Cluster, workers: int | None, cpus_per_worker: int | None
) -> tuple[int, int, int]:
    """``(workers, cpus each, gpus each)`` for the cluster: one GPU per worker on cuda,
    else the cluster's CPUs shared out (default one worker per 2 CPUs)."""
    if device == "cuda":
        if cluster.gpus < 1:
            raise RayUsageError(
                f"--device cuda but the Ray cluster has no GPU ({cluster.describe()}); "
                "use --device cpu or a cluster with GPUs"
            )
        return workers or int(cluster.gpus), cpus_per_worker or 1, 1
    total = max(1, int(cluster.cpus))
    n = workers or max(1, total // 2)
    return n, cpus_per_worker or max(1, total // n), 0


class RayWorkerPool:
    """The actors of one model. Starting is asynchronous (the driver's loop notices each
    worker as its model finishes loading); :meth:`wait_ready` blocks for benchmarks."""

    def __init__(
        self, model: ModelArgs, dataset: Dataset, cluster: Cluster, *, workers: int | None = None,
        cpus_per_worker: int | None = None, max_restarts: int = MAX_RESTARTS,
    ) -> None:  # fmt: skip
        ray = import_ray()
        self.model = model
        self.cluster = cluster
        self.size, self.cpus, self.gpus = plan_workers(model.device, cluster, workers, cpus_per_worker)
        self.max_restarts = max_restarts
        self.model_record = model.record()
        actor_cls = ray.remote(InferWorker).options(
            num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=max_restarts, max_task_retries=0,
        )
        self.dataset: Dataset | None = None
        self.dataset_arg: list[ObjectRef] = []
        self.use(dataset)
        threads = None if self.gpus else self.cpus
        self.slots = [WorkerSlot(k, actor_cls.remote(model, threads)) for k in range(self.size)]
        for slot in self.slots:
            slot.probe = slot.actor.describe.remote()
        self.changed = time.monotonic()  # last time a worker came up (start timeout)

    def begin_run(self) -> None:
        """Per-run counters from zero (a pool can serve several runs: tests, benchmarks)."""
        for slot in self.slots:
            slot.images, slot.busy_s, slot.deaths = 0, 0.0, 0

    def use(self, dataset: Dataset) -> None:
        """Work on ``dataset`` from now on: stored once in Ray's object store, fetched once by
        each worker (see :class:`~probench.scale.worker.InferWorker`)."""
        if dataset is not self.dataset:
            self.dataset, self.dataset_arg = dataset, [import_ray().put(dataset)]

    def record(self) -> dict[str, Any]:
        """run.json's ``ray``: the cluster, the pool and what each worker did."""
        return {
            **self.cluster.record(),
            "workers": self.size, "cpus_per_worker": self.cpus, "gpus_per_worker": self.gpus,
            "worker_restarts": sum(s.deaths for s in self.slots),
            "per_worker": [
                {"ip": s.info.get("ip", ""), "host": s.info.get("host", ""),
                 "gpu_ids": s.info.get("gpu_ids", []), "torch_threads": s.info.get("torch_threads"),
                 "state": s.state, "images": s.images, "busy_s": round(s.busy_s, 3),
                 "load_s": s.info.get("load_s"), "restarts": s.deaths}
                for s in self.slots
            ],
        }  # fmt: skip

    @property
    def load_s(self) -> float | None:
        loads = [s.info["load_s"] for s in self.slots if "load_s" in s.info]
        return max(loads) if loads else None

    def poll_probes(self, ready: Sequence[ObjectRef | ObjectRefGenerator]) -> None:
        """Take the answers of the describe() probes among ``ready``."""
        ray = import_ray()
        answered = {id(r) for r in ready}
        for slot in self.slots:
            if slot.probe is None or id(slot.probe) not in answered:
                continue
            probe, slot.probe = slot.probe, None
            try:
                info = ray.get(probe)
            except ray.exceptions.RayTaskError as exc:
                raise _cause(exc, "a Ray worker could not load the model") from None
            except ray.exceptions.RayActorError as exc:
                self.lost(slot, exc, death=False)
                continue
            if info.get("model") != self.model_record:
                raise RayClusterError(
                    f"worker {slot.index} on {info.get('host')} built model record {info.get('model')} "
                    f"but the driver expects {self.model_record}: are probench and the weights the same "
                    "on every node? (docs/SCALE.md)"
                )
            slot.info, slot.state = info, "ready"
            self.changed = time.monotonic()

    def reprobe(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.state == "starting" and slot.probe is None and now >= slot.probe_after:
                slot.probe = slot.actor.describe.remote()

    def lost(self, slot: WorkerSlot, exc: BaseException, *, death: bool = True) -> None:
        """A worker died (``death``: seen through its work; else a probe found it still
        restarting): probe it again later, or give it up once Ray has."""
        ray = import_ray()
        slot.failures += int(death)
        slot.deaths += int(death)
        gone = isinstance(exc, ray.exceptions.ActorDiedError) or slot.failures > self.max_restarts
        slot.state = "dead" if gone else "starting"
        slot.probe_after = time.monotonic() + WAIT_S

    def probes(self) -> list[ObjectRef]:
        return [s.probe for s in self.slots if s.probe is not None]

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Block until every worker has loaded its model (benchmarks: load time apart)."""
        ray = import_ray()
        deadline = time.monotonic() + timeout_s
        while any(s.state == "starting" for s in self.slots):
            self.reprobe()
            ready, _ = ray.wait(self.probes(), num_returns=1, timeout=WAIT_S) if self.probes() else ([], [])
            self.poll_probes(ready)
            if time.monotonic() > deadline:
                raise self.start_timeout(timeout_s)

    def start_timeout(self, timeout_s: float = START_TIMEOUT_S) -> RayClusterError:
        per = f"{self.gpus} GPU" if self.gpus else f"{self.cpus} CPU"
        return RayClusterError(
            f"no Ray worker started within {timeout_s:.0f} s: asked for {self.size} worker(s) of {per} "
            f"each on {self.cluster.describe()}; use fewer --workers or --cpus-per-worker"
        )

    def stop(self) -> None:
        ray = import_ray()
        for slot in self.slots:
            ray.kill(slot.actor, no_restart=True)
            slot.state = "dead"


def _cause(exc: BaseException, what: str) -> ProbenchError:
    """The probench error a worker raised (one line for the CLI), else an InferenceError."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, ProbenchError):
        return cause
    if cause is not None:
        return InferenceError(f"{what}: {type(cause).__name__}: {cause}")
    return InferenceError(f"{what}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


def drive(
    pool: RayWorkerPool,
    dataset: Dataset,
    session: RunSession,
    formulations: Sequence[str],
    image_ids: Sequence[int],
    *,
    chunk_size: int | None = None,
    progress: bool | None = None,
    on_record: OnRecord | None = None,
) -> dict[str, Any]:
    """Fill the run folder of ``session`` through ``pool``; returns the driver's counters."""
    from tqdm import tqdm

    ray = import_ray()
    pool.use(dataset)
    pool.begin_run()
    empty = set(empty_label_spaces(dataset, image_ids))  # nothing asked, nothing predicted (as offline)
    writers = session.run.open_writers(formulations)
    try:
        todo: dict[str, list[int]] = {}
        for f, writer in writers.items():
            missing = [i for i in image_ids if i not in writer.done_images]
            for i in missing:
                if i in empty:
                    writer.add_image(i, [])
            todo[f] = [i for i in missing if i not in empty]
        size = chunk_size or default_chunk_size(max(len(v) for v in todo.values()) if todo else 0, pool.size)
        plan = WorkPlan(todo, size)
        total = len(writers) * len(image_ids)
        done = total - plan.remaining
        flights: dict[ObjectRefGenerator, Flight] = {}
        with tqdm(total=total, initial=done, desc=f"infer {pool.model.name} (ray)", unit="img",
                  disable=bar_disabled(progress), dynamic_ncols=True) as bar:  # fmt: skip
            for f in list(writers):
                if plan.formulation_done(f):
                    _finalize(writers.pop(f), session)
            while not plan.done:
                _dispatch(pool, plan, dataset, flights)
                _check_alive(pool, flights)
                waitables = list(flights) + pool.probes()
                ready, _ = ray.wait(waitables, num_returns=1, timeout=WAIT_S) if waitables else ([], [])
                pool.poll_probes(ready)
                for gen in ready:
                    flight = flights.get(gen)
                    if flight is not None:
                        _take(gen, flight, flights, plan, pool, writers, session, bar, on_record)
                pool.reprobe()
                ready_n = sum(s.state == "ready" for s in pool.slots)
                bar.set_postfix_str(f"workers {ready_n}/{pool.size}"
                                    + (f", retried {plan.retried_images}" if plan.retried_images else ""),
                                    refresh=False)  # shown at the bar's next update  # fmt: skip
    finally:
        for w in writers.values():
            w.close()
    return {"chunk_size": size, "images_retried": plan.retried_images}


def _dispatch(
    pool: RayWorkerPool, plan: WorkPlan, dataset: Dataset, flights: dict[ObjectRefGenerator, Flight]
) -> None:
    for slot in pool.slots:
        while slot.state == "ready" and len(_on(slot, flights)) < IN_FLIGHT:
            chunk = plan.next_chunk()
            if chunk is None:
                return
            items = [(i, read_encoded(dataset, i)) for i in chunk.image_ids]
            gen = slot.actor.run_chunk.remote(pool.dataset_arg, chunk.formulation, items)
            flights[gen] = Flight(slot, chunk)


def _check_alive(pool: RayWorkerPool, flights: dict[ObjectRefGenerator, Flight]) -> None:
    """Fail rather than wait forever: every worker gone, or none able to start."""
    if flights or any(s.state == "ready" for s in pool.slots):
        return
    if all(s.state == "dead" for s in pool.slots):
        raise WorkerLostError(
            f"every Ray worker died ({sum(s.failures for s in pool.slots)} failure(s)); the run folder "
            "keeps what was done: rerun the same command to resume"
        )
    if time.monotonic() - pool.changed > START_TIMEOUT_S:
        raise pool.start_timeout()


def _take(
    gen: ObjectRefGenerator, flight: Flight, flights: dict[ObjectRefGenerator, Flight], plan: WorkPlan,
    pool: RayWorkerPool, writers: dict[str, PredictionWriter], session: RunSession, bar: tqdm[None],
    on_record: OnRecord | None,
) -> None:  # fmt: skip
    """Take one streamed result of ``gen`` (or its end, or its worker's death)."""
    ray = import_ray()
    slot, chunk = flight.slot, flight.chunk
    try:
        image_id, results, busy_s = ray.get(next(gen))
    except StopIteration:
        flights.pop(gen)
        return
    except ray.exceptions.RayTaskError as exc:
        raise _cause(exc, f"worker {slot.index} failed") from None
    except ray.exceptions.RayActorError as exc:
        being_done = _on(slot, flights)[0] is gen  # the chunk it was working on (the oldest)
        flights.pop(gen)
        where = f"worker {slot.index} ({slot.info.get('host', '?')})"
        plan.give_back(chunk, flight.received, where, charge=being_done)
        if slot.state == "ready":  # its other chunk in flight fails too: one loss, counted once
            pool.lost(slot, exc)
        return
    flight.received.add(image_id)
    slot.images += 1
    slot.busy_s += busy_s
    f = chunk.formulation
    if plan.record(f, image_id):
        writers[f].add_image(image_id, results)
        crash_point("infer.record")  # the resume tests' kill point, as in a single-process run
        bar.update(1)
        if on_record is not None:
            on_record(f, image_id, int(slot.info.get("pid", 0)))
        if plan.formulation_done(f):
            _finalize(writers.pop(f), session)


def _on(slot: WorkerSlot, flights: dict[ObjectRefGenerator, Flight]) -> list[ObjectRefGenerator]:
    """The chunks (generators) in flight on ``slot``, oldest first (a dict keeps the order
    they were sent in)."""
    return [gen for gen, flight in flights.items() if flight.slot is slot]


def _finalize(writer: PredictionWriter, session: RunSession) -> None:
    writer.finalize()
    session.save()  # progress visible to anyone reading run.json


def run_ray_inference(
    model: ModelArgs,
    dataset: Dataset,
    out: str | Path,
    formulations: Sequence[str],
    cluster: Cluster,
    *,
    workers: int | None = None,
    cpus_per_worker: int | None = None,
    chunk_size: int | None = None,
    limit: int | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
    pool: RayWorkerPool | None = None,
    on_record: OnRecord | None = None,
) -> RunRecord:
    """Fill ``out`` with the predictions of ``model`` on ``dataset`` using Ray workers
    (Ray connected: :func:`probench.scale.cluster.ray_cluster`); returns run.json. A
    ``pool`` given is used and left running (tests, benchmarks), else one is started and
    stopped here."""
    formulations = parse_formulations(formulations)
    image_ids = select_images(dataset, limit)
    identity = offline_identity(
        model.record(), dataset, device=model.device, precision=model.precision,
        score_threshold=model.score_threshold, limit=limit,
    )
    if not overwrite:
        check_folder(out, identity)  # refused before any worker starts
    own = pool is None
    if pool is None:
        pool = RayWorkerPool(model, dataset, cluster, workers=workers, cpus_per_worker=cpus_per_worker)
    try:
        session = open_run(
            out, identity, formulations=formulations, overwrite=overwrite, timing_key="infer_s",
            extra={"n_images_evaluated": len(image_ids), "ray": pool.record()},
        )
        with session.recording():
            counters = drive(pool, dataset, session, formulations, image_ids, chunk_size=chunk_size,
                             progress=progress, on_record=on_record)  # fmt: skip
            session.update(ray={**pool.record(), **counters})
            if pool.load_s is not None:
                session.add_timing("model_load_s", pool.load_s)
        return session.finish()
    finally:
        if own:
            pool.stop()


def infer_on_ray(
    model: ModelArgs,
    ray: RayOptions,
    dataset: Dataset,
    out: Path,
    formulations: Sequence[str],
    *,
    limit: int | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
) -> int:
    """``probench infer ... --ray``: the run on Ray workers, its one-line summary printed."""
    ray.check(model.device)
    with ray_cluster(ray.address, timeout_s=ray.connect_timeout_s) as cluster:
        if progress is not False:
            print(f"probench infer: on {cluster.describe()}", file=sys.stderr)
        info = run_ray_inference(
            model, dataset, out, formulations, cluster, workers=ray.workers,
            cpus_per_worker=ray.cpus_per_worker, chunk_size=ray.chunk_size, limit=limit,
            overwrite=overwrite, progress=progress,
        )
    ray_info = info.ray or RayInfo()
    print(
        f"{out}: {info.model.name} on {info.n_images_evaluated} image(s), formulations "
        f"{','.join(info.formulations)}, {info.timings.infer_s or 0.0:.1f} s with "
        f"{ray_info.workers} Ray worker(s) on {len(ray_info.nodes)} node(s)"
        + (f", {ray_info.worker_restarts} worker restart(s)" if ray_info.worker_restarts else ""),
    )
    return 0
