"""``--ray ADDRESS`` gives up within ``--ray-timeout`` seconds with "no Ray cluster at
ADDRESS": at once when nothing listens (it used to hang for minutes in Ray's warnings),
after the timeout when something that is not a Ray head listens."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.infer_dataset import make_dataset
from probench.cli import main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nothing_listening_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = make_dataset(tmp_path / "data")
    address = f"127.0.0.1:{_free_port()}"
    t0 = time.perf_counter()
    rc = main(["infer", "--model", "test-instant", "--dataset", str(data), "--out", str(tmp_path / "run"),
               "--ray", address, "--ray-timeout", "3", "--no-progress"])
    seconds = time.perf_counter() - t0
    err = capsys.readouterr().err.strip()
    assert rc == 1, err
    assert err == (f"probench infer: error: no Ray cluster at {address} (nothing listens there); start one "
                   "there with `ray start --head`, or check the address (docs/SCALE.md)")
    assert seconds < 20, seconds  # importing ray takes most of it; no connection attempt is waited for


def test_a_silent_listener_is_given_up_after_the_timeout(tmp_path: Path, repo_root: Path) -> None:
    data = make_dataset(tmp_path / "data")
    with socket.socket() as server:  # accepts TCP connections (the kernel's backlog), never speaks
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "probench", "sweep", "--models", "test-instant", "--dataset", str(data),
             "--out", str(tmp_path / "sweep"), "--no-latency", "--ray", address, "--ray-timeout", "2",
             "--no-progress"],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(repo_root / "src")),
        )
        seconds = time.perf_counter() - t0
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"probench: error: no Ray cluster at {address} (it did not answer as a Ray head "
                           "within 2 s)"), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert seconds < 40, seconds  # was 3 minutes of Ray warnings until killed


@pytest.mark.parametrize("value", ["0", "-1", "61", "nan"])
def test_ray_timeout_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    data = make_dataset(tmp_path / "data")
    rc = main(["infer", "--model", "test-instant", "--dataset", str(data), "--out", str(tmp_path / "run"),
               "--ray", "127.0.0.1:1", "--ray-timeout", value])
    assert rc == 2 and "--ray-timeout must lie in (0, 60] seconds" in capsys.readouterr().err
