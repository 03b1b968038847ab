"""probench latency: latency.json schema, warm-up exclusion, run counts, sync, refusals."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.cli_exit import exit_code
from helpers.infer_dataset import make_dataset
from probench.cache.errors import RunMismatchError
from probench.cli import main
from probench.data.dataset import Dataset, load_dataset
from probench.models.latency import (
    cuda_sync,
    format_summary,
    latency_subset,
    load_workload,
    measure_latency,
    run_latency,
    summarize,
)
from probench.models.zoo import load_detector


class SlowStart:
    """The scripted detector, but its first ``slow`` detect calls take ``delay`` s: a warm-up
    that is not excluded shows up in the samples."""

    def __init__(self, slow: int = 3, delay: float = 0.15):
        self.inner = load_detector("test-instant")
        self.slow, self.delay = slow, delay
        self.detect_calls, self.prompt_sets = 0, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def set_prompts(self, prompts):
        self.prompt_sets.append(list(prompts))
        self.inner.set_prompts(prompts)

    def detect(self, image, prompts=None):
        self.detect_calls += 1
        if self.detect_calls <= self.slow:
            time.sleep(self.delay)
        return self.inner.detect(image, prompts)


@pytest.fixture
def ds_path(tmp_path: Path) -> Path:
    return make_dataset(tmp_path / "ds")


def test_latency_json_schema_and_counts(ds_path: Path, tmp_path: Path) -> None:
    det = SlowStart()
    result = run_latency(det, load_dataset(ds_path), tmp_path / "run", n_images=4, warmup=3, runs=5,
                         progress=False).to_json()
    saved = json.loads((tmp_path / "run" / "latency.json").read_text())
    assert saved == json.loads(json.dumps(result))
    p = saved["protocol"]
    assert (p["warmup"], p["runs"], p["n_images"], p["n_samples"]) == (3, 5, 4, 20)
    assert p["cuda_synchronized"] is False and p["end_to_end"] is True and p["decode_included"] is False
    assert "orig" in p["prompts_per_image"]
    assert saved["model"]["name"] == "test-instant" and saved["device"] == "cpu"
    assert saved["random_weights"] is False
    assert set(saved["summary_ms"]) == {"mean", "std", "p50", "p95", "p99", "max"}
    assert {"preprocess", "forward", "postprocess", "text"} <= set(saved["stages_ms"])
    assert all("mean" in v for v in saved["stages_ms"].values())
    assert saved["image_ids"] == [10, 11, 12, 13]
    # 3 warm-up + 5 runs x 4 images detect calls; only the timed ones are samples ...
    assert det.detect_calls == 3 + 5 * 4 and len(saved["samples_ms"]) == 20
    # ... and the slow warm-up calls are not among them
    assert max(saved["samples_ms"]) < 150.0
    s = saved["summary_ms"]
    assert s["p50"] <= s["p95"] <= s["p99"] <= s["max"]
    assert math.isclose(s["mean"], float(np.mean(result["samples_ms"])), rel_tol=1e-3)


def test_warmup_is_counted_and_excluded_when_it_is_not_zero(ds_path: Path, tmp_path: Path) -> None:
    # With no warm-up, the slow first call is a timed sample: the check above can fail.
    det = SlowStart(slow=1)
    result = run_latency(det, load_dataset(ds_path), tmp_path / "run", n_images=2, warmup=0, runs=2,
                         progress=False).to_json()
    assert det.detect_calls == 4 and max(result["samples_ms"]) >= 150.0


def test_prompts_are_the_orig_label_space_deduplicated(ds_path: Path) -> None:
    ds = load_dataset(ds_path)
    workload = load_workload(ds, latency_subset(ds, 2))
    assert [w[0] for w in workload] == [10, 11]
    assert workload[0][2] == ["the red box on the left", "a valve you can turn"]
    assert workload[1][2] == ["the red box on the left", "a valve you can turn", "the open door"]
    assert workload[0][1].shape == (48, 64, 3) and workload[0][1].dtype == np.uint8


def test_subset_skips_empty_label_spaces_and_caps(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds")
    coco = json.loads((root / "annotations.json").read_text())
    coco["annotations"] = [a for a in coco["annotations"] if a["image_id"] != 10]
    ds = Dataset.from_dict(coco, root=root)
    assert latency_subset(ds, 3) == [11, 12, 13]
    assert latency_subset(ds, 50) == [11, 12, 13, 14, 15]


def test_sync_called_around_every_inference(ds_path: Path) -> None:
    ds = load_dataset(ds_path)
    calls = []
    measure_latency(load_detector("test-instant"), load_workload(ds, [10, 11]), warmup=1, runs=2,
                    sync=lambda: calls.append(1))
    assert len(calls) == 3 * (1 + 2 * 2)  # before, between text and detect, after
    assert cuda_sync("cpu") is None


def test_text_encoder_calls_counted_only_in_timed_runs(ds_path: Path) -> None:
    ds = load_dataset(ds_path)
    det = load_detector("test-instant")
    out = measure_latency(det, load_workload(ds, [10, 11, 12]), warmup=3, runs=2)
    # prompt sets: 10 and 12 share set A, 11 has B; the warm-up encodes both and the text
    # cache keeps them, so the timed order 10 11 12 10 11 12 encodes nothing
    assert out.text_encoder_calls == 0
    assert det.text_encoder_calls == 2


def test_summarize_known_values() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5 and s["max"] == 4.0 and s["p50"] == 2.5
    assert math.isclose(s["std"], math.sqrt(1.25))
    assert math.isclose(s["p95"], 3.85) and math.isclose(s["p99"], 3.97)


def test_cli_prints_summary_and_refuses_other_model(ds_path: Path, tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "run")
    base = ["latency", "--dataset", str(ds_path), "--out", out, "--no-progress",
            "--runs", "1", "--images", "3"]
    assert main([*base, "--model", "test-instant"]) == 0
    printed = capsys.readouterr().out
    assert "test-instant" in printed and "±" in printed and "3 warm-up excluded" in printed
    assert main([*base, "--model", "test-instant"]) == 0  # remeasuring the same model is fine
    assert main([*base, "--model", "test-slow-1ms"]) == 1
    err = capsys.readouterr().err
    assert "latency.json" in err and "model.name" in err
    assert main([*base, "--model", "test-slow-1ms", "--overwrite"]) == 0
    assert json.loads((tmp_path / "run" / "latency.json").read_text())["model"]["name"] == "test-slow-1ms"


def test_latency_refuses_a_run_of_another_model(ds_path: Path, tmp_path: Path) -> None:
    assert main(["infer", "--model", "test-instant", "--dataset", str(ds_path), "--out", str(tmp_path / "r"),
                 "--formulations", "orig", "--no-progress"]) == 0
    with pytest.raises(RunMismatchError, match=r"run\.json"):
        run_latency(load_detector("test-slow-1ms"), load_dataset(ds_path), tmp_path / "r", n_images=1,
                    runs=1, progress=False)
    # the same model adds latency.json next to the predictions
    run_latency(load_detector("test-instant"), load_dataset(ds_path), tmp_path / "r", n_images=1, runs=1,
                progress=False)
    assert (tmp_path / "r" / "latency.json").exists()
    assert (tmp_path / "r" / "predictions" / "orig.json").exists()


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--model", "no-such-model"], "no-such-model"),
        (["--model", "test-instant", "--runs", "0"], "--runs"),
        (["--model", "test-instant", "--images", "0"], "--images"),
        (["--model", "test-instant", "--warmup", "-1"], "--warmup"),
    ],
)
def test_cli_usage_errors(ds_path: Path, tmp_path: Path, capsys, extra, needle) -> None:
    out = str(tmp_path / "r")
    rc = exit_code(["latency", "--dataset", str(ds_path), "--out", out, "--no-progress", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
    assert not (tmp_path / "r" / "latency.json").exists()


def test_cli_missing_dataset(tmp_path: Path, capsys) -> None:
    rc = main(["latency", "--model", "test-instant", "--dataset", str(tmp_path / "nope"),
               "--out", str(tmp_path / "r")])
    assert rc == 2 and "nope" in capsys.readouterr().err


def test_text_split_cache_stats_decode_and_path(ds_path: Path, tmp_path: Path) -> None:
    """latency.json: cold/warm text samples, the text cache during the timed runs, the
    decode time per image (not in the samples) and the preprocessing path."""
    det = load_detector("tiny-owlv2")
    result = run_latency(det, load_dataset(ds_path), tmp_path / "run", n_images=4, warmup=0, runs=2,
                         progress=False).to_json()
    text, cache = result["text_ms"], result["text_cache"]
    assert text["n_cold"] + text["n_warm"] == len(result["samples_ms"]) == 8
    # no warm-up: the first pass meets new prompts, the second finds them all cached
    assert 1 <= text["n_cold"] <= 4 and text["n_warm"] >= 4
    assert text["warm"]["max"] < text["cold"]["max"] and 0.0 <= text["warm_share_of_frame"] < 1.0
    assert cache["kind"] == "per-prompt" and cache["misses"] == det.text_cache_stats()["misses"] > 0
    assert cache["hits"] > 0 and cache["evictions"] == 0
    assert result["text_encoder_calls"] == text["n_cold"]
    assert result["decode_ms"]["mean"] > 0 and "64x48" in result["frame_sizes"]
    assert result["preprocess"] == "device"


def test_cli_preprocess_reference(ds_path: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["latency", "--model", "tiny-owlv2", "--dataset", str(ds_path), "--out", str(out),
                 "--no-progress", "--runs", "1", "--images", "2", "--warmup", "0",
                 "--preprocess", "reference"]) == 0
    saved = json.loads((out / "latency.json").read_text())
    assert saved["preprocess"] == "reference"
    from probench.models.threads import applied_threads

    assert applied_threads() is not None and saved["protocol"]["cpu_threads"] == applied_threads()
    assert "preprocess path reference" in capsys.readouterr().out


def test_the_threads_a_command_set_are_recorded_and_absent_otherwise(ds_path: Path, tmp_path: Path) -> None:
    """latency.json names the CPU threads the model ran with where the command set them
    (--threads: a latency figure depends on them), and has no such key where nothing did."""
    ds = load_dataset(ds_path)
    plain = run_latency(SlowStart(slow=0), ds, tmp_path / "a", n_images=2, warmup=0, runs=1, progress=False)
    assert "cpu_threads" not in plain.to_json()["protocol"]
    result = run_latency(SlowStart(slow=0), ds, tmp_path / "b", n_images=2, warmup=0, runs=1, progress=False,
                         cpu_threads=3)
    assert json.loads((tmp_path / "b" / "latency.json").read_text())["protocol"]["cpu_threads"] == 3
    assert ", 3 CPU thread(s)" in format_summary(result)


def test_compiled_graphs_are_made_before_any_frame_is_timed(
    ds_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runtime="compiled"``: a graph per (frame size, prompt bucket) of the workload is made
    before the warm-up runs (here with an eager stand-in for the compile), none while timing,
    and the run records its runtime."""
    from probench.models.accel.compiled import CompiledHead

    made: list[tuple[int, ...]] = []

    def capture(module, example):
        made.append(tuple(example[1].shape))
        return module

    det = load_detector("tiny-owlvit", runtime="compiled")
    runner = det._head_runner
    assert isinstance(runner, CompiledHead)
    det.use_head_runner(CompiledHead(runner.head, capture, name=det.name))
    ds = load_dataset(ds_path)
    timed_from = []

    def measure(*args, **kwargs):
        timed_from.append(len(made))
        return measure_latency(*args, **kwargs)

    import probench.models.latency as latency

    monkeypatch.setattr(latency, "measure_latency", measure)
    result = run_latency(det, ds, tmp_path / "run", n_images=3, warmup=1, runs=1, progress=False)
    assert made and timed_from == [len(made)]  # every graph before the protocol started
    assert json.loads((tmp_path / "run" / "latency.json").read_text())["model"]["runtime"] == "compiled"
    assert result.to_json()["model"]["runtime"] == "compiled"
