"""Hand-written run folders and reference tables for the report tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"

SWEEP = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
HEADER = "model,map50,map75,map50_95,latency_ms,m_cat,m_tmpl,delta_max,best_formulation,pcr50,plc"
# three rows of the paper's Table II (probench/report/data/paper_table2.csv), as published
PAPER_ROWS = [
    "SAM3-Lite,0.696,0.594,0.562,683.0,0.737,0.541,0.196,cat,0.847,0.917",
    "OmDet-T,0.431,0.355,0.333,22.7,0.454,0.363,0.090,cat,0.243,0.958",
    "YOLO-W-S,0.140,0.115,0.104,7.3,0.167,0.134,0.033,cat,0.075,0.967",
]


def _sweep(peak: float) -> dict[str, float]:
    """A plausible falling AP-vs-IoU curve with AP(0.1) = peak."""
    return {f"{t:.2f}": round(peak * (1.0 - t**3), 4) for t in SWEEP}


def write_run(
    root: Path,
    name: str,
    *,
    paper_name: str | None = "OWLv2-B",
    random_weights: bool = False,
    peaks: dict[str, float] | None = None,
    latency: tuple[float, float] | None = (50.0, 5.0),
    with_metrics: bool = True,
    dataset_path: str | None = None,
) -> Path:
    """A run folder with run.json and (unless ``with_metrics`` is False) a metrics.json."""
    run = root / name
    run.mkdir(parents=True)
    peaks = peaks if peaks is not None else {"orig": 0.5, "cat": 0.6, "tmpl": 0.45}
    by = {}
    for f, p in peaks.items():
        s = _sweep(p)
        m50 = s["0.50"]
        by[f] = {"map50": m50, "map75": round(m50 * 0.8, 4), "map50_95": round(m50 * 0.7, 4), "ap_by_iou": s}
    m = {f"m_{f}": by[f]["map50"] for f in by}
    metrics = {
        "map50": by["orig"]["map50"], "map75": by["orig"]["map75"], "map50_95": by["orig"]["map50_95"],
        "by_formulation": by, **m,
        "delta_max": max(m.values()) - min(m.values()) if len(m) > 1 else None,
        "best_formulation": max(m, key=m.get)[2:] if len(m) > 1 else None,
        "pcr50": 0.3, "plc": 0.9,
        "by_prompt_type": {"categorical": {"map50": 0.5, "map50_95": 0.3, "n_queries": 3}},
        "by_domain": {"indoor": {"map50": 0.4, "map50_95": 0.2, "n_queries": 10}},
    }  # fmt: skip
    if latency is not None:
        metrics["latency_ms"] = {"mean": latency[0], "std": latency[1], "p50": latency[0], "p95": latency[0],
                                 "p99": latency[0], "max": latency[0]}
    model = {"name": name, "family": "owl", "random_weights": random_weights}
    if paper_name is not None:
        model["paper_name"] = paper_name
    info = {"source": "offline", "device": "cpu", "model": model, "formulations": list(peaks)}
    if dataset_path is not None:
        info["dataset"] = {"path": dataset_path}
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")
    if with_metrics:
        (run / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return run


@pytest.fixture
def reference_csv(tmp_path: Path) -> Path:
    path = tmp_path / "table2.csv"
    path.write_text("\n".join([HEADER, *PAPER_ROWS]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def two_runs(tmp_path: Path) -> list[Path]:
    return [
        write_run(tmp_path / "runs", "a", paper_name="OWLv2-B", random_weights=True,
                  peaks={"orig": 0.45, "cat": 0.6, "tmpl": 0.45}, latency=(120.0, 10.0)),
        write_run(tmp_path / "runs", "b", paper_name="OWL-ViT",
                  peaks={"orig": 0.9, "cat": 0.7, "tmpl": 0.8}, latency=(20.0, 2.0)),
    ]  # fmt: skip


@pytest.fixture
def make_run(tmp_path: Path):
    """``make_run(name, **kw)``: a run folder under tmp_path/runs (see ``write_run``)."""

    def make(name: str, **kw) -> Path:
        return write_run(tmp_path / "runs", name, **kw)

    return make


def write_sample_run(
    root: Path, name: str, recall: float, seed: int, dataset_hash: str | None = None
) -> Path:
    """A run folder of the bundled sample with synthetic predictions (no metrics.json):
    ``recall`` of the GT found, run.json naming the sample and its hash (or ``dataset_hash``)."""
    from probench.data.dataset import load_dataset
    from probench.data.synthetic import arrays_to_results, synthetic_prediction_arrays

    ds = load_dataset(SAMPLE, check_files=False)
    coco = json.loads((SAMPLE / "annotations.json").read_text(encoding="utf-8"))
    run = root / name
    (run / "predictions").mkdir(parents=True)
    dataset = {"path": str(SAMPLE), "hash": dataset_hash or ds.content_hash}
    info = {"model": {"name": name}, "dataset": dataset}
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")
    for f in ("orig", "cat", "tmpl"):
        arrays = synthetic_prediction_arrays(coco, f, seed=seed, recall=recall, fp_per_pair=1.0)
        preds = arrays_to_results(arrays)
        (run / "predictions" / f"{f}.json").write_text(json.dumps(preds), encoding="utf-8")
    return run


@pytest.fixture
def sample_run(tmp_path: Path):
    """``sample_run(name, recall, seed, dataset_hash=None)``: a run of the sample
    (see ``write_sample_run``)."""

    def make(name: str, recall: float, seed: int = 1, dataset_hash: str | None = None) -> Path:
        return write_sample_run(tmp_path / "runs", name, recall, seed, dataset_hash)

    return make


@pytest.fixture(scope="session")
def run_writers():
    """``(write_run, write_sample_run)`` for module-scoped fixtures, which cannot use the
    function-scoped ``make_run`` and ``sample_run``."""
    return write_run, write_sample_run
