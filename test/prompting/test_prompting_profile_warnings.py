"""``probench profile`` says when a k* means nothing: a run of a model with random weights
(tiny-*, --random-weights) or of a scripted test detector, and formulations that tie (the
usual case of random-weight runs: all at 0.0), where "best orig" is the tie rule's."""

from __future__ import annotations

import json
from pathlib import Path

from probench.cli import main
from probench.prompting.profile import profile_from_runs


def _run(folder: Path, model: dict, map50: dict[str, float]) -> Path:
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"model": model}))
    by = {f: {"map50": v} for f, v in map50.items()}
    (folder / "metrics.json").write_text(json.dumps({"by_formulation": by}))
    return folder


def test_random_weights_and_ties_are_warned(tmp_path: Path, capsys) -> None:
    tiny = _run(tmp_path / "tiny", {"name": "tiny-owlv2", "random_weights": True, "weights_source": "random"},
                {"orig": 0.0, "cat": 0.0, "tmpl": 0.0})
    real = _run(tmp_path / "real", {"name": "owlv2-b", "random_weights": False, "weights_source": "hf-cache"},
                {"orig": 0.40, "cat": 0.45, "tmpl": 0.42})
    scripted = _run(tmp_path / "scripted", {"name": "test-instant", "random_weights": False,
                                            "weights_source": "scripted"}, {"orig": 0.2, "cat": 0.1})
    tie = _run(tmp_path / "tie", {"name": "owlv2-l", "random_weights": False, "weights_source": "hf-cache"},
               {"orig": 0.5, "cat": 0.5, "tmpl": 0.3})
    prof = profile_from_runs([tiny, real, scripted, tie])
    assert prof.best == {"tiny-owlv2": "orig", "owlv2-b": "cat", "test-instant": "orig", "owlv2-l": "orig"}
    meaningless = ("its mAP.5, and so its best formulation, mean nothing (profile a run with the model's "
                   "real weights)")
    by_rule = "so its best is orig by the tie rule, not by a measured difference"
    assert prof.warnings == (
        f"{tiny}: tiny-owlv2 has random weights: {meaningless}",
        f"{tiny}: tiny-owlv2: orig, cat, tmpl tie at mAP.5 0.000, {by_rule}",
        f"{scripted}: test-instant has a scripted test detector: {meaningless}",
        f"{tie}: owlv2-l: orig, cat tie at mAP.5 0.500, {by_rule}",
    )
    assert main(["profile", str(tiny), str(real), "--out", str(tmp_path / "p.json")]) == 0
    out, err = capsys.readouterr()
    assert "tiny-owlv2: best orig" in out and "owlv2-b: best cat" in out
    lines = err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("probench profile: warning: ") for line in lines)
    assert "random weights" in lines[0] and "tie at mAP.5 0.000" in lines[1]


def test_a_real_run_with_a_clear_best_is_not_warned(tmp_path: Path, capsys) -> None:
    real = _run(tmp_path / "real", {"name": "owlv2-b", "random_weights": False, "weights_source": "hf-cache"},
                {"orig": 0.40, "cat": 0.45, "tmpl": 0.42})
    assert profile_from_runs([real]).warnings == ()
    assert main(["profile", str(real), "--out", str(tmp_path / "p.json")]) == 0
    assert capsys.readouterr().err == ""
