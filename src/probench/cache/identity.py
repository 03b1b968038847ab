"""One run folder's identity and status, written once for every producer.

``probench infer`` (one process or on Ray), ``probench latency`` and the ROS evaluator all
open their run folder through :func:`open_run`: it builds ``run.json`` from a
:class:`RunIdentity`, refuses a folder that holds another experiment (naming the first
field that differs), resumes a compatible one (keeping its creation time, accumulating its
timings, counting resumes) and records the status as the run goes:

``running`` -> ``complete`` | ``incomplete`` (formulations asked for earlier are still
missing) | ``interrupted`` (Ctrl-C, SIGTERM) | ``failed`` (with ``error``).

While a session is open its process holds the folder's lock (:mod:`probench.cache.lock`):
a second process writing the same folder is refused at once, naming the holder's PID
(:func:`check_folder` refuses too, before any model load).

A folder killed with SIGKILL keeps ``running``; the next run with the same identity resumes
it (the prediction logs say what is done). The SIGKILL tests kill producers at named
points (:mod:`probench.cache.crash`).

Identity: ``source``, the model record (name, checkpoint, random_weights, weights_source,
runtime), the dataset hash, device, precision and the producer's ``settings``. A latency
measurement shares the folder of an inference run of the same model: it is checked on the
shared part only (model, dataset, device, precision).
"""

from __future__ import annotations

import platform
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from probench import __version__
from probench.cache import lock
from probench.cache.errors import CacheError, RunMismatchError
from probench.cache.output import check_run_folder_path
from probench.cache.records import (
    LATENCY_FILE,
    METRICS_FILE,
    REALTIME_FILE,
    RUN_FILE,
    LatencyRecord,
    RunRecord,
)
from probench.cache.run import RunDir
from probench.cache.trace import TRACE_FILE
from probench.errors import Interrupted
from probench.vocabulary import RUN_FORMULATIONS

# Libraries whose versions can change predictions; looked up without importing them.
_VERSIONED = (
    "torch", "torchvision", "transformers", "ultralytics", "timm", "numpy",
    "opencv-python-headless", "opencv-python", "onnxruntime", "onnxruntime-gpu", "tensorrt", "ray",
)
# What makes two runs the same experiment: resuming across a difference is refused.
SHARED_FIELDS: tuple[tuple[str, ...], ...] = (
    ("model", "name"),
    ("model", "checkpoint"),
    ("model", "random_weights"),
    ("model", "weights_source"),
    ("model", "runtime"),
    ("model", "preprocess"),
    ("dataset", "hash"),
    ("device",),
    ("precision",),
)
RUN_FIELDS: tuple[tuple[str, ...], ...] = (("source",), *SHARED_FIELDS, ("settings",))
# Files a probench producer owns in a run folder; ``overwrite`` removes only these.
RUN_FILES = (RUN_FILE, LATENCY_FILE, METRICS_FILE, REALTIME_FILE, TRACE_FILE)


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def library_versions() -> dict[str, str]:
    """Python, probench and every installed library that can change predictions."""
    out = {"python": platform.python_version(), "probench": __version__}
    for dist in _VERSIONED:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


@dataclass(frozen=True)
class RunIdentity:
    """What makes a run the run it is. ``model`` is the registry's model record
    (:func:`probench.models.zoo.model_record`); ``dataset`` at least ``{"hash": ...}``
    (:meth:`probench.data.dataset.Dataset.summary`); ``settings`` the producer's settings
    that change predictions."""

    source: str  # "offline" | "ros"
    model: Mapping[str, object]
    dataset: Mapping[str, object]
    device: str
    precision: str
    settings: Mapping[str, object] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "model": dict(self.model),
            "dataset": dict(self.dataset),
            "device": self.device,
            "precision": self.precision,
            "settings": dict(self.settings),
        }


_MISSING = object()


def _get(d: Mapping[str, object], path: tuple[str, ...]) -> object:
    cur: object = d
    for key in path:
        if not isinstance(cur, Mapping) or key not in cur:
            return _MISSING
        cur = cur[key]
    return cur


def _or_none(value: object) -> object:
    return None if value is _MISSING else value


