"""The run cache: torn-line repair, idempotent resume, atomic finalize, fsync policy, bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from probench.cache import CacheError, JsonlLog, RunDir
from probench.cache import run as run_module
from probench.cache.identity import RunSession
from probench.cache.records import RunRecord
from probench.errors import CheckFailed, Interrupted


def _result(image_id: int, qid: int, score: float) -> dict:
    return {"image_id": image_id, "category_id": qid, "bbox": [1.0, 2.0, 3.0, 4.0], "score": score}


def test_torn_last_line_is_dropped_and_truncated(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3')  # the writer died mid-record
    log = JsonlLog(path)
    assert log.records == [{"a": 1}, {"a": 2}]
    log.append({"a": 4})
    log.close()
    assert path.read_bytes() == b'{"a": 1}\n{"a": 2}\n{"a": 4}\n'


def test_garbage_line_ends_the_good_prefix(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\nnot json\n{"a": 3}\n')
    assert JsonlLog(path).records == [{"a": 1}]
    assert path.read_bytes() == b'{"a": 1}\n'


def test_fsync_is_throttled_but_done_on_close(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(run_module.os, "fsync", lambda fd: calls.append(fd))
    log = JsonlLog(tmp_path / "log.jsonl", fsync_interval_s=3600.0)
    for i in range(50):
        log.append({"i": i})
    assert calls == []  # flushed to the OS (survives SIGKILL), not forced to disk per record
    log.close()
    assert len(calls) == 1
    every = JsonlLog(tmp_path / "every.jsonl", fsync_interval_s=0.0)
    for i in range(3):
        every.append({"i": i})
    every.close()
    assert len(calls) == 1 + 3 + 1


def test_resume_skips_done_images_and_finalize_is_canonical(tmp_path):
    run = RunDir(tmp_path / "run").create()
    w = run.writer("orig")
    w.add_image(2, [_result(2, 7, 0.1), _result(2, 5, 0.9)])
    w.close()
    assert run.formulations() == [] and run.incomplete_formulations() == ["orig"]

    w = run.writer("orig")  # a resumed process
    assert w.done_images == {2}
    w.add_image(2, [_result(2, 5, 0.5)])  # already logged: ignored
    w.add_image(1, [])
    path = w.finalize()
    assert run.formulations() == ["orig"] and run.incomplete_formulations() == []
    assert not (run.predictions_dir / "orig.partial.jsonl").exists()
    assert [(r["image_id"], r["category_id"]) for r in json.loads(path.read_text())] == [(2, 5), (2, 7)]


def test_open_writers_skips_complete_formulations_and_resumes_the_others(tmp_path):
    run = RunDir(tmp_path / "run")
    run.writer("cat").finalize()
    w = run.writer("tmpl")
    w.add_image(3, [])
    w.close()
    writers = run.open_writers(["tmpl", "cat", "orig"])
    assert list(writers) == ["tmpl", "orig"]  # cat is complete; the order asked is kept
    assert writers["tmpl"].done_images == {3} and writers["orig"].done_images == set()
    for w in writers.values():
        w.close()


def test_results_must_belong_to_their_image(tmp_path):
    w = RunDir(tmp_path / "run").writer("cat")
    with pytest.raises(CacheError, match="given as part of image 1"):
        w.add_image(1, [_result(3, 5, 0.5)])


def test_unknown_formulation_is_refused(tmp_path):
    with pytest.raises(CacheError, match="unknown formulation"):
        RunDir(tmp_path / "run").writer("orig2")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "expected a JSON list"),
        ('[{"image_id": 1}]', "lacks image_id/category_id/bbox/score"),
        ('[{"image_id": 1, "category_id": 2, "bbox": [1, 2, 3], "score": 0.5}]', "malformed bbox"),
        ('[{"image_id": 1, "category_id": 2, "bbox": [1, 2, 3, "x"], "score": 0.5}]', "malformed bbox"),
        ('[{"image_id": 1, "category_id": 2, "bbox": [1, 2, 3, 4], "score": 1.5}]', "outside \\[0, 1\\]"),
        ("[{", "cannot read JSON"),
    ],
)
def test_malformed_prediction_files_are_named(tmp_path, content, message):
    run = RunDir(tmp_path / "run").create()
    (run.predictions_dir / "orig.json").write_text(content)
    with pytest.raises(CacheError, match=message):
        run.predictions("orig")


def test_run_json_that_is_not_an_object_is_named(tmp_path):
    run = RunDir(tmp_path / "run").create()
    assert run.info.to_json() == {}  # not written yet: an empty record
    (run.path / "run.json").write_text("[1, 2]")
    with pytest.raises(CacheError, match=r"run\.json: expected a JSON object, not list"):
        _ = run.info


def test_missing_formulation_is_a_clear_error(tmp_path):
    with pytest.raises(CacheError, match="no predictions for formulation 'tmpl'"):
        RunDir(tmp_path / "run").create().predictions("tmpl")


def test_atomic_files_respect_the_umask(tmp_path) -> None:
    import os
    import stat

    from probench.cache.atomic import write_json_atomic

    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "a.json", {"x": 1})
        assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
        os.umask(0o077)
        write_json_atomic(tmp_path / "b.json", {"x": 1})
        assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_replacing_moves_into_place_on_success_only(tmp_path) -> None:
    import stat

    from probench.cache.atomic import replacing

    target = tmp_path / "video.mp4"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target) as tmp:
        assert tmp.suffix == ".mp4" and tmp.parent == tmp_path  # writers may pick a format from it
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["video.mp4"]
    with replacing(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["video.mp4"]
    assert stat.S_IMODE(target.stat().st_mode) & 0o044  # readable by others, as open() would make it


@pytest.mark.parametrize(
    ("exc", "status"),
    [(KeyboardInterrupt(), "interrupted"), (Interrupted("ROS shut down"), "interrupted"),
     (CheckFailed("bad frame"), "failed"), (RuntimeError("boom"), "failed")],
)  # fmt: skip
def test_a_failed_session_says_whether_it_was_interrupted(tmp_path, exc, status):
    run = RunDir(tmp_path / "run").create()
    RunSession(run, RunRecord()).fail(exc)
    assert run.info.status == status and type(exc).__name__ in (run.info.error or "")


@pytest.mark.parametrize(
    ("record", "plain"),
    [
        ({"image_id": True, "category_id": 2, "bbox": [1, 2, 3, 4], "score": 0.5}, True),  # as 1
        ({"image_id": 1.0, "category_id": 2, "bbox": [1, 2, 3, 4], "score": 0.5}, False),
        ({"image_id": 2**70, "category_id": 2, "bbox": [1, 2, 3, 4], "score": 0.5}, False),
        ({"image_id": 1, "category_id": 2, "bbox": [1, 2, 3, True], "score": True}, True),  # as 1.0
        ({"image_id": 1, "category_id": 2, "bbox": [1, 2, 3, 4], "score": 1}, True),
    ],
)
def test_columns_only_for_plain_records(tmp_path, record, plain):
    """Records the checks accept but whose ids are not integers are returned as they are,
    without columns (the scorer reads them record by record); the others come with the
    values the scorer would read from them (a boolean as 0 or 1)."""
    run = RunDir(tmp_path / "run").create()
    first = {"image_id": 3, "category_id": 4, "bbox": [0.5, 1, 2, 3.25], "score": 0.75}
    (run.predictions_dir / "orig.json").write_text(json.dumps([first, record]))
    records, columns = run.predictions_and_columns("orig")
    assert records == [first, record]
    if plain:
        assert columns is not None and columns.score.tolist() == [0.75, float(record["score"])]
        assert columns.bbox.tolist() == [[0.5, 1.0, 2.0, 3.25], [1.0, 2.0, 3.0, float(record["bbox"][3])]]
        assert columns.image_id.dtype == np.int64 and columns.image_id.tolist() == [3, 1]
    else:
        assert columns is None
