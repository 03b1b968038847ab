"""`probench eval` whose evaluator is killed with SIGKILL at every step of a run, then rerun
with the same command, ends with the predictions (bytes) and accuracy metrics of an
uninterrupted run (issue 9, requirement 4). The kill lands at a named point
(:mod:`probench.cache.crash`). As-fast-as-answered mode, so that the predictions do not
depend on timing; the committed sample bag (every frame has its own label space)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.crash import crash_env
from helpers.grounding_harness import fresh_domain
from probench.cache.run import RunDir

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.usefixtures("requires_vision_msgs")]

FORMS = ("orig", "cat", "tmpl")


def _eval(env: dict, bag: Path, out: Path, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = crash_env(env, crash_at)
    cmd = [
        sys.executable,
        "-m",
        "probench",
        "eval",
        "--model",
        "test-instant",
        "--bag",
        str(bag),
        "--out",
        str(out),
        "--mode",
        "as-fast-as-answered",
        "--domain-id",
        str(fresh_domain()),
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.fixture(scope="module")
def reference(repo_root: Path, tmp_path_factory, ros_env: dict) -> tuple[Path, Path]:
    bag = repo_root / "bags" / "probench-sample"
    ref = tmp_path_factory.mktemp("evcrash") / "ref"
    r = _eval(ros_env, bag, ref)
    assert r.returncode == 0, r.stderr[-3000:]
    return bag, ref


CASES = {
    "eval.started": lambda run: _lines(run / "predictions/orig.partial.jsonl") == 0,
    "eval.record:4": lambda run: (
        _lines(run / "predictions/orig.partial.jsonl") == 4 and not RunDir(run).formulations()
    ),
    "eval.formulation_done:1": lambda run: RunDir(run).formulations() == ["orig"],
    "eval.finishing": lambda run: (
        RunDir(run).formulations() == list(FORMS) and not (run / "realtime.json").exists()
    ),
    "eval.scoring": lambda run: (run / "realtime.json").exists() and not (run / "metrics.json").exists(),
}


@pytest.mark.parametrize("point", list(CASES))
def test_killed_evaluator_then_rerun_equals_an_uninterrupted_run(
    point: str, reference, tmp_path: Path, ros_env: dict
) -> None:
    bag, ref = reference
    run = tmp_path / "run"
    killed = _eval(ros_env, bag, run, crash_at=point)
    assert killed.returncode == 1 and "evaluator_node exited with code -9" in killed.stderr, killed.stderr[
        -3000:
    ]
    assert CASES[point](run), sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    status = json.loads((run / "run.json").read_text())["status"]
    assert status == ("complete" if point == "eval.scoring" else "running")  # nothing ran after the kill

    again = _eval(ros_env, bag, run)
    assert again.returncode == 0, again.stderr[-3000:]
    for f in FORMS:
        assert (run / "predictions" / f"{f}.json").read_bytes() == (
            ref / "predictions" / f"{f}.json"
        ).read_bytes()
    mine = json.loads((run / "metrics.json").read_text())
    theirs = json.loads((ref / "metrics.json").read_text())
    rt = mine.pop("realtime")
    theirs.pop("realtime")
    assert mine == theirs
    assert rt["frames_sent"] == 30 and rt["frames_missed"] == 0 and rt["stray_messages"] == 0
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "complete" and info["resumed"] == 1
