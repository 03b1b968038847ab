"""`probench infer --prompt-policy P`: the fourth formulation `policy` end to end with a
scripted model (one deterministic box per prompt text), scored and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probench.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def _infer(out: Path, *extra: str) -> int:
    return main(["infer", "--model", "test-instant", "--dataset", str(SAMPLE), "--out", str(out),
                 "--no-progress", *extra])


def _score(run: Path) -> dict:
    assert main(["score", "--dataset", str(SAMPLE), "--run", str(run)]) == 0
    return json.loads((run / "metrics.json").read_text())


@pytest.mark.parametrize(("policy", "same_as"), [("template", "tmpl"), ("as_typed", "orig")])
def test_policy_formulation_equals_its_paper_formulation(tmp_path: Path, policy: str, same_as: str) -> None:
    run = tmp_path / policy
    assert _infer(run, "--prompt-policy", policy) == 0
    info = json.loads((run / "run.json").read_text())
    assert info["formulations"] == ["orig", "cat", "tmpl", "policy"]
    assert info["settings"]["prompt_policy"]["name"] == policy
    preds = run / "predictions"
    assert (preds / "policy.json").read_bytes() == (preds / f"{same_as}.json").read_bytes()
    m = _score(run)
    assert m["by_formulation"]["policy"]["map50"] == m["by_formulation"][same_as]["map50"]
    assert m["m_policy"] == m[f"m_{same_as}"]
    assert m["delta_policy_orig"] == pytest.approx(m["m_policy"] - m["m_orig"])
    assert "policy" not in (m["best_formulation_ties"] or []) and m["best_formulation"] != "policy"


def test_categorical_policy_and_report_column(tmp_path: Path) -> None:
    run = tmp_path / "cat"
    assert _infer(run, "--prompt-policy", "categorical", "--formulations", "orig") == 0
    assert json.loads((run / "run.json").read_text())["formulations"] == ["orig", "policy"]
    m = _score(run)
    assert m["m_policy"] is not None
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    table = next((tmp_path / "report").glob("*.md")).read_text()
    assert "m_policy" in table and "prompt policy categorical" in table


def test_policy_is_part_of_the_run_identity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert _infer(run, "--prompt-policy", "template", "--formulations", "orig") == 0
    assert _infer(run, "--prompt-policy", "categorical", "--formulations", "orig") == 1
    assert "prompt_policy" in capsys.readouterr().err


def test_bad_policy_flags_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _infer(tmp_path / "a", "--prompt-policy", "smart")
    assert exc.value.code == 2
    assert _infer(tmp_path / "b", "--prompt-policy", "best", "--profile", str(tmp_path / "none.json")) == 1
    assert _infer(tmp_path / "c", "--profile", "paper") == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "--profile needs --prompt-policy" in err
    assert not (tmp_path / "b").exists()


def test_sweep_with_a_policy(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    assert main(["sweep", "--models", "test-instant", "--dataset", str(SAMPLE), "--out", str(out),
                 "--no-latency", "--reference", "none", "--no-progress", "--prompt-policy", "template"]) == 0
    m = json.loads((out / "runs" / "test-instant" / "metrics.json").read_text())
    assert m["m_policy"] == m["m_tmpl"] and m["by_formulation"]["policy"] == m["by_formulation"]["tmpl"]
    assert main(["sweep", "--models", "test-instant", "--dataset", str(SAMPLE), "--out", str(out),
                 "--no-latency", "--reference", "none", "--no-progress", "--prompt-policy", "best",
                 "--profile", str(tmp_path / "none.json")]) == 1
