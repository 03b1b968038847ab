"""``probench sweep`` in one process (no Ray): two tiny models on the sample dataset leave
a report with both rows and the paper's; a rerun skips every complete step (and starts
nothing); a step whose output went missing is redone alone; bad arguments exit 2 first.
(The sweep on Ray is in test_scale_ray_infer.py, which has the module's Ray cluster.)"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from helpers.cli_exit import exit_code
from probench.cli import main

pytestmark = pytest.mark.slow
SAMPLE = "datasets/probench-sample"
MODELS = ("tiny-owlv2", "tiny-owlvit")


def _sweep(repo_root: Path, out: Path, *extra: str) -> list[str]:
    return ["sweep", "--models", ",".join(MODELS), "--dataset", str(repo_root / SAMPLE), "--out", str(out),
            "--limit", "3", "--latency-images", "2", "--warmup", "1", "--runs", "2", "--no-progress", *extra]


def _statuses(out: Path) -> dict[tuple[str, str], str]:
    steps = json.loads((out / "sweep.json").read_text())["steps"]
    return {(s["model"], s["step"]): s["status"] for s in steps}


def test_sweep_two_tiny_models_report_then_resume(repo_root: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "sweep"
    assert main(_sweep(repo_root, out)) == 0
    printed, err = capsys.readouterr()
    assert "7 step(s) ran, 0 skipped" in printed and "report:" in printed
    assert err == ""  # --no-progress is silent: no bar, the report's run loading included
    assert set(_statuses(out).values()) == {"ran"} and len(_statuses(out)) == 7
    rows = [r["model"] for r in csv.DictReader((out / "report" / "table2.csv").open(encoding="utf-8"))]
    assert "OWLv2-B tiny (random weights)" in rows and "OWL-ViT tiny (random weights)" in rows
    assert sum(r.endswith("(paper)") for r in rows) == 16  # the paper's Table II, every row
    doc = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert "## How latency was measured" in doc
    assert "in the sweep's process after this model's inference had finished" in doc
    for model in MODELS:
        run = out / "runs" / model
        info = json.loads((run / "run.json").read_text())
        assert info["status"] == "complete" and info["formulations"] == ["orig", "cat", "tmpl"]
        latency = json.loads((run / "latency.json").read_text())
        assert latency["protocol"]["n_samples"] == 4 and latency["isolation"]["how"]
        assert json.loads((run / "metrics.json").read_text())["latency_ms"]["mean"] > 0
    summary = (out / "sweep.md").read_text(encoding="utf-8")
    assert "| tiny-owlv2 | infer | ran |" in summary and "this process" in summary

    # everything complete: nothing runs again, and the summary keeps where each step ran
    assert main(_sweep(repo_root, out)) == 0
    assert set(_statuses(out).values()) == {"skipped"}
    steps = json.loads((out / "sweep.json").read_text())["steps"]
    assert all(s["earlier_s"] is not None and s["where"] for s in steps)

    # one output gone: only what depends on it is redone
    (out / "runs" / MODELS[1] / "metrics.json").unlink()
    assert main(_sweep(repo_root, out)) == 0
    ran = {k for k, v in _statuses(out).items() if v == "ran"}
    assert ran == {(MODELS[1], "score"), ("(all)", "report")}


@pytest.mark.parametrize(("extra", "message"), [
    (["--models", "no-such-model"], "unknown model 'no-such-model'"),
    (["--models", " , "], "at least one model"),
    (["--latency-images", "0"], "argument --latency-images: must be 1..1000000000, got 0"),
    (["--workers", "2"], "--workers only apply with --ray"),
    (["--ray", "--device", "cuda:1"], "--device cuda:1: a sweep runs on cpu or cuda"),
    (["--formulations", "orig,nope"], "nope"),
    (["--reference", "missing.csv"], "missing.csv"),
    (["--weights", "tiny-owlv2"], "expected MODEL=PATH"),
    (["--weights", "owlv2-b=datasets"], "owlv2-b is not one of --models"),
    (["--weights", "tiny-owlv2=/no/such/weights"], "no such file or folder /no/such/weights"),
    (["--weights", "tiny-owlv2=datasets", "--weights", "tiny-owlv2=bags"], "tiny-owlv2 given twice"),
    (["--ray", "127.0.0.1:1", "--ray-timeout", "90"], "--ray-timeout must lie in (0, 60]"),
])  # fmt: skip
def test_bad_arguments_exit_2_before_anything_runs(repo_root, tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "sweep"
    args = _sweep(repo_root, out)
    if extra[0] == "--models":
        args[args.index("--models") + 1] = extra[1]
        extra = extra[2:]
    assert exit_code([*args, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not out.exists()
