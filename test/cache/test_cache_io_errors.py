"""A run folder that cannot be written mid-run costs one line (no traceback), and the run
resumes once the folder is writable again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.infer_dataset import make_dataset
from probench.cli import main


def test_infer_reports_an_unwritable_run_folder_in_one_line_then_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import probench.cache.run as run_module

    data = make_dataset(tmp_path / "data")
    run = tmp_path / "run"
    args = ["infer", "--model", "test-instant", "--dataset", str(data), "--out", str(run), "--no-progress"]
    real = run_module.write_json_atomic
    calls = {"n": 0}

    def flaky(path: object, obj: object, **kw: object) -> None:
        calls["n"] += 1
        if calls["n"] >= 3:  # run.json written, orig.json finished; then the folder turns read-only
            raise PermissionError(1, "Operation not permitted", str(path))
        real(path, obj, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(run_module, "write_json_atomic", flaky)
    monkeypatch.delenv("PROBENCH_DEBUG", raising=False)
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("probench infer: error: cannot write ") and "Operation not permitted" in err
    assert "rerun the same command to resume" in err
    monkeypatch.setenv("PROBENCH_DEBUG", "1")  # the traceback only when asked for
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" in err and "PermissionError" in err
    assert err.splitlines()[-1].startswith("probench infer: error: cannot write ")
    monkeypatch.delenv("PROBENCH_DEBUG")
    monkeypatch.setattr(run_module, "write_json_atomic", real)
    assert main(args) == 0  # writable again: the run resumes and completes
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "complete" and info.get("resumed") == 1
