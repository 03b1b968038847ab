"""Frames whose model call raised are counted apart (issue 36, 6b/6c): ``frames_failed`` and
the first error in realtime.json, not among the missed frames, and the run is not complete
(run.json ``failed``, naming the first error). A replay without failures writes neither key."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.records_golden import eval_files
from probench.cache.trace import ANSWERED, FAILED, MISSED, frame_record
from probench.realtime.eval_realtime import realtime_summary

GOLDEN = Path(__file__).resolve().parents[1] / "cache" / "records_golden"
ERROR = "ValueError: Expected more than 1 value per channel when training"


def _trace() -> list[dict]:
    out, t = [], 1_000_000_000
    statuses = [ANSWERED, FAILED, MISSED, FAILED, ANSWERED]
    for seq, (image_id, status) in enumerate(zip(range(1, 6), statuses, strict=True)):
        error = f"{ERROR} (image {image_id})" if status == FAILED else None
        out.append(frame_record("orig", image_id, sent_ns=t, received_ns=t + 20_000_000, status=status,
                                seq=seq, error=error))
        t += 50_000_000
    return out


def test_failed_frames_are_counted_apart_with_the_first_error() -> None:
    rt = realtime_summary(_trace(), budget_ms=50.0, rate_hz=20.0, mode="camera-rate", warmup_frames=0)
    assert (rt.frames_sent, rt.frames_received, rt.frames_missed, rt.frames_failed) == (5, 2, 1, 2)
    assert rt.missed_share == 0.2 and rt.first_error == f"{ERROR} (image 2)"
    assert rt.by_formulation["orig"].frames_failed == 2
    keys = rt.to_json()
    assert keys["frames_failed"] == 2
    assert keys["by_formulation"]["orig"]["first_error"] == f"{ERROR} (image 2)"


def test_a_replay_without_failures_writes_no_failure_keys() -> None:
    clean = [r for r in _trace() if r["status"] != FAILED]
    rt = realtime_summary(clean, budget_ms=50.0, rate_hz=20.0, mode="camera-rate", warmup_frames=0)
    keys = rt.to_json()
    assert "frames_failed" not in keys and "first_error" not in keys
    assert "frames_failed" not in keys["by_formulation"]["orig"]


def test_a_replay_with_failed_frames_is_not_complete(tmp_path: Path) -> None:
    """The evaluator's finish on a trace with failed frames: run.json says failed, naming how
    many and the first error; realtime.json and metrics.json's realtime count them."""
    committed = (GOLDEN / "inputs" / "realtime_frames.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in committed]
    for r in records:  # two of the measured frames raised in the model
        if r.get("kind") == "frame" and r["session"] == 1 and r["image_id"] in (2, 3):
            r.update(status=FAILED, received_ns=None, latency_ms=None,
                     error=f"{ERROR} (image {r['image_id']})")
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    files = {name: json.loads(data) for name, data in eval_files(GOLDEN, tmp_path / "run", trace).items()}
    info, rt = files["run.json"], files["realtime.json"]
    assert info["status"] == "failed" and "finished" not in info
    assert info["error"] == ("4 frame(s) failed in the grounding node's model (counted apart from the "
                             f"missed ones), the first with {ERROR} (image 2)")
    assert rt["frames_failed"] == 4 and rt["first_error"] == f"{ERROR} (image 2)"
    assert files["metrics.json"]["realtime"]["frames_failed"] == 4
