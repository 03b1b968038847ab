"""``--ray ADDRESS`` gives up within ``--ray-timeout`` seconds with "no Ray cluster at
ADDRESS": at once when nothing listens (it used to hang for minutes in Ray's warnings),
after the timeout when something that is not a Ray head listens. What could wait is counted,
not timed: the TCP probe (with its timeout), the watchdog armed over Ray's connection (with
its timeout) and the calls of ``ray.init``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers.infer_dataset import make_dataset
from probench.cli import main
from probench.scale import cluster


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Each TCP probe ("probe", (host, port), timeout), watchdog armed ("watchdog", address,
    timeout) and ``ray.init`` call ("ray.init", address); ``ray.init`` is refused here with a
    ConnectionError (Ray's own retries would hang the test process for minutes)."""
    seen: list[tuple[str, Any]] = []
    connect = socket.create_connection

    def probe(target: tuple[str, int], timeout: float | None = None) -> Any:
        seen.append(("probe", target, timeout))
        return connect(target, timeout)

    def watchdog(address: str, timeout_s: float) -> threading.Event:
        seen.append(("watchdog", address, timeout_s))
        return threading.Event()

    def init(*args: Any, address: str | None = None, **kwargs: Any) -> None:
        seen.append(("ray.init", address, None))
        raise ConnectionError("refused by the test")

    ray = cluster.import_ray()
    monkeypatch.setattr(cluster.socket, "create_connection", probe)
    monkeypatch.setattr(cluster, "_watchdog", watchdog)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    return seen


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nothing_listening_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              waits: list[tuple[str, Any]]) -> None:
    data = make_dataset(tmp_path / "data")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    rc = main(["infer", "--model", "test-instant", "--dataset", str(data), "--out", str(tmp_path / "run"),
               "--ray", address, "--ray-timeout", "3", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 1, err
    assert err == (f"probench infer: error: no Ray cluster at {address} (nothing listens there); start one "
                   "there with `ray start --head`, or check the address (docs/SCALE.md)")
    # at once: one probe, refused (not given up after its timeout); Ray is never asked to connect
    assert waits == [("probe", ("127.0.0.1", port), 3.0)]


def test_a_silent_listener_arms_the_timeout_over_rays_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], waits: list[tuple[str, Any]]
) -> None:
    """Something accepts the probe: Ray is asked to connect only under a watchdog armed with
    --ray-timeout (what ends the process after it: test_a_silent_listener_is_given_up...)."""
    data = make_dataset(tmp_path / "data")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        rc = main(["infer", "--model", "test-instant", "--dataset", str(data), "--out",
                   str(tmp_path / "run"), "--ray", address, "--ray-timeout", "2", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and f"cannot connect to --ray {address}: ConnectionError: refused by the test" in err, err
    assert waits == [("probe", ("127.0.0.1", int(address.rsplit(":", 1)[1])), 2.0),
                     ("watchdog", address, 2.0), ("ray.init", address, None)]


def test_a_silent_listener_is_given_up_after_the_timeout(tmp_path: Path, repo_root: Path) -> None:
    data = make_dataset(tmp_path / "data")
    with socket.socket() as server:  # accepts TCP connections (the kernel's backlog), never speaks
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        proc = subprocess.run(
            [sys.executable, "-m", "probench", "sweep", "--models", "test-instant", "--dataset", str(data),
             "--out", str(tmp_path / "sweep"), "--no-latency", "--ray", address, "--ray-timeout", "2",
             "--no-progress"],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(repo_root / "src")),
        )  # (it was 3 minutes of Ray warnings until killed: the subprocess timeout would fail it)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    # the watchdog's own line: it ended the process, armed with --ray-timeout (counted in-process above)
    assert last.startswith(f"probench: error: no Ray cluster at {address} (it did not answer as a Ray head "
                           "within 2 s)"), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("value", ["0", "-1", "61", "nan"])
def test_ray_timeout_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    data = make_dataset(tmp_path / "data")
    rc = main(["infer", "--model", "test-instant", "--dataset", str(data), "--out", str(tmp_path / "run"),
               "--ray", "127.0.0.1:1", "--ray-timeout", value])
    assert rc == 2 and "--ray-timeout must lie in (0, 60] seconds" in capsys.readouterr().err