def first_difference(
    existing: Mapping[str, object], new: Mapping[str, object], fields: Sequence[tuple[str, ...]] = RUN_FIELDS
) -> tuple[str, object, object] | None:
    """``(field, old, new)`` of the first identity field where two records disagree, or None.
    A field missing from the existing record (an older probench) counts as a difference."""
    for path in fields:
        old, cur = _get(existing, path), _get(new, path)
        if cur is _MISSING or old == cur:
            continue
        if isinstance(old, Mapping) and isinstance(cur, Mapping):  # name the key inside (settings.mode)
            for key in [*cur, *(k for k in old if k not in cur)]:
                o, c = old.get(key, _MISSING), cur.get(key, _MISSING)
                if o != c:
                    return ".".join((*path, str(key))), _or_none(o), _or_none(c)
        return ".".join(path), (None if old is _MISSING else old), cur
    return None


def check_identity(
    existing: Mapping[str, object], new: Mapping[str, object], where: Path,
    fields: Sequence[tuple[str, ...]] = RUN_FIELDS,
) -> None:
    """Raise :class:`RunMismatchError` naming the first field where ``where`` disagrees."""
    diff = first_difference(existing, new, fields)
    if diff is not None:
        name, old, cur = diff
        raise RunMismatchError(
            f"{where} has {name}={old!r} but this run has {cur!r}; "
            "use another --out folder or pass --overwrite to replace it"
        )


def check_folder(path: str | Path, identity: RunIdentity, *, shared_only: bool = False) -> RunDir:
    """The checks :func:`open_run` makes, without writing anything: usable before a slow
    model load. ``shared_only``: a measurement that shares the folder (latency) is checked
    on the model, dataset, device and precision only. A folder another process is writing
    is refused (:class:`probench.cache.lock.FolderBusy`). Returns the :class:`RunDir`."""
    run = _run_folder(path)
    lock.check_free(run.path)
    _check_files(run, identity, shared_only)
    return run


def _run_folder(path: str | Path) -> RunDir:
    """The run folder at ``path`` under the writer rule: not a link, a folder if it exists,
    not inside another run folder (:func:`probench.cache.output.check_run_folder_path`)."""
    return RunDir(check_run_folder_path(path))


def _check_files(run: RunDir, identity: RunIdentity, shared_only: bool) -> RunRecord | None:
    """:func:`check_folder`'s checks of the folder's files; returns its run.json (None when none)."""
    new = identity.record()
    existing = run.read_record(RUN_FILE, RunRecord)
    if existing is not None:
        fields = SHARED_FIELDS if shared_only else RUN_FIELDS
        check_identity(existing.to_json(), new, run.path / RUN_FILE, fields)
    elif not shared_only and run.predictions_dir.is_dir() and any(run.predictions_dir.iterdir()):
        raise RunMismatchError(
            f"{run.path}: holds predictions but no run.json; pass --overwrite to replace them"
        )
    latency = run.read_record(LATENCY_FILE, LatencyRecord)
    if latency is not None and latency.to_json():
        check_identity(latency.to_json(), new, run.path / LATENCY_FILE, SHARED_FIELDS)
    return existing


def clear_run(run: RunDir) -> None:
    """Remove the probench files of a run folder (not anything else a user keeps there)."""
    for name in RUN_FILES:
        (run.path / name).unlink(missing_ok=True)
    if run.predictions_dir.is_dir():
        shutil.rmtree(run.predictions_dir)


