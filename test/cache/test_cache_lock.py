"""One writer per run or sweep folder: a second process is refused at once, naming the
holder's PID; the lock goes with its process (SIGKILL included), and is re-entrant inside
one process (a sweep holds its folder and each run folder under it). "At once" is counted,
not timed: every lock call is non-blocking and no model is built before the refusal."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.infer_dataset import make_dataset
from probench.cache import lock
from probench.cli import main


def _env(repo_root: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(repo_root / "src"), PYTHONUNBUFFERED="1")


def _holder(repo_root: Path, folder: Path) -> subprocess.Popen[str]:
    """Another process holding ``folder``'s lock until killed."""
    code = ("import sys, time; from probench.cache import lock; lock.acquire(sys.argv[1]); "
            "print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True,
                            env=_env(repo_root))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What a refusal could wait for, recorded: each flock call ("flock blocking" unless
    non-blocking) and each model load ("model": the registry's load_detector)."""
    from probench.models import zoo

    seen: list[str] = []
    flock, load = lock.fcntl.flock, zoo.load_detector

    def recorded_flock(fd: int, op: int) -> Any:
        seen.append("flock" if op & fcntl.LOCK_NB else "flock blocking")
        return flock(fd, op)

    def recorded_load(*args: Any, **kwargs: Any) -> Any:
        seen.append("model")
        return load(*args, **kwargs)

    monkeypatch.setattr(lock.fcntl, "flock", recorded_flock)
    monkeypatch.setattr(zoo, "load_detector", recorded_load)
    return seen


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], pid: int, waits: list[str]) -> None:
    waits.clear()
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "\n" not in err and "Traceback" not in err
    assert f"is being written by process {pid}" in err and "choose another folder" in err, err
    # at once: no model built, no waiting for the holder (every lock call non-blocking)
    assert waits and set(waits) == {"flock"}, waits


def test_lock_is_exclusive_between_processes_reentrant_within_one(repo_root: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    proc = _holder(repo_root, folder)
    try:
        with pytest.raises(lock.FolderBusy, match=f"--out {folder} is being written by process {proc.pid}"):
            lock.acquire(folder)
        with pytest.raises(lock.FolderBusy, match=str(proc.pid)):
            lock.check_free(folder)
    finally:
        proc.kill()
        proc.wait()
    lock.check_free(folder)  # the kernel dropped the lock with the killed process
    with lock.locked(folder), lock.locked(folder):  # re-entrant in one process
        lock.check_free(folder)
    assert (folder / lock.LOCK_FILE).read_text().strip() == str(os.getpid())


def test_infer_latency_sweep_refuse_a_folder_another_process_writes(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], waits: list[str]
) -> None:
    data = make_dataset(tmp_path / "data")
    run, sweep = tmp_path / "run", tmp_path / "sweep"
    proc = _holder(repo_root, run)
    other = _holder(repo_root, sweep)
    try:
        common = ["--model", "test-instant", "--dataset", str(data), "--out", str(run), "--no-progress"]
        _refused(capsys, ["infer", *common], proc.pid, waits)
        _refused(capsys, ["infer", *common, "--overwrite"], proc.pid, waits)  # never cleared under a writer
        _refused(capsys, ["latency", *common, "--overwrite"], proc.pid, waits)
        _refused(capsys, ["sweep", "--models", "test-instant", "--dataset", str(data), "--out", str(sweep),
                          "--no-progress"], other.pid, waits)
    finally:
        for p in (proc, other):
            p.kill()
            p.wait()
    assert sorted(p.name for p in run.iterdir()) == [lock.LOCK_FILE]  # nothing written beside the holder


def test_a_running_infer_holds_its_folder_until_it_ends(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], waits: list[str]
) -> None:
    data = make_dataset(tmp_path / "data")
    run = tmp_path / "run"
    args = ["infer", "--model", "test-slow-200ms", "--dataset", str(data), "--out", str(run), "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "probench", *args], env=_env(repo_root),
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (run / "run.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads((run / "run.json").read_text())["status"] == "running"
        _refused(capsys, args, proc.pid, waits)
    finally:
        proc.kill()
        proc.wait()
    assert main(args) == 0  # free again once its holder is gone: the killed run resumes and completes
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_two_sweeps_into_one_folder_the_second_refuses(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], waits: list[str]
) -> None:
    """The issue's case: both used to run every step, timing latency beside each other."""
    data = make_dataset(tmp_path / "data")
    sweep = tmp_path / "sweep"
    args = ["sweep", "--models", "test-slow-200ms", "--dataset", str(data), "--out", str(sweep),
            "--no-latency", "--reference", "none", "--no-progress"]
    first = subprocess.Popen([sys.executable, "-m", "probench", *args], env=_env(repo_root),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_json = sweep / "runs" / "test-slow-200ms" / "run.json"
        deadline = time.monotonic() + 60
        while not run_json.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run_json.is_file()
        _refused(capsys, args, first.pid, waits)
        assert not (sweep / "sweep.json").exists()  # the second one wrote nothing
        _, err = first.communicate(timeout=120)
        assert first.returncode == 0, err  # the first is not disturbed
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
