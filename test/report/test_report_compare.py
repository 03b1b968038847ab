"""``probench compare RUN_A RUN_B`` on two runs of the bundled sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probench.cli import main
from probench.data.dataset import load_dataset
from probench.scoring.suite import score

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def test_compare_two_sample_runs(sample_run, tmp_path, capsys):
    a = sample_run("a", 0.4, seed=1)
    b = sample_run("b", 0.9, seed=1)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(a), str(b), "--bootstrap", "200", "--out", str(out), "--top", "0"]) == 0
    text = capsys.readouterr().out
    assert "orig.map50" in text and "95% interval of B - A" in text and "AP.5 per query (orig)" in text
    result = json.loads(out.read_text(encoding="utf-8"))
    ds = load_dataset(SAMPLE, check_files=False)
    point = {}
    for run in (a, b):
        preds = {f: json.loads((run / "predictions" / f"{f}.json").read_text())
                 for f in ("orig", "cat", "tmpl")}
        point[run.name] = score(ds, preds).to_json()
    m = result["metrics"]["orig.map50"]
    assert m["a"] == pytest.approx(point["a"]["map50"], abs=1e-9)
    assert m["b"] == pytest.approx(point["b"]["map50"], abs=1e-9)
    assert m["delta"] == pytest.approx(m["b"] - m["a"]) and m["delta"] > 0
    lo, hi = m["interval"]
    assert lo <= m["delta"] <= hi
    assert result["metrics"]["pcr50"]["a"] == pytest.approx(point["a"]["pcr50"], abs=1e-9)
    deltas = [q["delta"] for q in result["queries"]]
    assert len(deltas) == point["a"]["n_queries_with_gt"]
    assert [abs(d) for d in deltas] == sorted((abs(d) for d in deltas), reverse=True)
    assert {q["name"] for q in result["queries"]} <= {c.name for c in ds.queries.values()}


def test_a_run_compared_with_itself_changes_nothing(sample_run, tmp_path, capsys):
    a = sample_run("a", 0.6, seed=2)
    out = tmp_path / "same.json"
    assert main(["compare", str(a), str(a), "--bootstrap", "50", "--out", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    for key, m in result["metrics"].items():
        assert m["delta"] in (0.0, None) and m["significant"] in (False, None), key


def test_runs_of_different_datasets_are_refused(sample_run, tmp_path, capsys):
    a = sample_run("a", 0.6, seed=1)
    b = sample_run("b", 0.6, seed=1, dataset_hash="sha256:" + "0" * 64)
    rc = main(["compare", str(a), str(b), "--bootstrap", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "different datasets" in err and "\n" not in err
    assert main(["compare", str(a), str(tmp_path / "nope")]) == 2


def test_a_formulation_one_run_lacks_is_named_or_refused(sample_run, tmp_path, capsys):
    """B without cat.json: its metrics were dropped and the query table said "0 of 0
    queries"; now the missing formulation is named, and a --formulation B lacks is refused."""
    a = sample_run("a", 0.6, seed=1)
    b = sample_run("b", 0.7, seed=1)
    (b / "predictions" / "cat.json").unlink()
    out = tmp_path / "cmp.json"
    assert main(["compare", str(a), str(b), "--bootstrap", "0", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cat: not compared (no predictions in B)" in text and "0 of 0 queries" not in text
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["not_compared"] == {"cat": "no predictions in B"}
    assert "cat.map50" not in result["metrics"] and "orig.map50" in result["metrics"]
    assert result["queries"]
    rc = main(["compare", str(a), str(b), "--bootstrap", "0", "--formulation", "cat"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "has no complete predictions/cat.json" in err and "(orig, tmpl)" in err, err
    assert "\n" not in err


def test_compare_prints_the_absence_deltas(sample_run, tmp_path, capsys):
    """Presence, hallucination and cgF1 get paired deltas like every other metric (issue 37):
    their A and B are the point values ``probench score`` writes."""
    a = sample_run("a", 0.4, seed=3)
    b = sample_run("b", 0.9, seed=3)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(a), str(b), "--bootstrap", "50", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for key in ("orig.presence_tpr", "orig.hallucination_rate", "orig.presence_mcc", "orig.positive_f1",
                "orig.cgf1"):
        assert key in text, key
    metrics = json.loads(out.read_text(encoding="utf-8"))["metrics"]
    ds = load_dataset(SAMPLE, check_files=False)
    for run, side in ((a, "a"), (b, "b")):
        preds = {f: json.loads((run / "predictions" / f"{f}.json").read_text())
                 for f in ("orig", "cat", "tmpl")}
        absence = score(ds, preds).absence
        assert absence is not None
        for f in ("orig", "cat", "tmpl"):
            want = absence.by_formulation[f]
            for key in ("presence_tpr", "hallucination_rate", "presence_mcc", "cgf1"):
                got = metrics[f"{f}.{key}"][side]
                expected = getattr(want, key)
                assert got == (None if expected is None else pytest.approx(expected, abs=1e-9)), (f, key)
def test_compare_prints_miss_rates_and_weights_and_warns_when_they_make_the_difference(sample_run, capsys):
    """A ROS run that dropped 70% of its frames against an offline run, one with random
    weights: each run's miss rate and weights are printed, and both reasons are warned of."""
    a = sample_run("a", 0.9, seed=1)
    b = sample_run("b", 0.9, seed=2)
    info = json.loads((b / "run.json").read_text())
    info["source"] = "ros"
    info["model"]["random_weights"] = True
    (b / "run.json").write_text(json.dumps(info))
    realtime = {"frames_sent": 10, "frames_received": 3, "frames_missed": 7, "missed_share": 0.7}
    (b / "metrics.json").write_text(json.dumps({"realtime": realtime}))
    info = json.loads((a / "run.json").read_text())
    info["model"]["weights_source"] = "huggingface:google/owlv2-base-patch16"
    (a / "run.json").write_text(json.dumps(info))
    assert main(["compare", str(a), str(b), "--bootstrap", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    weights = "huggingface:google/owlv2-base-patch16"
    assert f"A: miss rate 0.0% (offline: every image answered); weights: {weights}" in lines
    assert "B: miss rate 70.0% of its frames dropped; weights: random weights" in lines
    warnings = [ln for ln in lines if ln.startswith("warning: ")]
    assert len(warnings) == 2 and "(A 0%, B 70%)" in warnings[0] and "B (" in warnings[1], warnings
    b2 = sample_run("c", 0.5, seed=3)  # offline too, weights unknown but not random: nothing to warn of
    assert main(["compare", str(a), str(b2), "--bootstrap", "0"]) == 0
    assert "warning:" not in capsys.readouterr().out
