"""Prompt policies, formulation profiles and the ensemble's fusion."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from probench.detections import Detections
from probench.errors import ProbenchError
from probench.prompting.policy import POLICIES, PolicyError, resolve_policy
from probench.prompting.profile import ProfileError, default_profile, load_profile, profile_from_runs


class _Echo:
    """A detector that finds one box per prompt text, scored by the text's position."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def detect(self, image: np.ndarray, prompts: list[str] | None = None) -> Detections:
        texts = list(prompts or [])
        self.calls.append(texts)
        n = len(texts)
        boxes = np.array([[10.0 + i, 10.0, 50.0 + i, 50.0] for i in range(n)]).reshape(-1, 4)
        return Detections(boxes, np.linspace(0.9, 0.5, n) if n else np.zeros(0), np.arange(n))


PROMPTS = ["the red fire extinguisher mounted next to the door", "a chair without armrests => seat"]


@pytest.mark.parametrize(("name", "gives"), [
    ("as_typed", ["the red fire extinguisher mounted next to the door", "a chair without armrests"]),
    ("categorical", ["fire extinguisher", "seat"]),
    ("template", ["a photo of the red fire extinguisher mounted next to the door",
                  "a photo of a chair without armrests"]),
])
def test_single_form_policies(name: str, gives: list[str]) -> None:
    policy = resolve_policy(name)
    plan = policy.plan(PROMPTS)
    assert list(plan.model_texts) == gives
    assert plan.operator == ("the red fire extinguisher mounted next to the door", "a chair without armrests")
    det = _Echo()
    out = plan.detect(det, np.zeros((64, 64, 3), np.uint8))
    assert det.calls == [gives]
    assert out.prompt_index.tolist() == [0, 1]  # class ids are the operator's prompts
    assert policy.plan(PROMPTS) is plan  # cached per prompt set


def test_shared_model_text_answers_each_operator_prompt() -> None:
    plan = resolve_policy("categorical").plan(["a red chair", "a blue chair", "a lamp"])
    assert plan.model_texts == ("chair", "lamp")
    out = plan.detect(_Echo(), np.zeros((8, 8, 3), np.uint8))
    assert sorted(out.prompt_index.tolist()) == [0, 1, 2]
    assert plan.given() == {"a red chair": "chair", "a blue chair": "chair", "a lamp": "lamp"}


def test_ensemble_is_one_call_fused_per_operator_prompt() -> None:
    plan = resolve_policy("ensemble").plan(["a chair without armrests"])
    assert plan.model_texts == ("a chair without armrests", "chair", "a photo of a chair without armrests")
    det = _Echo()
    out = plan.detect(det, np.zeros((64, 64, 3), np.uint8))
    assert len(det.calls) == 1
    # three boxes shifted by 1 px overlap (IoU > 0.5): NMS keeps the best-scoring one
    assert len(out) == 1 and out.prompt_index.tolist() == [0] and out.scores[0] == pytest.approx(0.9)


def test_fallback_is_counted_and_never_empty() -> None:
    plan = resolve_policy("categorical").plan(["something to sit on", "a cup"])
    assert plan.fallbacks == 1 and plan.model_texts == ("something to sit on", "cup")


def test_best_uses_the_profile() -> None:
    assert resolve_policy("best", model="owlv2-b", paper_name="OWLv2-B").forms == ("tmpl",)
    assert resolve_policy("best", model="sam3", paper_name="SAM3").forms == ("cat",)
    assert resolve_policy("best", model="yoloe-x", paper_name="YOLOE-X").forms == ("orig",)
    p = resolve_policy("best", model="test-instant", paper_name="test-instant")
    assert p.forms == ("orig",) and "no entry" in p.warning


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="unknown prompt policy"):
        resolve_policy("smart")
    bad = tmp_path / "p.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError):
        resolve_policy("best", model="x", profile=str(bad))
    bad.write_text(json.dumps({"probench_profile": 1, "models": {"m": {"best": "median"}}}))
    with pytest.raises(ProfileError, match="best must be one of"):
        load_profile(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"probench_profile": 1, "models": {"m": {"best": "cat"}}}))
    assert resolve_policy("best", model="m", profile=str(good)).forms == ("cat",)
    with pytest.raises(PolicyError, match="no entry for model 'other'"):
        resolve_policy("best", model="other", profile=str(good))
    for err in (PolicyError("x"), ProfileError("x")):
        assert isinstance(err, ProbenchError)


def test_default_profile_is_table_ii() -> None:
    prof = default_profile()
    assert len(prof.best) == 16
    assert sum(k == "cat" for k in prof.best.values()) == 10
    assert sum(k == "tmpl" for k in prof.best.values()) == 5
    assert [m for m, k in prof.best.items() if k == "orig"] == ["YOLOE-X"]