class RunSession:
    """An open run folder: its ``run.json`` (``info``, a :class:`RunRecord`) and status,
    updated atomically."""

    def __init__(self, run: RunDir, info: RunRecord, timing_key: str = "run_s") -> None:
        self.run = run
        self.info = info
        self.timing_key = timing_key  # timings.<key>: seconds spent, over every session
        self._t0 = time.perf_counter()
        self._spent0 = float(info.timings.to_json().get(timing_key, 0.0))
        self._locked = False  # set by open_run, which takes the folder's lock for the session

    def save(self) -> None:
        self.run.write_record(RUN_FILE, self.info)

    def update(self, **changes: object) -> None:
        """Set run.json's ``changes`` (not written until the next :meth:`save`)."""
        self.info = self.info.updated(**changes)

    def add_timing(self, key: str, seconds: float, formulation: str | None = None) -> None:
        """``timings.<key>`` (or ``timings.by_formulation_s.<formulation>``, summed over the
        sessions) to ``seconds``, rounded to ms (not written until the next :meth:`save`)."""
        timings = self.info.timings
        if formulation is None:
            timings = timings.updated(**{key: round(seconds, 3)})
        else:
            by = dict(timings.by_formulation_s)
            by[formulation] = round(by.get(formulation, 0.0) + seconds, 3)
            timings = timings.updated(by_formulation_s=by)
        self.update(timings=timings)

    def elapsed_s(self) -> float:
        """Seconds spent by this and earlier sessions of the run."""
        return self._spent0 + time.perf_counter() - self._t0

    def _close(self, status: str, error: str | None = None, missing: Sequence[str] = ()) -> None:
        info = self.info.without("error", "incomplete_formulations")
        changes: dict[str, object] = {"status": status}
        if error:
            changes["error"] = error
        if missing:
            changes["incomplete_formulations"] = list(missing)
        if status in ("complete", "incomplete"):
            changes["finished"] = utc_now()
        self.info = info.updated(**changes)
        self.add_timing(self.timing_key, self.elapsed_s())
        try:
            self.save()
        finally:
            if self._locked:  # the folder is free for the next writer
                self._locked = False
                lock.release(self.run.path)

    def finish(self, error: str | None = None) -> RunRecord:
        """``complete``, or ``incomplete`` naming the formulations still missing; ``failed``
        with ``error`` when the results hold a failure (a replay's frames whose model call
        raised)."""
        done = set(self.run.formulations())
        missing = [f for f in self.info.formulations if f not in done]
        status = "failed" if error else "incomplete" if missing else "complete"
        self._close(status, error, missing=missing)
        return self.info

    def fail(self, exc: BaseException) -> None:
        """Record the run as interrupted or failed; when even that cannot be written (the
        folder became read-only), run.json keeps ``running`` and ``exc`` is what is reported."""
        interrupted = isinstance(exc, (KeyboardInterrupt, Interrupted))
        error = f"{type(exc).__name__}: {exc}".rstrip(": ")
        with suppress(CacheError):
            self._close("interrupted" if interrupted else "failed", error)

    @contextmanager
    def recording(self) -> Iterator[RunSession]:
        """``with session.recording():`` marks the run interrupted/failed on any exception."""
        try:
            yield self
        except BaseException as exc:
            self.fail(exc)
            raise


def open_run(
    path: str | Path,
    identity: RunIdentity,
    *,
    formulations: Sequence[str] = (),
    overwrite: bool = False,
    timing_key: str = "run_s",
    extra: Mapping[str, object] | None = None,
) -> RunSession:
    """Create or resume the run folder at ``path`` for ``identity`` (module doc); writes
    ``run.json`` with status ``running`` and returns the session. ``formulations`` asked by
    an earlier session stay asked for (so ``finish`` can say ``incomplete``); ``extra`` adds
    non-identity keys (``ros``, ``timings.model_load_s``, ...)."""
    run = _run_folder(path)
    lock.acquire(run.path)  # held until the session's finish() or fail()
    try:
        return _open_locked(run, identity, formulations, overwrite, timing_key, extra)
    except BaseException:
        lock.release(run.path)
        raise


def _open_locked(
    run: RunDir, identity: RunIdentity, formulations: Sequence[str], overwrite: bool, timing_key: str,
    extra: Mapping[str, Any] | None,
) -> RunSession:
    if overwrite:
        clear_run(run)
    existing = _check_files(run, identity, shared_only=False)
    asked = set(formulations) | set(existing.formulations if existing else ())
    info = RunRecord.model_validate(identity.record()).updated(
        probench_version=__version__,
        created=(existing.created if existing else None) or utc_now(),
        formulations=[f for f in RUN_FORMULATIONS if f in asked],
        status="running",
        versions=library_versions(),
        timings=existing.timings if existing else {},
    )
    if existing is not None:
        info = info.updated(resumed=(existing.resumed or 0) + 1)
    for key, value in (extra or {}).items():
        if key == "timings" and isinstance(value, Mapping):
            info = info.updated(timings=info.timings.updated(**value))
        else:
            info = info.updated(**{key: value})
    run.create()
    run.drop_stale_logs()
    session = RunSession(run, info, timing_key)
    session.save()
    session._locked = True
    return session
