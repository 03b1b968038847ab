"""`probench infer` killed with SIGKILL at every step of a run, then rerun with the same
command, ends with the predictions (bytes) and accuracy metrics of an uninterrupted run
(issue 9, requirement 4). The kill lands exactly at a named point
(:mod:`probench.cache.crash`), not wherever a timer happens to fire."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.crash import crash_env
from helpers.infer_dataset import make_dataset
from probench.cache.run import RunDir

FORMS = ("orig", "cat", "tmpl")
N_IMAGES = 6


def _infer(ds: Path, out: Path, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = crash_env({**os.environ, "PYTHONUNBUFFERED": "1"}, crash_at)
    cmd = [
        sys.executable,
        "-m",
        "probench",
        "infer",
        "--model",
        "test-instant",
        "--dataset",
        str(ds),
        "--out",
        str(out),
        "--no-progress",
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _metrics(ds: Path, run: Path) -> dict:
    from probench.data.dataset import load_dataset
    from probench.scoring import score_run

    return score_run(load_dataset(ds), run).to_json()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("crash")
    ds = make_dataset(root / "ds", n_images=N_IMAGES)
    r = _infer(ds, root / "ref")
    assert r.returncode == 0, r.stderr
    return ds, root / "ref"


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


# point -> what the folder must look like right after the kill
CASES = {
    "infer.started": lambda run: (
        not RunDir(run).formulations() and _lines(run / "predictions/orig.partial.jsonl") == 0
    ),
    "infer.record:4": lambda run: (
        _lines(run / "predictions/orig.partial.jsonl") == 4 and not RunDir(run).formulations()
    ),
    "infer.formulation_done:1": lambda run: (
        RunDir(run).formulations() == ["orig"] and not (run / "predictions/orig.partial.jsonl").exists()
    ),
    "cache.finalize:2": lambda run: (
        RunDir(run).formulations() == ["orig", "cat"] and (run / "predictions/cat.partial.jsonl").exists()
    ),  # killed between the json and the log removal
    "infer.finishing": lambda run: RunDir(run).formulations() == list(FORMS),
}


@pytest.mark.parametrize("point", list(CASES))
def test_killed_then_rerun_equals_an_uninterrupted_run(point: str, reference, tmp_path: Path) -> None:
    ds, ref = reference
    run = tmp_path / "run"
    killed = _infer(ds, run, crash_at=point)
    assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILL: nothing after the point ran
    assert json.loads((run / "run.json").read_text())["status"] == "running"
    assert CASES[point](run), sorted(str(p.relative_to(run)) for p in run.rglob("*"))

    again = _infer(ds, run)
    assert again.returncode == 0, again.stderr[-2000:]
    for f in FORMS:
        assert (run / "predictions" / f"{f}.json").read_bytes() == (
            ref / "predictions" / f"{f}.json"
        ).read_bytes()
    assert not list((run / "predictions").glob("*.partial.jsonl"))  # no log left behind, stale ones included
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "complete" and info["resumed"] == 1
    assert _metrics(ds, run) == _metrics(ds, ref)


def test_a_dataset_with_nothing_to_ask_is_refused_in_one_line(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", n_images=2)
    coco = json.loads((root / "annotations.json").read_text())
    coco["annotations"] = []
    for im in coco["images"]:
        im.pop("query_ids", None)
    (root / "annotations.json").write_text(json.dumps(coco))
    r = _infer(root, tmp_path / "run")
    assert r.returncode == 1 and "nothing to ask the model" in r.stderr and "query_ids" in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


def test_images_with_an_empty_label_space_are_counted_and_said(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", n_images=3)
    coco = json.loads((root / "annotations.json").read_text())
    coco["annotations"] = [a for a in coco["annotations"] if a["image_id"] != 12]  # image 12: nothing to ask
    (root / "annotations.json").write_text(json.dumps(coco))
    r = _infer(root, tmp_path / "run")
    assert r.returncode == 0, r.stderr
    assert "1 of 3 image(s) have an empty label space" in r.stderr