def test_profile_from_runs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"model": {"name": "tiny-owlv2"}}))
    (run / "metrics.json").write_text(json.dumps({"by_formulation": {
        "orig": {"map50": 0.1}, "cat": {"map50": 0.3}, "tmpl": {"map50": 0.2}, "policy": {"map50": 0.9}}}))
    prof = profile_from_runs([run])
    assert prof.best == {"tiny-owlv2": "cat"}
    out = tmp_path / "profile.json"
    out.write_text(json.dumps(prof.as_json()))
    assert load_profile(out).best == {"tiny-owlv2": "cat"}
    with pytest.raises(ProfileError, match=r"no metrics\.json"):
        (run / "metrics.json").unlink()
        profile_from_runs([run])


def test_policy_names() -> None:
    assert POLICIES == ("as_typed", "categorical", "template", "best", "ensemble")


def test_ground_with_a_policy_publishes_the_operators_prompts(tmp_path: Path, capsys) -> None:
    """`probench ground --prompt-policy categorical`: the model gets the categorical forms,
    the class ids and the LabelInfo stay what the operator typed (explicit forms too)."""
    from helpers.camera_bags import read_output, write_camera_bag
    from probench.cli import main
    from probench.models.testing import ScriptedDetector

    bag = write_camera_bag(tmp_path / "bag", n=2)
    typed = "the red cup on the table; a valve you can turn => valve"
    assert main(["ground", "--no-progress", "--bag", str(bag), "--model", "test-instant", "--out",
                 str(tmp_path / "o"), "--score-threshold", "0", "--prompt", typed,
                 "--prompt-policy", "categorical"]) == 0
    res = read_output(tmp_path / "o")
    assert [sorted(f) for f in res.class_ids()] == [["a valve you can turn", "the red cup on the table"]] * 2
    labels = res.topics["/ground/label_info"]
    names = [vc.class_name for vc in labels[0][1].class_map]
    assert names == ["the red cup on the table", "a valve you can turn"]
    # the boxes are those the scripted model gives the categorical forms
    _, first = res.topics["/ground/detections"][0]
    got = sorted(round(d.results[0].hypothesis.score, 5) for d in first.detections)
    want = ScriptedDetector().detect(np.zeros((48, 64, 3), np.uint8), ["cup", "valve"]).scores  # by text
    assert got == sorted(round(float(s), 5) for s in want)
    with pytest.raises(SystemExit) as exc:
        main(["ground", "--no-progress", "--bag", str(bag), "--model", "test-instant", "--out",
              str(tmp_path / "o2"), "--prompt", "a cup", "--prompt-policy", "smart"])
    assert exc.value.code == 2 and "invalid choice: 'smart'" in capsys.readouterr().err


@pytest.mark.parametrize(("model", "row", "form"), [
    ("sam3", "SAM3", "cat"), ("owlv2-b", "OWLv2-B", "tmpl"), ("owlv2-l", "OWLv2-L", "tmpl"),
    ("yoloe-x", "YOLOE-X", "orig"), ("grounding-dino-t", "G-DINO-T", "tmpl"),
])
def test_best_resolves_zoo_names_as_infer_and_the_node_do(model: str, row: str, form: str) -> None:
    """Without a Table II row given, a zoo name is looked up in the zoo (the same rule for
    `probench prompt`, infer and the node), and the policy says which row it used."""
    from probench.models.zoo import model_record
    from probench.prompting.profile import default_profile

    assert str(model_record(model)["paper_name"]) == row and default_profile().best[row] == form
    p = resolve_policy("best", model=model)
    assert p.forms == (form,) and p.row == row and not p.warning


def test_prompt_command_best_names_the_profile_row(capsys) -> None:
    from probench.cli import main

    assert main(["prompt", "--policy", "best", "--model", "sam3", "a red cup on the table"]) == 0
    out, err = capsys.readouterr()
    assert "no entry" not in err and "row 'SAM3' gives cat" in err, err
    assert "best (cat) gives: cup" in out, out


def test_ground_publishes_the_operators_part_of_an_explicit_form(tmp_path: Path) -> None:
    """`probench ground` with no --prompt-policy: the class ids in the bag, the JSONL and the
    acknowledgement are the operator's part of `ORIG => CAT`, as the node publishes them."""
    import json

    from helpers.camera_bags import read_output, write_camera_bag
    from probench.cli import main

    bag = write_camera_bag(tmp_path / "bag", n=2)
    jsonl = tmp_path / "g.jsonl"
    assert main(["ground", "--no-progress", "--bag", str(bag), "--model", "test-instant", "--out",
                 str(tmp_path / "o"), "--score-threshold", "0", "--jsonl", str(jsonl),
                 "--prompt", "the white coffee cup on the saucer => cup"]) == 0
    res = read_output(tmp_path / "o")
    assert res.class_ids() == [["the white coffee cup on the saucer"]] * 2
    labels = res.topics["/ground/label_info"]
    assert [vc.class_name for vc in labels[0][1].class_map] == ["the white coffee cup on the saucer"]
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert all(r["prompts"] == ["the white coffee cup on the saucer"] for r in records)
    assert {d["class_id"] for r in records for d in r["detections"]} == {"the white coffee cup on the saucer"}
