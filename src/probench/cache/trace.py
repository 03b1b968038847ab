"""The per-frame trace of a ROS replay: ``RUN/realtime_frames.jsonl``.

Written by the evaluator (:mod:`probench.realtime.eval_run`, one JSON line per resolved frame
and per stray answer, appended as the replay goes, resumable like the prediction logs),
read by the realtime figures (:mod:`probench.realtime.eval_realtime`) and the report's latency
timeline. Frame records: ``kind: "frame"`` (a measured frame) or ``"warmup"`` (a frame of the
session's discarded warm-up trial: scored nowhere, counted apart), ``formulation``,
``image_id``, ``session`` (0, then one more per resume), ``seq`` (position among the
session's measured frames, or among its warm-up frames), ``warmup``, ``stamp_ns`` (the wall
clock: the stamp the frame carried), ``scheduled_ns``, ``sent_ns``, ``received_ns`` (null
when not answered; these three on the evaluator's monotonic clock, comparable within a
session only), ``latency_ms``, ``status`` (``answered`` | ``missed`` | ``misattributed`` | ``failed``: the
model raised on it, with ``error``, "ExcType: message"), ``n_prompts``, ``n_detections``,
``n_results``. Stray records: ``kind: "stray"``,
``session``, ``stamp_ns``, ``received_ns``, ``n_detections``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from probench.cache.errors import CacheError
from probench.files import UserFileError, read_user_bytes
from probench.jsonio import loads

TRACE_FILE = "realtime_frames.jsonl"
FRAME, WARMUP, STRAY = "frame", "warmup", "stray"  # record kinds
ANSWERED, MISSED, MISATTRIBUTED, FAILED = "answered", "missed", "misattributed", "failed"  # frame statuses
# A trace record: one built here, or one read back from the file (JSON, so open-ended).
RecordT = TypeVar("RecordT", bound=Mapping[str, Any])


def frame_record(
    formulation: str, image_id: int, *, sent_ns: int, received_ns: int | None, status: str, session: int = 0,
    seq: int = 0, warmup: bool = False, stamp_ns: int | None = None, scheduled_ns: int | None = None,
    n_prompts: int = 0, n_detections: int = 0, n_results: int = 0, error: str | None = None,
) -> dict[str, Any]:
    """One frame's trace record (module doc); ``latency_ms`` from the send and arrival times
    of an answered frame; ``error`` (a failed frame's) only when given."""
    received = int(received_ns) if status == ANSWERED and received_ns is not None else None
    record: dict[str, Any] = {
        "kind": WARMUP if warmup else FRAME, "formulation": formulation, "image_id": int(image_id),
        "session": int(session),
        "seq": int(seq), "warmup": bool(warmup), "stamp_ns": int(sent_ns if stamp_ns is None else stamp_ns),
        "scheduled_ns": int(sent_ns if scheduled_ns is None else scheduled_ns), "sent_ns": int(sent_ns),
        "received_ns": received,
        "latency_ms": None if received is None else round((received - sent_ns) / 1e6, 4),
        "status": status, "n_prompts": n_prompts, "n_detections": n_detections, "n_results": n_results,
    }
    if error is not None:
        record["error"] = error
    return record


def latest_frames(records: Iterable[RecordT]) -> list[RecordT]:
    """The measured frame records that count: a frame sent again after a resume counts once,
    by its last record; in send order (session, then send time). Warm-up records are not
    among them (:func:`warmup_frames`)."""
    latest: dict[tuple[str, int], RecordT] = {}
    for r in records:
        if r.get("kind", FRAME) == FRAME:
            latest[(str(r["formulation"]), int(r["image_id"]))] = r
    return sorted(latest.values(), key=_send_order)


def warmup_frames(records: Iterable[RecordT]) -> list[RecordT]:
    """The warm-up records, in send order (every session's: each session has its own trial)."""
    return sorted((r for r in records if r.get("kind") == WARMUP), key=_send_order)


def _send_order(r: Mapping[str, Any]) -> tuple[int, int]:
    return int(r.get("session", 0)), int(r["sent_ns"])


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The records of a trace, read only: a torn last line (a killed run) is skipped, the
    file is not repaired. No file: no records."""
    path = Path(path)
    if not path.is_file():
        return []
    try:  # bounded: a regular file, never a link in a run folder, under the run-file size cap
        lines = read_user_bytes(path, what="trace", kind="run", follow=False).decode("utf-8").splitlines(
            keepends=True)
    except UnicodeDecodeError as exc:
        raise CacheError(f"{path}: cannot read: {exc}") from exc
    except UserFileError as exc:
        raise CacheError(f"{path}: cannot read: {exc.reason}") from None
    out = []
    for line in lines:
        if not line.endswith("\n"):
            break
        try:
            record = loads(line)  # (the nesting cap: a deep line is a bad line, never a RecursionError)
        except json.JSONDecodeError:
            break
        if isinstance(record, dict):
            out.append(record)
    return out
