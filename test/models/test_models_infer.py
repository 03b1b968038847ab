"""probench infer: cache format, the shared-prompt rule, resume, refusals, error paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.infer_dataset import Counting, make_dataset
from probench.cache.errors import RunMismatchError
from probench.cache.run import RunDir
from probench.cli import main
from probench.data.dataset import Dataset, load_dataset
from probench.models.errors import InferenceError
from probench.models.infer import run_inference
from probench.models.zoo import load_detector
from probench.vocabulary import unique_prompts

FORMS = ("orig", "cat", "tmpl")


@pytest.fixture
def ds_path(tmp_path: Path) -> Path:
    return make_dataset(tmp_path / "ds")


def _read_bytes(run: Path) -> dict[str, bytes]:
    return {f: (run / "predictions" / f"{f}.json").read_bytes() for f in FORMS}


def test_cache_matches_contract_and_coco_results(ds_path: Path, tmp_path: Path) -> None:
    ds = load_dataset(ds_path)
    det = Counting(load_detector("test-instant"))
    info = run_inference(det, ds, tmp_path / "run", FORMS, progress=False).to_json()
    run = RunDir(tmp_path / "run")
    assert run.formulations() == list(FORMS) and run.incomplete_formulations() == []
    assert not list((tmp_path / "run" / "predictions").glob("*.partial.jsonl"))
    # one detect call per image and formulation; identical prompt texts asked once
    assert det.calls == 3 * len(ds.images)
    assert det.prompts[0] == ["the red box on the left", "a valve you can turn"]
    for f in FORMS:
        results = run.predictions(f)  # validates keys, bbox shape, score range
        assert results, f
        for r in results:
            assert set(r) == {"image_id", "category_id", "bbox", "score"}
            assert r["category_id"] in ds.label_space(r["image_id"])
            assert r["bbox"][2] >= 0 and r["bbox"][3] >= 0
        # every (image, query) of the label space is answered by the scripted model
        pairs = {(r["image_id"], r["category_id"]) for r in results}
        assert pairs == {(i, q) for i in ds.images for q in ds.label_space(i)}
    orig = {(r["image_id"], r["category_id"]): r for r in run.predictions("orig")}
    cat = {(r["image_id"], r["category_id"]): r for r in run.predictions("cat")}
    # queries 1 and 2 share their orig text: the same box credited to each ...
    assert (orig[(10, 1)]["bbox"], orig[(10, 1)]["score"]) == (orig[(10, 2)]["bbox"], orig[(10, 2)]["score"])
    # ... but not their cat text ("box" vs "crate")
    assert cat[(10, 1)]["bbox"] != cat[(10, 2)]["bbox"]
    # run.json as DESIGN.md says
    saved = json.loads((tmp_path / "run" / "run.json").read_text())
    assert saved == info
    assert saved["status"] == "complete" and saved["source"] == "offline"
    assert saved["model"]["name"] == "test-instant" and saved["model"]["backend"] == "scripted"
    assert saved["dataset"]["hash"] == ds.content_hash and saved["dataset"]["n_images"] == 6
    assert saved["formulations"] == list(FORMS) and saved["settings"]["score_threshold"] == 0.0
    assert {"python", "probench", "numpy"} <= set(saved["versions"])
    assert saved["timings"]["infer_s"] >= 0 and set(saved["timings"]["by_formulation_s"]) == set(FORMS)
    # pycocotools accepts the files as COCO results against the dataset's annotations
    from pycocotools.coco import COCO

    gt = COCO()
    gt.dataset = json.loads((ds_path / "annotations.json").read_text())
    gt.createIndex()
    res = gt.loadRes(str(tmp_path / "run" / "predictions" / "orig.json"))
    assert len(res.anns) == len(orig)


def test_unique_prompts_groups_identical_texts() -> None:
    texts, groups = unique_prompts([1, 2, 3, 4], ["a", "b ", "a", "b"])
    assert texts == ["a", "b"] and groups == [[1, 3], [2, 4]]


def test_empty_label_space_predicts_nothing(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", n_images=2)
    coco = json.loads((root / "annotations.json").read_text())
    coco["annotations"] = [a for a in coco["annotations"] if a["image_id"] != 10]  # image 10: no GT
    ds = Dataset.from_dict(coco, root=root)
    det = Counting(load_detector("test-instant"))
    run_inference(det, ds, tmp_path / "run", ["orig"], progress=False)
    results = RunDir(tmp_path / "run").predictions("orig")
    assert {r["image_id"] for r in results} == {11}
    assert det.calls == 1


def test_limit_and_threshold(ds_path: Path, tmp_path: Path) -> None:
    rc = main(["infer", "--model", "test-instant", "--dataset", str(ds_path), "--out", str(tmp_path / "r"),
               "--formulations", "cat,orig", "--limit", "2", "--score-threshold", "0.6", "--no-progress"])
    assert rc == 0
    run = RunDir(tmp_path / "r")
    assert run.formulations() == ["orig", "cat"]
    results = run.predictions("orig")
    assert {r["image_id"] for r in results} <= {10, 11}
    assert results and all(r["score"] >= 0.6 for r in results)
    settings = run.info.to_json()["settings"]
    assert settings["limit"] == 2 and settings["score_threshold"] == 0.6


def test_complete_run_rerun_does_nothing(ds_path: Path, tmp_path: Path) -> None:
    ds = load_dataset(ds_path)
    run_inference(load_detector("test-instant"), ds, tmp_path / "run", FORMS, progress=False)
    before = _read_bytes(tmp_path / "run")
    det = Counting(load_detector("test-instant"))
    info = run_inference(det, ds, tmp_path / "run", FORMS, progress=False).to_json()
    assert det.calls == 0 and info["resumed"] == 1 and info["status"] == "complete"
    assert _read_bytes(tmp_path / "run") == before


def test_in_process_interrupt_then_resume_is_identical(ds_path: Path, tmp_path: Path) -> None:
    ds = load_dataset(ds_path)
    run_inference(load_detector("test-instant"), ds, tmp_path / "ref", FORMS, progress=False)
    det = Counting(load_detector("test-instant"), fail_after=8, exc=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_inference(det, ds, tmp_path / "run", FORMS, progress=False)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "interrupted"
    assert RunDir(tmp_path / "run").formulations() == ["orig"]
    det2 = Counting(load_detector("test-instant"))
    run_inference(det2, ds, tmp_path / "run", FORMS, progress=False)
    assert det2.calls == 3 * 6 - 8  # only what was missing
    assert _read_bytes(tmp_path / "run") == _read_bytes(tmp_path / "ref")


def test_resume_after_sigkill_is_byte_identical(ds_path: Path, tmp_path: Path) -> None:
    model = "test-slow-60ms"  # 18 frames x 60 ms: long enough to kill mid-run
    args = ["infer", "--model", model, "--dataset", str(ds_path), "--no-progress"]
    run = tmp_path / "killed"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "probench", *args, "--out", str(run)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log = run / "predictions" / "orig.partial.jsonl"
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and log.read_bytes().count(b"\n") >= 2:
                break
            time.sleep(0.005)
        assert proc.poll() is None, f"finished before it could be killed: {proc.stderr.read()!r}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "running"  # killed: nothing could update it
    assert len(RunDir(run).formulations()) < len(FORMS), "the kill must land before the end"
    assert main([*args, "--out", str(run)]) == 0
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    assert _read_bytes(run) == _read_bytes(tmp_path / "whole")
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_mismatched_resume_refused_unless_overwrite(ds_path: Path, tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "run")
    base = ["infer", "--dataset", str(ds_path), "--out", out, "--no-progress", "--formulations", "orig"]
    assert main([*base, "--model", "test-instant"]) == 0
    capsys.readouterr()
    assert main([*base, "--model", "test-slow-1ms"]) == 1
    err = capsys.readouterr().err
    assert "model.name" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert main([*base, "--model", "test-instant", "--score-threshold", "0.5"]) == 1
    assert "settings" in capsys.readouterr().err
    assert main([*base, "--model", "test-instant", "--precision", "fp16"]) == 1
    other = make_dataset(tmp_path / "ds2", n_images=3)
    assert main([*base[:2], str(other), *base[3:], "--model", "test-instant"]) == 1
    assert "dataset.hash" in capsys.readouterr().err
    assert main([*base, "--model", "test-slow-1ms", "--overwrite"]) == 0
    assert RunDir(out).info.to_json()["model"]["name"] == "test-slow-1ms"
    with pytest.raises(RunMismatchError):
        run_inference(load_detector("test-instant"), load_dataset(ds_path), out, ["orig"], progress=False)


def test_predictions_without_run_json_refused(ds_path: Path, tmp_path: Path) -> None:
    (tmp_path / "run" / "predictions").mkdir(parents=True)
    (tmp_path / "run" / "predictions" / "orig.json").write_text("[]")
    with pytest.raises(RunMismatchError):
        run_inference(load_detector("test-instant"), load_dataset(ds_path), tmp_path / "run", progress=False)


def test_undecodable_image_stops_the_run(tmp_path: Path, capsys) -> None:
    ds = make_dataset(tmp_path / "ds", broken=2)
    out = tmp_path / "run"
    rc = main(["infer", "--model", "test-instant", "--dataset", str(ds), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "im02.png" in err and "Traceback" not in err
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    assert RunDir(out).formulations() == []


def test_detector_failure_is_wrapped_with_context(ds_path: Path, tmp_path: Path) -> None:
    det = Counting(load_detector("test-instant"), fail_after=1, exc=RuntimeError("CUDA out of memory"))
    with pytest.raises(InferenceError, match=r"image 11 .*im01\.png.*CUDA out of memory"):
        run_inference(det, load_dataset(ds_path), tmp_path / "run", ["orig"], progress=False)


@pytest.mark.parametrize(
    "extra, code, needle",
    [
        (["--model", "no-such-model"], 2, "no-such-model"),
        (["--model", "test-instant", "--formulations", "orig,bogus"], 2, "bogus"),
        (["--model", "test-instant", "--score-threshold", "1.5"], 2, "score-threshold"),
        (["--model", "test-instant", "--limit", "0"], 2, "limit"),
        (["--model", "tiny-owlv2", "--random-weights"], 2, "tiny"),
    ],
)
def test_cli_usage_errors(ds_path: Path, tmp_path: Path, capsys, extra, code, needle) -> None:
    rc = main(["infer", "--dataset", str(ds_path), "--out", str(tmp_path / "r"), "--no-progress", *extra])
    err = capsys.readouterr().err
    assert rc == code and needle in err and "Traceback" not in err


def test_cli_missing_dataset(tmp_path: Path, capsys) -> None:
    rc = main(["infer", "--model", "test-instant", "--dataset", str(tmp_path / "nope"),
               "--out", str(tmp_path / "r")])
    assert rc == 2 and "nope" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    rc = main(["infer", "--model", "test-instant", "--dataset", str(tmp_path / "empty"),
               "--out", str(tmp_path / "r")])
    assert rc == 1 and "annotations.json" in capsys.readouterr().err


def test_prefetch_gives_the_same_bytes(ds_path: Path, tmp_path: Path) -> None:
    ds = load_dataset(ds_path)
    run_inference(load_detector("test-instant"), ds, tmp_path / "a", FORMS, progress=False, prefetch=True)
    run_inference(load_detector("test-instant"), ds, tmp_path / "b", FORMS, progress=False, prefetch=False)
    assert _read_bytes(tmp_path / "a") == _read_bytes(tmp_path / "b")


def test_fixing_a_broken_image_then_resuming(tmp_path: Path) -> None:
    import cv2
    import numpy as np

    ds_path = make_dataset(tmp_path / "ds", broken=3)
    args = ["infer", "--model", "test-instant", "--dataset", str(ds_path), "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 1
    log = tmp_path / "run" / "predictions" / "orig.partial.jsonl"
    assert [json.loads(line)["image_id"] for line in log.read_text().splitlines()] == [10, 11, 12]
    cv2.imwrite(str(ds_path / "images" / "im03.png"), np.zeros((32, 56, 3), np.uint8))
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    assert main([*args, "--out", str(tmp_path / "clean")]) == 0
    assert _read_bytes(tmp_path / "run") == _read_bytes(tmp_path / "clean")


def test_status_incomplete_when_an_earlier_session_asked_for_more(ds_path: Path, tmp_path: Path) -> None:
    ds = load_dataset(ds_path)
    det = Counting(load_detector("test-instant"), fail_after=2, exc=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_inference(det, ds, tmp_path / "run", FORMS, progress=False)
    info = run_inference(load_detector("test-instant"), ds, tmp_path / "run", ["cat"],
                         progress=False).to_json()
    assert info["status"] == "incomplete" and info["incomplete_formulations"] == ["orig", "tmpl"]
    info = run_inference(load_detector("test-instant"), ds, tmp_path / "run", ["orig", "tmpl"],
                         progress=False).to_json()
    assert info["status"] == "complete" and "incomplete_formulations" not in info


def test_infer_refuses_a_folder_timed_with_another_model(ds_path: Path, tmp_path: Path) -> None:
    from probench.models.latency import run_latency

    run_latency(load_detector("test-instant"), load_dataset(ds_path), tmp_path / "run", n_images=1, runs=1,
                progress=False)
    with pytest.raises(RunMismatchError, match=r"latency\.json"):
        run_inference(load_detector("test-slow-1ms"), load_dataset(ds_path), tmp_path / "run", progress=False)
    run_inference(load_detector("test-instant"), load_dataset(ds_path), tmp_path / "run", progress=False)
