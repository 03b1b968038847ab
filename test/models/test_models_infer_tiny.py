"""probench infer and latency with the real adapter path: tiny-owlv2 (random, deterministic).

One subprocess run is the reference; an in-process run interrupted after a few images and
resumed with a fresh detector must end with the same bytes (determinism across processes
and resume together).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.infer_dataset import Counting, make_dataset
from probench.cache.run import RunDir
from probench.data.dataset import load_dataset
from probench.models.infer import run_inference
from probench.models.latency import run_latency
from probench.models.zoo import load_detector

pytestmark = pytest.mark.slow
FORMS = ("orig", "cat")


@pytest.fixture(scope="module")
def tiny():
    return load_detector("tiny-owlv2")


def test_tiny_owlv2_resume_matches_a_fresh_process(tiny, tmp_path: Path) -> None:
    ds_path = make_dataset(tmp_path / "ds", n_images=4)
    ref = tmp_path / "ref"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run(
        [sys.executable, "-m", "probench", "infer", "--model", "tiny-owlv2", "--dataset", str(ds_path),
         "--out", str(ref), "--formulations", ",".join(FORMS), "--no-progress"],
        check=True, env=env, capture_output=True, timeout=120,
    )
    ds = load_dataset(ds_path)
    with pytest.raises(KeyboardInterrupt):
        run_inference(Counting(tiny, fail_after=5, exc=KeyboardInterrupt()), ds, tmp_path / "run", FORMS,
                      progress=False)
    assert RunDir(tmp_path / "run").formulations() == ["orig"]
    run_inference(load_detector("tiny-owlv2"), ds, tmp_path / "run", FORMS, progress=False)
    for f in FORMS:
        got = (tmp_path / "run" / "predictions" / f"{f}.json").read_bytes()
        assert got == (ref / "predictions" / f"{f}.json").read_bytes(), f
    results = RunDir(ref).predictions("orig")
    assert results and all(r["category_id"] in ds.label_space(r["image_id"]) for r in results)
    info = json.loads((ref / "run.json").read_text())
    assert info["model"]["name"] == "tiny-owlv2" and info["model"]["backend"] == "transformers"
    assert info["model"]["random_weights"] is True and "transformers" in info["versions"]


def test_tiny_owlv2_latency_has_model_stages(tiny, tmp_path: Path) -> None:
    ds = load_dataset(make_dataset(tmp_path / "ds", n_images=2))
    result = run_latency(tiny, ds, tmp_path / "run", n_images=2, warmup=1, runs=2, progress=False).to_json()
    assert len(result["samples_ms"]) == 4
    stages = result["stages_ms"]
    assert stages["forward"]["mean"] > 0 and stages["preprocess"]["mean"] > 0
    # the stages the model reports are part of each end-to-end sample
    parts = sum(stages[k]["mean"] for k in ("text", "preprocess", "forward", "postprocess"))
    assert parts <= result["summary_ms"]["mean"] * 1.05


def test_runtime_flag_is_recorded_and_a_resume_cannot_mix_runtimes(tmp_path: Path) -> None:
    from probench.cli import main

    ds_path = make_dataset(tmp_path / "ds", n_images=2)
    out = tmp_path / "run"
    common = ["--model", "tiny-owlv2", "--dataset", str(ds_path), "--out", str(out), "--no-progress"]
    assert main(["infer", *common, "--formulations", "orig", "--runtime", "onnxruntime"]) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["model"]["runtime"] == "onnxruntime"
    ort = RunDir(out).predictions("orig")
    # same folder, other runtime: refused (exit 1) instead of mixing predictions
    assert main(["infer", *common, "--formulations", "orig,cat", "--runtime", "torch"]) == 1
    ref = tmp_path / "ref"
    assert main(["infer", *[a if a != str(out) else str(ref) for a in common], "--formulations", "orig"]) == 0
    torch_results = RunDir(ref).predictions("orig")
    assert len(ort) == len(torch_results)
    # ONNX Runtime parity through the CLI; compared per (image, query) as multisets, since
    # near-tied scores may legitimately swap order between the two runtimes
    def groups(results: list[dict]) -> dict:
        out: dict = {}
        for r in results:
            out.setdefault((r["image_id"], r["category_id"]), []).append(r)
        return out

    got, want = groups(ort), groups(torch_results)
    assert got.keys() == want.keys()
    for key, rs in got.items():
        want_scores = sorted(r["score"] for r in want[key])
        assert sorted(r["score"] for r in rs) == pytest.approx(want_scores, abs=1e-4)
        for r in rs:
            assert any(
                max(abs(x - y) for x, y in zip(r["bbox"], w["bbox"], strict=True)) < 1e-2 for w in want[key]
            ), (key, r)
