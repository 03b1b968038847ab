"""The prediction cache (docs/FORMATS.md, run folders): one folder per run.

```
RUN/
  run.json                  # model, checkpoint, device, versions, dataset hash, settings, timings
  predictions/orig.json     # COCO results, written once a formulation is complete
  predictions/orig.partial.jsonl   # append-only progress log while it is not (resume point)
  latency.json, metrics.json, realtime.json
```

Resumability: producers (``probench infer``, the evaluator node) append one line per
finished image to ``<formulation>.partial.jsonl`` (flushed at once, fsynced at most every
``FSYNC_INTERVAL_S`` and on close), and call
:meth:`PredictionWriter.finalize` when every image is done, which writes
``<formulation>.json`` atomically and removes the log. A killed run leaves at worst a torn
last line, which :class:`JsonlLog` drops on reopening; so a resumed run ends with the same
cache as an uninterrupted one, and a partial run never looks complete.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard, TypeVar

import numpy as np

from probench.cache.atomic import write_json_atomic
from probench.cache.crash import crash_point
from probench.cache.errors import CacheError, RunFolderLinkError, RunFolderWriteError
from probench.cache.output import OutputLinkError, OutputNotRegularError, open_regular
from probench.files import UserFileError, read_user_json, size_cap
from probench.jsonio import loads
from probench.vocabulary import RUN_FORMULATIONS

if TYPE_CHECKING:
    from probench.cache.records import Record, RunRecord

FSYNC_INTERVAL_S = 1.0
# A COCO result record: a CocoResult built in memory or a dict read back from a run folder.
ResultT = TypeVar("ResultT", bound=Mapping[str, Any])
RecordT = TypeVar("RecordT", bound="Record")


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """An OSError while writing ``path`` (a run folder's part) as one line: a
    :class:`RunFolderWriteError` naming the file and the reason, no traceback."""
    try:
        yield
    except OSError as exc:
        raise RunFolderWriteError(
            f"cannot write {path}: {exc.strerror or type(exc).__name__}; what was written so far is kept: "
            "fix the folder and rerun the same command to resume"
        ) from exc


def open_own_file(path: Path, flags: int, mode: int = 0o666) -> int:
    """A descriptor of a run folder's own file under the writer rule
    (:func:`probench.cache.output.open_regular`: no link followed, a regular file only, no
    blocking open): a link put in its place (to a file elsewhere) is refused with one line,
    never written through."""
    try:
        return open_regular(path, flags, mode)
    except OutputLinkError:
        raise RunFolderLinkError(path) from None
    except OutputNotRegularError:
        raise CacheError(f"{path}: not a regular file; probench writes only its own files here") from None


def refuse_link(path: Path) -> None:
    """A :class:`RunFolderLinkError` when ``path`` is a symbolic link (``lstat``)."""
    if path.is_symlink():
        raise RunFolderLinkError(path)


class JsonlLog:
    """An append-only JSON-lines file that survives being killed mid-write.

    Each record is flushed to the OS at once, so a killed process (SIGKILL included) loses
    nothing already appended. ``fsync`` (which only matters if the machine itself goes down)
    runs at most every ``fsync_interval_s`` and on close: a per-record fsync cost ~3-7 ms per
    image here, a large share of a fast GPU model's frame. A record lost to a power cut is
    simply redone on resume.
    """

    def __init__(self, path: str | Path, *, fsync_interval_s: float = FSYNC_INTERVAL_S) -> None:
        self.path = Path(path)
        with writing(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_own_file(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
            try:
                self._records = list(self._read_and_repair(fd))
                self._fh = os.fdopen(fd, "a", encoding="utf-8")
            except BaseException:
                os.close(fd)
                raise
        self._fsync_interval_s = fsync_interval_s
        self._last_fsync = time.monotonic()

    def _read_and_repair(self, fd: int) -> Iterator[dict[str, Any]]:
        good_end = 0
        size = os.fstat(fd).st_size
        if size > size_cap("run"):
            raise CacheError(f"{self.path}: {size} bytes is over the {size_cap('run')} byte limit of a log")
        data = os.pread(fd, size, 0) if size else b""
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # torn last line: the writer died mid-record
            try:
                record = loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                break
            good_end += len(line)
            yield record
        if good_end != len(data):
            os.ftruncate(fd, good_end)

    @property
    def records(self) -> list[dict[str, Any]]:
        return self._records

    def append(self, record: dict[str, Any]) -> None:
        with writing(self.path):
            self._fh.write(json.dumps(record, sort_keys=True) + "\n")
            self._fh.flush()
            now = time.monotonic()
            if now - self._last_fsync >= self._fsync_interval_s:
                os.fsync(self._fh.fileno())
                self._last_fsync = now
        self._records.append(record)

    def close(self) -> None:
        if not self._fh.closed:
            with writing(self.path):
                try:
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                finally:
                    self._fh.close()

    def __enter__(self) -> JsonlLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_log_records(path: Path, records: Sequence[Any]) -> set[int]:
    """The images a partial log of predictions holds, every record checked first: an object
    with an integer ``image_id`` (once only) and a list of COCO results of that image
    (integer ``category_id``, a ``bbox`` of four finite numbers with width and height >= 0,
    a ``score`` in [0, 1]). A log changed by hand is refused (a :class:`CacheError` naming
    its line), never merged."""
    done: set[int] = set()
    for line, rec in enumerate(records, start=1):
        problem = _record_problem(rec, done)
        if problem is not None:
            raise CacheError(f"{path} line {line}: {problem}; this log was not written by probench as it "
                             "is: remove it to redo the formulation")
        done.add(rec["image_id"])
    return done


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _record_problem(rec: object, done: set[int]) -> str | None:
    if not (isinstance(rec, dict) and _is_int(rec.get("image_id")) and isinstance(rec.get("results"), list)):
        return "not a record of one image (an object with an integer image_id and a results list)"
    image_id = rec["image_id"]
    if image_id in done:
        return f"image {image_id} is recorded twice"
    for i, r in enumerate(rec["results"]):
        if not isinstance(r, dict) or r.get("image_id") != image_id or not _is_int(r.get("image_id")):
            return f"result {i} is not a result of image {image_id}"
        if not _is_int(r.get("category_id")):
            return f"result {i} has no integer category_id"
        box = r.get("bbox")
        if not (isinstance(box, list) and len(box) == 4 and all(map(_is_number, box)) and box[2] >= 0
                and box[3] >= 0):
            return f"result {i} has a bbox that is not four finite numbers (width, height >= 0): {box!r}"
        score = r.get("score")
        if not (_is_number(score) and 0.0 <= score <= 1.0):
            return f"result {i} has a score outside [0, 1]: {score!r}"
    return None


def sort_results(results: Iterable[ResultT]) -> list[ResultT]:
    """Canonical order of a COCO results file: image, query, descending score, box."""
    return sorted(results, key=lambda r: (r["image_id"], r["category_id"], -r["score"], r["bbox"]))


class PredictionWriter:
    """Resumable writer of one formulation's predictions."""

    def __init__(self, run: RunDir, formulation: str) -> None:
        if formulation not in RUN_FORMULATIONS:
            raise CacheError(f"unknown formulation {formulation!r}; expected one of {RUN_FORMULATIONS}")
        self.run = run
        self.formulation = formulation
        self.final_path = run.predictions_dir / f"{formulation}.json"
        self.log = JsonlLog(run.predictions_dir / f"{formulation}.partial.jsonl")
        try:
            self.done_images: set[int] = check_log_records(self.log.path, self.log.records)
        except BaseException:
            self.log.close()
            raise

    @property
    def complete(self) -> bool:
        return self.final_path.exists()

    def add_image(self, image_id: int, results: Sequence[Mapping[str, Any]]) -> None:
        """Record every result of one image (possibly none). Idempotent per image."""
        image_id = int(image_id)
        if image_id in self.done_images:
            return
        for r in results:
            if int(r["image_id"]) != image_id:
                raise CacheError(f"result for image {r['image_id']} given as part of image {image_id}")
        self.log.append({"image_id": image_id, "results": [dict(r) for r in results]})
        self.done_images.add(image_id)

    def finalize(self) -> Path:
        """Write ``<formulation>.json`` atomically and drop the progress log."""
        results = [r for rec in self.log.records for r in rec["results"]]
        with writing(self.final_path):
            write_json_atomic(self.final_path, sort_results(results), indent=None)
        self.log.close()
        crash_point("cache.finalize")  # a kill here leaves a stale log: RunDir.drop_stale_logs
        with writing(self.log.path):
            self.log.path.unlink(missing_ok=True)
        return self.final_path

    def close(self) -> None:
        self.log.close()


class RunDir:
    """A run folder: read and write its parts by name, atomically."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.predictions_dir = self.path / "predictions"

    def create(self) -> RunDir:
        refuse_link(self.predictions_dir)  # outputs go into the folder, never through a link
        with writing(self.predictions_dir):
            self.predictions_dir.mkdir(parents=True, exist_ok=True)
        return self

    # -- generic JSON parts ------------------------------------------------------------
    def write_json(self, name: str, obj: object) -> Path:
        path = self.path / name
        with writing(path):
            write_json_atomic(path, obj)
        return path

    def read_json(self, name: str, default: Any = None) -> Any:
        """A JSON part of the folder (``default`` when there is none), through the bounded
        reader (a regular file, never a symbolic link, size and nesting caps)."""
        path = self.path / name
        if not path.exists() and not path.is_symlink():
            return default
        try:
            return read_user_json(path, what="run folder file", kind="run", follow=False)
        except UserFileError as exc:
            raise CacheError(f"{path}: cannot read JSON: {exc.reason}") from None

    # -- the result files: typed records (probench.cache.records) -----------------------
    def read_record(self, name: str, cls: type[RecordT]) -> RecordT | None:
        """The result file ``name`` as a ``cls`` (None when there is none), read through the
        bounded reader and validated: a :class:`~probench.cache.errors.RecordError` naming the
        file and the first wrong key (a NaN, an AP of -5) otherwise."""
        from probench.cache.records import parse_record

        value = self.read_json(name)
        return None if value is None else parse_record(cls, value, self.path / name)

    def write_record(self, name: str, record: Record) -> Path:
        """A result file, atomically: the record's JSON (sorted keys, as every run file)."""
        return self.write_json(name, record.to_json())

    @property
    def info(self) -> RunRecord:
        """run.json (an empty record before it is written); a
        :class:`~probench.cache.errors.RecordError` when it is not one."""
        from probench.cache.records import RUN_FILE, RunRecord

        return self.read_record(RUN_FILE, RunRecord) or RunRecord()

    # -- predictions ---------------------------------------------------------------
    def writer(self, formulation: str) -> PredictionWriter:
        self.create()
        return PredictionWriter(self, formulation)

    def open_writers(self, formulations: Iterable[str]) -> dict[str, PredictionWriter]:
        """A writer (resuming its progress log) for each of ``formulations`` not yet
        complete, in the order given."""
        done = set(self.formulations())
        return {f: self.writer(f) for f in dict.fromkeys(formulations) if f not in done}

    def formulations(self) -> list[str]:
        """Formulations whose predictions are complete, in the canonical order."""
        return [f for f in RUN_FORMULATIONS if (self.predictions_dir / f"{f}.json").exists()]

    def drop_stale_logs(self) -> list[str]:
        """Remove the progress log of every complete formulation (left by a kill between
        writing ``<f>.json`` and removing the log); returns those formulations."""
        stale = [f for f in RUN_FORMULATIONS if (self.predictions_dir / f"{f}.json").exists()
                 and (self.predictions_dir / f"{f}.partial.jsonl").exists()]
        for f in stale:
            (self.predictions_dir / f"{f}.partial.jsonl").unlink()
        return stale

    def incomplete_formulations(self) -> list[str]:
        return [
            f
            for f in RUN_FORMULATIONS
            if (self.predictions_dir / f"{f}.partial.jsonl").exists()
            and not (self.predictions_dir / f"{f}.json").exists()
        ]

    def predictions(self, formulation: str) -> list[dict[str, Any]]:
        """One formulation's COCO results; a :class:`CacheError` names what is wrong."""
        return self.predictions_and_columns(formulation)[0]

    def predictions_and_columns(
        self, formulation: str
    ) -> tuple[list[dict[str, Any]], PredictionColumns | None]:
        """:meth:`predictions`, and the same as columns when every record is plain (integer
        ids, a list of 4 numbers, a number score): None otherwise (the scorer then reads
        the records and names any it cannot use)."""
        path = self.predictions_dir / f"{formulation}.json"
        if not path.exists():
            raise CacheError(f"{path}: no predictions for formulation {formulation!r}")
        data = self.read_json(f"predictions/{formulation}.json")
        if not isinstance(data, list):
            raise CacheError(f"{path}: expected a JSON list of COCO results")
        columns = _columns(data)
        if columns is None:  # something is not plain: the record-by-record checks decide
            _check_results(path, data)
        return data, columns


class PredictionColumns(NamedTuple):
    """A formulation's results as arrays, in file order."""

    image_id: np.ndarray  # (n,) int64
    category_id: np.ndarray  # (n,) int64
    bbox: np.ndarray  # (n, 4) float64, x y w h
    score: np.ndarray  # (n,) float64, in [0, 1]


def _columns(data: list[Any]) -> PredictionColumns | None:
    """The results as columns when every record passes :func:`_check_results` for sure
    (checked over whole columns); None when one might not, or has ids that are not plain
    integers. numpy reads each column in one pass: a column holding anything but numbers
    (a string, null, a nested list, an integer beyond 64 bits) comes out with another kind
    of array, or does not convert."""
    if set(map(type, data)) - {dict}:
        return None
    try:
        ids, cats, boxes, scores = (np.array(list(map(itemgetter(k), data)))
                                    for k in ("image_id", "category_id", "bbox", "score"))
    except (KeyError, ValueError, TypeError, OverflowError):
        return None
    n = len(data)
    if n == 0:
        return PredictionColumns(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 4)), np.zeros(0))
    if ids.dtype.kind != "i" or cats.dtype.kind != "i" or scores.dtype.kind not in "fi":
        return None  # (booleans too: the records' own checks decide)
    if boxes.dtype.kind not in "fi" or boxes.shape != (n, 4):
        return None
    s = scores.astype(np.float64)
    if not bool(((s >= 0.0) & (s <= 1.0)).all()):  # NaN fails too
        return None
    return PredictionColumns(ids.astype(np.int64), cats.astype(np.int64), boxes.astype(np.float64), s)


def _check_results(path: Path, data: list[Any]) -> None:
    """The first record that is not a COCO result, named (a :class:`CacheError`)."""
    for i, r in enumerate(data):
        if not isinstance(r, dict) or not {"image_id", "category_id", "bbox", "score"} <= r.keys():
            raise CacheError(f"{path}: record {i} lacks image_id/category_id/bbox/score")
        bbox = r["bbox"]
        numeric = isinstance(bbox, list) and all(isinstance(v, (int, float)) for v in bbox)
        if not (numeric and len(bbox) == 4):
            raise CacheError(f"{path}: record {i} has a malformed bbox {bbox!r}")
        if not isinstance(r["score"], (int, float)) or not 0.0 <= r["score"] <= 1.0:
            raise CacheError(f"{path}: record {i} has a score outside [0, 1]: {r['score']!r}")
