"""Run folders never write through a symbolic link they did not make (the lock, partial
logs, the predictions folder, the JSON parts), and a resume merges only records that
probench itself could have written: a tampered log is refused, naming its line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.hostile import one_line
from helpers.infer_dataset import make_dataset
from probench.cache import CacheError, RunDir
from probench.cache.errors import RunFolderLinkError
from probench.cache.lock import LOCK_FILE, acquire, check_free, release
from probench.cli import main


def _infer(data: Path, run: Path) -> int:
    return main(["infer", "--model", "test-instant", "--dataset", str(data), "--out", str(run),
                 "--no-progress",
                 "--formulations", "orig"])



def test_a_linked_lock_file_is_refused_and_its_target_untouched(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).symlink_to(victim)
    assert _infer(make_dataset(tmp_path / "data"), run) == 1
    assert "is a symbolic link" in one_line(capsys.readouterr().err)
    assert victim.read_text() == "precious\n"
    with pytest.raises(RunFolderLinkError):
        acquire(run)
    with pytest.raises(RunFolderLinkError):
        check_free(run)


def test_a_lock_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / LOCK_FILE)
    with pytest.raises(CacheError, match="not a regular file"):
        acquire(tmp_path)
    release(tmp_path)


def _killed_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run folder as a SIGKILL leaves it: run.json and a partial log of two images."""
    data = make_dataset(tmp_path / "data")
    run = tmp_path / "run"
    assert _infer(data, run) == 0
    final = run / "predictions" / "orig.json"
    results = json.loads(final.read_text())
    final.unlink()
    by_image: dict[int, list[dict]] = {}
    for r in results:
        by_image.setdefault(r["image_id"], []).append(r)
    log = run / "predictions" / "orig.partial.jsonl"
    log.write_text("".join(json.dumps({"image_id": i, "results": by_image.get(i, [])}) + "\n"
                           for i in (10, 11)))
    info = json.loads((run / "run.json").read_text())
    info["status"] = "running"
    (run / "run.json").write_text(json.dumps(info))
    return data, run


def test_a_partial_log_replaced_by_a_link_is_refused(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    data, run = _killed_run(tmp_path)
    victim = tmp_path / "victim.jsonl"
    victim.write_bytes((run / "predictions" / "orig.partial.jsonl").read_bytes())
    before = victim.read_bytes()
    (run / "predictions" / "orig.partial.jsonl").unlink()
    (run / "predictions" / "orig.partial.jsonl").symlink_to(victim)
    assert _infer(data, run) == 1
    assert "is a symbolic link" in one_line(capsys.readouterr().err)
    assert victim.read_bytes() == before  # nothing appended through the link


def test_a_predictions_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions").symlink_to(elsewhere)
    with pytest.raises(RunFolderLinkError):
        RunDir(run).writer("orig")
    assert list(elsewhere.iterdir()) == []


def test_a_json_part_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    """A new case: run.json linked to a file elsewhere is refused, not read."""
    (tmp_path / "secret.json").write_text('{"model": {"name": "x"}}')
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").symlink_to(tmp_path / "secret.json")
    with pytest.raises(CacheError, match="is a symbolic link"):
        RunDir(run).info  # noqa: B018 - the property reads run.json


@pytest.mark.parametrize(("edit", "message"), [
    (lambda recs: [*recs, recs[0]], "line 3: image 10 is recorded twice"),
    (lambda recs: [recs[0], {**recs[1], "results": [{**recs[1]["results"][0], "bbox": [math.nan, 0, 1, 1]}]}],
     "line 2: result 0 has a bbox that is not four finite numbers"),
    (lambda recs: [{**recs[0], "results": [{**recs[0]["results"][0], "score": 7.5}]}, recs[1]],
     "line 1: result 0 has a score outside"),
    (lambda recs: [recs[0], {**recs[1], "image_id": "11"}], "line 2: not a record of one image"),
    (lambda recs: [{**recs[0], "results": [{**recs[0]["results"][0], "image_id": 999}]}],
     "not a result of image 10"),
    (lambda recs: [recs[0], [1, 2]], "line 2: not a record"),
    (lambda recs: [{**recs[0], "results": [{**recs[0]["results"][0], "category_id": 1.5}]}],
     "no integer category_id"),
])
def test_a_tampered_partial_log_is_refused_naming_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           edit, message: str) -> None:
    data, run = _killed_run(tmp_path)
    log = run / "predictions" / "orig.partial.jsonl"
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert recs[0]["results"] and recs[1]["results"]
    log.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in edit(recs)))
    assert _infer(data, run) == 1
    line = one_line(capsys.readouterr().err)
    assert message in line and str(log) in line
    assert not (run / "predictions" / "orig.json").exists()


def test_an_untampered_log_resumes(tmp_path: Path) -> None:
    data, run = _killed_run(tmp_path)
    assert _infer(data, run) == 0
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_a_trace_that_is_a_link_or_deeply_nested_is_handled(tmp_path: Path) -> None:
    """A new case: the run folder's trace (read by `probench report`'s misses and the evaluator)."""
    from probench.cache.trace import read_trace

    (tmp_path / "elsewhere.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "trace.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(CacheError, match="is a symbolic link"):
        read_trace(tmp_path / "trace.jsonl")
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"a": 1}\n' + "[" * 5000 + "]" * 5000 + "\n")
    assert read_trace(deep) == [{"a": 1}]  # the deep line ends the good prefix, as a torn one does


def test_score_refuses_predictions_linked_to_a_device(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A new case: `probench score` reads the run folder through the same reader."""
    data = make_dataset(tmp_path / "data")
    run = tmp_path / "run"
    assert _infer(data, run) == 0
    final = run / "predictions" / "orig.json"
    final.unlink()
    final.symlink_to("/dev/zero")
    assert main(["score", "--dataset", str(data), "--run", str(run)]) == 1
    assert "is a symbolic link" in one_line(capsys.readouterr().err)
