"""``probench fetch``: offline, or with the hub out of reach, it fails at once with one line
(no download is attempted); models with built-in weights need nothing. (No test downloads:
no hub is reachable from the tests.) "At once" is counted, not timed: the connection
attempts (each with its timeout) and the downloads tried are recorded."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probench.cli import main
from probench.models import fetch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _online(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "YOLO_OFFLINE"):
        monkeypatch.setenv(var, "0")
    monkeypatch.setenv("HF_ENDPOINT", endpoint)


@pytest.fixture(autouse=True)
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every connection attempt ("connect", (host, port), timeout) and download tried
    ("download", model name) during a test: what "at once" means, counted."""
    seen: list[tuple[str, Any]] = []
    real = socket.create_connection

    def connect(address: tuple[str, int], timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
        seen.append(("connect", (address, timeout)))
        return real(address, timeout, *args, **kwargs)

    def download(spec: Any) -> str:
        seen.append(("download", spec.name))
        raise AssertionError("a download was attempted")

    monkeypatch.setattr(fetch.socket, "create_connection", connect)
    monkeypatch.setattr(fetch, "_FETCHERS", {backend: download for backend in fetch._FETCHERS})
    return seen


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 1) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == code, err
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_offline_fails_at_once_in_one_line(repo_root: Path) -> None:
    """The command as a user runs it (its one line, its exit code); that it tries nothing
    offline is counted in-process below (test_offline_switch_of_each_backend)."""
    env = dict(os.environ, PYTHONPATH=str(repo_root / "src"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="0")
    proc = subprocess.run([sys.executable, "-m", "probench", "fetch", "owlv2-b"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == (
        "probench fetch: error: offline (HF_HUB_OFFLINE=1): nothing can be downloaded here; on a machine "
        "with internet unset HF_HUB_OFFLINE and rerun, then copy the cache here (docs/MODELS.md)"
    )


def test_offline_switch_of_each_backend(monkeypatch: pytest.MonkeyPatch, capsys, attempts) -> None:
    _online(monkeypatch, "http://127.0.0.1:1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "offline (HF_HUB_OFFLINE=1)" in _one_line_error(capsys, ["fetch", "owlv2-b"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert "offline (TRANSFORMERS_OFFLINE=1)" in _one_line_error(capsys, ["fetch", "owlvit"])
    monkeypatch.setenv("YOLO_OFFLINE", "1")
    assert "offline (YOLO_OFFLINE=1)" in _one_line_error(capsys, ["fetch", "yolo-world-s"])
    assert attempts == []  # at once: no connection tried, no download


def test_a_hub_nothing_answers_at_fails_at_once(monkeypatch: pytest.MonkeyPatch, capsys, attempts) -> None:
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    _online(monkeypatch, endpoint)
    err = _one_line_error(capsys, ["fetch", "owlv2-b"])
    assert err.startswith(f"probench fetch: error: cannot reach {endpoint} (") and "copy the cache" in err
    assert "no answer within" not in err  # refused: not a connection given up after its timeout
    _online(monkeypatch, "https://hub.invalid")  # a name that never resolves (RFC 2606)
    assert "cannot resolve hub.invalid" in _one_line_error(capsys, ["fetch", "owlv2-b"])
    # at once: one connection tried per command, nothing downloaded
    assert attempts == [("connect", (("127.0.0.1", port), fetch.CONNECT_TIMEOUT_S)),
                        ("connect", (("hub.invalid", 443), fetch.CONNECT_TIMEOUT_S))]


def test_a_hub_that_does_not_answer_is_given_up_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch, capsys, attempts
) -> None:
    with socket.socket() as server, socket.socket() as first:
        server.bind(("127.0.0.1", 0))
        server.listen(0)  # a full accept queue: the kernel drops further SYNs, as a firewall would
        first.connect(server.getsockname())
        address = server.getsockname()
        endpoint = f"http://127.0.0.1:{address[1]}"
        _online(monkeypatch, endpoint)
        err = _one_line_error(capsys, ["fetch", "owlv2-b", "--timeout", "1"])
    # one connection, bounded by --timeout, given up by that timeout; nothing downloaded
    assert attempts == [("connect", (tuple(address), 1.0))]
    assert f"cannot reach {endpoint} (no answer within 1 s)" in err


def test_models_with_built_in_weights_need_nothing(capsys) -> None:
    assert main(["fetch", "tiny-owlv2", "test-instant"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["test-instant: nothing to fetch: a scripted test model",
                   "tiny-owlv2: nothing to fetch: random weights, built in"]


def test_bad_names_and_unfetchable_backends(capsys) -> None:
    assert "unknown model 'nope'" in _one_line_error(capsys, ["fetch", "owlv2-b", "nope"], code=2)
    assert "cannot fetch detectron2 weights" in _one_line_error(capsys, ["fetch", "detic"])
    assert "--timeout must lie in" in _one_line_error(capsys, ["fetch", "owlv2-b", "--timeout", "0"], code=2)
