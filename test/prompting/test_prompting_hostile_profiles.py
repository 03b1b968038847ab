"""Profiles are read through the one bounded reader and checked to the last value:
a profile linked to /dev/zero or a FIFO (`prompt`, `infer`), nested 100,000 deep, with
NaN/Infinity or `"probench_profile": true`, and metrics with NaN (`probench profile`) are
one line each, exit 1, in little memory, never a hang."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.hostile import PEAK_LIMIT_MB, nested_json, one_line, run_measured
from probench.cli import main
from probench.prompting.profile import ProfileError, load_profile, profile_from_runs

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"
PROMPT = ["prompt", "--policy", "best", "--model", "tiny-owlv2", "a red cup", "--profile"]



@pytest.mark.parametrize("command", ["prompt", "infer"])
def test_a_profile_linked_to_dev_zero_is_refused_in_little_memory(tmp_path: Path, command: str) -> None:
    link = tmp_path / "profile.json"
    link.symlink_to("/dev/zero")
    args = ([*PROMPT, str(link)] if command == "prompt" else
            ["infer", "--model", "test-instant", "--dataset", str(SAMPLE), "--out", str(tmp_path / "run"),
             "--no-progress", "--prompt-policy", "best", "--profile", str(link)])
    rc, out, peak = run_measured(args, tmp_path)
    assert rc == 1 and "not a regular file" in one_line(out)
    assert peak < PEAK_LIMIT_MB


def test_a_fifo_profile_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "profile.json"
    os.mkfifo(fifo)
    rc, out, _ = run_measured([*PROMPT, str(fifo)], tmp_path, timeout=60)
    assert rc == 1 and "not a regular file" in one_line(out)


def test_a_deeply_nested_profile_isone_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(nested_json(100_000))
    assert main([*PROMPT, str(deep)]) == 1
    assert "nested deeper than 1024 levels" in one_line(capsys.readouterr().err)


def _profile(tmp_path: Path, doc: str) -> Path:
    p = tmp_path / "p.json"
    p.write_text(doc)
    return p


@pytest.mark.parametrize(("doc", "message"), [
    ('{"probench_profile": true, "models": {"m": {"best": "cat"}}}', "not a probench profile"),
    ('{"probench_profile": 1.0, "models": {"m": {"best": "cat"}}}', "not a probench profile"),
    ('{"probench_profile": 1, "models": {"m": {"best": "cat", "map50": {"cat": NaN}}}}', "in \\[0, 1\\]"),
    ('{"probench_profile": 1, "models": {"m": {"best": "cat", "map50": {"orig": -Infinity}}}}',
     "in \\[0, 1\\]"),
    ('{"probench_profile": 1, "models": {"m": {"best": "cat", "map50": {"orig": "0.5"}}}}', "in \\[0, 1\\]"),
    ('{"probench_profile": 1, "models": {"m": {"best": "cat", "map50": [1]}}}', "must be an object"),
    ('{"probench_profile": 1, "source": {"x": 1}, "models": {"m": {"best": "cat"}}}', "must be a string"),
    ('[1, 2]', "not a probench profile"),
])
def test_wrong_values_and_types_in_a_profile_are_refused(tmp_path: Path, doc: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message) as exc:
        load_profile(_profile(tmp_path, doc))
    assert "\n" not in str(exc.value)


def test_probench_profile_never_writes_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"model": {"name": "m"}}))
    (run / "metrics.json").write_text('{"by_formulation": {"orig": {"map50": NaN}, "cat": {"map50": 0.3}, '
                                      '"tmpl": {"map50": 0.2}}}')
    out = tmp_path / "profile.json"
    assert main(["profile", str(run), "--out", str(out)]) == 1
    # refused on read, naming the file and the key (the typed records' reader)
    assert "metrics.json: by_formulation.orig.map50 is nan, not a finite number" in one_line(
        capsys.readouterr().err)
    assert not out.exists()
    (run / "metrics.json").write_text(json.dumps({"by_formulation": {"orig": {"map50": 0.1},
                                                                      "cat": {"map50": 0.3}}}))
    (run / "run.json").write_text(json.dumps({"model": ["not", "an", "object"]}))
    with pytest.raises(ProfileError, match=r"run\.json: model is \['not', 'an', 'object'\], input should be"):
        profile_from_runs([run])
    (run / "run.json").write_text(json.dumps({"model": {}}))
    with pytest.raises(ProfileError, match="needs a model name"):
        profile_from_runs([run])
    (run / "metrics.json").write_text(nested_json(5000))
    with pytest.raises(ProfileError, match="nested deeper"):
        profile_from_runs([run])


def test_profile_out_that_cannot_be_written_is_one_line(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`probench profile --out /proc/version` (and a folder) were internal errors."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"model": {"name": "m"}}))
    (run / "metrics.json").write_text(json.dumps({"by_formulation": {"orig": {"map50": 0.1},
                                                                      "cat": {"map50": 0.3}}}))
    # the writer rule (probench.cache.output): an existing file is replaced only with --overwrite,
    # and a path that cannot be created is a usage error named before any work
    assert main(["profile", str(run), "--out", "/proc/version"]) == 2
    assert "exists already" in one_line(capsys.readouterr().err)
    assert main(["profile", str(run), "--out", "/proc/version", "--overwrite"]) == 2
    assert "cannot be created" in one_line(capsys.readouterr().err)
    assert main(["profile", str(run), "--out", str(tmp_path)]) == 2
    assert "is a folder" in one_line(capsys.readouterr().err)
