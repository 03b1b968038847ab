"""The byte-for-byte check of the run folders' result files (test/cache/test_cache_records_golden.py).

Each function below drives one writer through an entry point that main 778a37e (before the
typed records) and today's code share, on inputs committed in ``test/cache/records_golden/inputs``,
and returns the bytes written. ``make_golden.py`` ran them at 778a37e to make the golden
files; the test runs them on today's code and requires the same bytes. Times, versions and
measured latencies are pinned (they are the only inputs that are not files).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FIXED_TIME = "2026-01-02T03:04:05Z"
FIXED_VERSIONS = {"python": "3.12.0", "probench": "0.0.0-golden", "numpy": "2.0.0"}
FIXED_ELAPSED_S = 12.3456


@contextmanager
def pinned(**extra: Any) -> Iterator[None]:
    """Creation times, library versions and the session's elapsed time fixed, in every module
    that imports them by name (``extra``: more ``module.attribute`` replacements)."""
    import importlib

    from probench.cache import identity

    targets: dict[str, Any] = {
        "probench.cache.identity.utc_now": lambda: FIXED_TIME,
        "probench.cache.identity.library_versions": lambda: dict(FIXED_VERSIONS),
        "probench.cache.identity.__version__": "0.0.0-golden",
        "probench.models.latency.utc_now": lambda: FIXED_TIME,
        "probench.models.latency.library_versions": lambda: dict(FIXED_VERSIONS),
        "probench.models.latency.__version__": "0.0.0-golden",
        **extra,
    }
    saved: list[tuple[Any, str, Any]] = []
    for dotted, value in targets.items():
        mod_name, attr = dotted.rsplit(".", 1)
        mod = importlib.import_module(mod_name)
        if hasattr(mod, attr):
            saved.append((mod, attr, getattr(mod, attr)))
            setattr(mod, attr, value)
    elapsed = identity.RunSession.elapsed_s
    identity.RunSession.elapsed_s = lambda self: FIXED_ELAPSED_S  # type: ignore[method-assign]
    try:
        yield
    finally:
        identity.RunSession.elapsed_s = elapsed  # type: ignore[method-assign]
        for mod, attr, value in reversed(saved):
            setattr(mod, attr, value)


def _inputs(here: Path) -> Path:
    return here / "inputs"


def _copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def build_image_run(here: Path, tmp: Path) -> tuple[Path, Path]:
    """(dataset folder, run folder) of the image case: four formulations (orig, cat, tmpl and a
    prompt policy's), a latency.json and a realtime.json beside them."""
    inputs = _inputs(here)
    ds = tmp / "dataset"
    ds.mkdir(parents=True)
    shutil.copy(inputs / "image_annotations.json", ds / "annotations.json")
    return ds, _copy_run(inputs / "image_run", tmp / "run")


def score_image(paths: tuple[Path, Path]) -> bytes:
    """metrics.json as ``probench score`` writes it (bootstrap, errors, a PCR score threshold)."""
    from probench.cli import main

    ds, run = paths
    code = main(["score", "--dataset", str(ds), "--run", str(run), "--pcr-score-threshold", "0.3",
                 "--bootstrap", "25", "--bootstrap-seed", "3", "--allow-dataset-mismatch", "--quiet"])
    assert code == 0, code
    return (run / "metrics.json").read_bytes()


def build_sequence_run(here: Path, tmp: Path) -> tuple[Path, Path]:
    """(dataset folder, run folder) of a sequence dataset's run (temporal metrics)."""
    inputs = _inputs(here)
    ds = tmp / "dataset"
    ds.mkdir(parents=True)
    shutil.copy(inputs / "sequence_annotations.json", ds / "annotations.json")
    return ds, _copy_run(inputs / "sequence_run", tmp / "run")


def score_sequence(paths: tuple[Path, Path]) -> bytes:
    from probench.cli import main

    ds, run = paths
    code = main(["score", "--dataset", str(ds), "--run", str(run), "--bootstrap", "0", "--no-errors",
                 "--quiet"])
    assert code == 0, code
    return (run / "metrics.json").read_bytes()


def _evaluator_config(bag: str, out: Path) -> Any:
    from probench.realtime.node_spec import EvaluatorConfig

    return EvaluatorConfig(bag=bag, out=str(out), mode="camera-rate", rate_hz=20.0,
                           formulations=["orig", "cat"], answer_timeout=2.0, startup_timeout=10.0,
                           budget_ms=0.0, warmup_frames=2,
                           grounding_node="/grounding_node", overwrite=False)


def _eval_finish(here: Path, tmp: Path, trace: Path | None = None) -> Path:
    """The evaluator's last step (``eval_run.finish``) on a committed trace (or ``trace``) and
    predictions: it writes realtime.json, run.json's status and metrics.json."""
    from probench.cache.identity import RunIdentity, open_run
    from probench.cache.run import RunDir
    from probench.data.dataset import load_dataset
    from probench.realtime.eval_run import finish

    inputs = _inputs(here)
    ds = tmp / "dataset"
    ds.mkdir(parents=True)
    shutil.copy(inputs / "image_annotations.json", ds / "annotations.json")
    dataset = load_dataset(ds, check_files=False)
    out = tmp / "eval"
    identity = RunIdentity(source="ros", model={"name": "test-instant", "random_weights": True},
                           dataset={**dataset.summary(), "path": None, "bag": "/bags/golden"}, device="cpu",
                           precision="fp32", settings={"mode": "camera-rate", "rate_hz": 20.0})
    with pinned():
        session = open_run(out, identity, formulations=["orig", "cat"], timing_key="eval_s",
                           extra={"ros": {"mode": "camera-rate", "rate_hz": 20.0, "bag": "/bags/golden"}})
        run = RunDir(out)
        for f in ("orig", "cat"):
            records = json.loads((inputs / "image_run" / "predictions" / f"{f}.json").read_text())
            by_image: dict[int, list[dict[str, Any]]] = {i: [] for i in dataset.images}
            for r in records:
                by_image[int(r["image_id"])].append(r)
            writer = run.writer(f)
            for image_id, results in by_image.items():
                writer.add_image(image_id, results)
            writer.finalize()
            writer.close()
        shutil.copy(trace or inputs / "realtime_frames.jsonl", out / "realtime_frames.jsonl")
        finish(session, dataset, _evaluator_config("/bags/golden", out))
    return out


def eval_files(here: Path, tmp: Path, trace: Path | None = None) -> dict[str, bytes]:
    """realtime.json, run.json and metrics.json of the evaluator's finish."""
    out = _eval_finish(here, tmp, trace)
    return {name: (out / name).read_bytes() for name in ("realtime.json", "run.json", "metrics.json")}


def run_file(here: Path, tmp: Path) -> bytes:
    """run.json of an offline run opened, resumed and finished incomplete, then failed."""
    from probench.cache.identity import RunIdentity, open_run

    identity = RunIdentity(source="offline", model={"name": "tiny-owlv2", "random_weights": True,
                                                    "runtime": "torch"},
                           dataset={"path": "/data/x", "hash": "sha256:00", "n_images": 3, "n_queries": 2},
                           device="cpu", precision="fp32",
                           settings={"score_threshold": 0.0, "limit": None, "identical_prompts": "once"})
    out = tmp / "run"
    with pinned():
        s = open_run(out, identity, formulations=["orig", "cat"], extra={"timings": {"model_load_s": 0.5},
                                                                         "n_images_evaluated": 3})
        s.finish()
        s = open_run(out, identity, formulations=["tmpl"])
        s.fail(RuntimeError("boom"))
    return (out / "run.json").read_bytes()


def latency_file(here: Path, tmp: Path) -> bytes:
    """latency.json of ``run_latency`` with the measurement pinned (the samples, stages, text
    cache counters of a fixed measurement) on the committed image dataset."""
    import numpy as np

    from probench.data.dataset import load_dataset
    from probench.models.zoo import load_detector

    inputs = _inputs(here)
    ds = tmp / "dataset"
    ds.mkdir(parents=True)
    shutil.copy(inputs / "image_annotations.json", ds / "annotations.json")
    dataset = load_dataset(ds, check_files=False)
    measured = json.loads((inputs / "latency_measured.json").read_text())

    def workload(dataset: Any, image_ids: Any, decode_ms: list[float] | None = None) -> list[Any]:
        if decode_ms is not None:
            decode_ms.extend([1.25, 2.5, 0.75][: len(image_ids)] + [1.0] * max(0, len(image_ids) - 3))
        return [(i, np.zeros((8 + k, 10, 3), np.uint8), ["a"]) for k, i in enumerate(image_ids)]

    from probench.models import latency

    def measure(*_a: Any, **_k: Any) -> Any:
        fresh = json.loads(json.dumps(measured))
        typed = getattr(latency, "Measured", None)  # a dict at 778a37e, a typed Measured today
        if typed is None:
            return fresh
        from probench.cache.records import TextCacheCounts

        return typed(**{**fresh, "text_cache": TextCacheCounts(**fresh["text_cache"])})

    from probench.models.latency import run_latency

    with pinned(**{"probench.models.latency.load_workload": workload,
                   "probench.models.latency.measure_latency": measure}):
        run_latency(load_detector("test-instant"), dataset, tmp / "lat", n_images=3, warmup=2, runs=2)
    # the dataset's folder is a temporary one: named by a placeholder on both sides
    return (tmp / "lat" / "latency.json").read_bytes().replace(str(ds.resolve()).encode(), b"DATASET")
