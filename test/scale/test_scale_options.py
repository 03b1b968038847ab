"""The Ray flags of ``probench infer``: wrong combinations exit 2 with one line, before any
cluster starts or model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli_exit import exit_code
from probench.scale.cluster import on_loopback, resolve_address

SAMPLE = "datasets/probench-sample"


@pytest.mark.parametrize(("extra", "message"), [
    (["--workers", "2"], "--workers only apply with --ray"),
    (["--chunk-size", "4"], "--chunk-size only apply with --ray"),
    (["--ray", "--workers", "0"], "argument --workers: must be 1..1000000000, got 0"),
    (["--ray", "--device", "cuda:1"], "pass --device cuda"),
    (["--ray", "--device", "mps"], "use cpu or cuda"),
])  # fmt: skip
def test_bad_ray_flags_exit_2(repo_root: Path, tmp_path: Path, capsys, extra, message) -> None:
    out = tmp_path / "run"
    rc = exit_code(["infer", "--model", "test-instant", "--dataset", str(repo_root / SAMPLE), "--out",
                    str(out), "--no-progress", *extra])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and message in err and "\n" not in err
    assert not out.exists()


def test_addresses(monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_address(None) is None and resolve_address("") is None  # a local cluster
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert resolve_address("") == "10.0.0.5:6379" and resolve_address("auto") == "auto"
    assert on_loopback("127.0.0.1:6379") and on_loopback("ray://localhost:10001")
    assert on_loopback("[::1]:6379")
    assert not on_loopback("10.0.0.5:6379") and not on_loopback("auto")
