"""``probench infer --ray`` on a local 2-CPU Ray cluster with tiny-owlv2 (random,
deterministic weights) on the sample dataset:

- a Ray run's prediction files are byte-identical to a single-process run's, and its
  run.json has the same identity (an interrupted single-process run is finished on Ray);
- a worker killed (SIGKILL) mid-chunk: the run completes, identically, with no duplicate
  (with the scripted ``test-slow-250ms``, so that "mid-chunk" holds on a loaded machine);
- the driver killed (SIGKILL) mid-run, the same command again: it resumes and ends
  identically;
- ``probench sweep --ray`` (here, to share the module's cluster): latency measured by a task
  holding the whole node, and the report saying so.

Kept cheap: one cluster and one pool of workers for the module (the model loads once per
worker), 5 images x 2 formulations.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.crash import crash_env
from probench.cache.identity import RUN_FIELDS, first_difference
from probench.cache.run import RunDir
from probench.cli import main
from probench.data.dataset import Dataset, load_dataset
from probench.models.infer import run_inference
from probench.models.zoo import load_detector
from probench.scale.cluster import Cluster
from probench.scale.ray_infer import RayWorkerPool, run_ray_inference
from probench.scale.worker import ModelArgs

pytestmark = pytest.mark.slow
SAMPLE = "datasets/probench-sample"
MODEL = "tiny-owlv2"
FORMS = ("orig", "cat")
LIMIT = 5


@pytest.fixture(scope="module")
def sample(repo_root: Path) -> Dataset:
    return load_dataset(repo_root / SAMPLE)


class Pool:
    """The module's workers, started on first use (their models load while the single-process
    reference runs) and stoppable before a test that needs the cluster's CPUs."""

    def __init__(self, cluster: Cluster, dataset: Dataset) -> None:
        self.cluster, self.dataset = cluster, dataset
        self.pool: RayWorkerPool | None = None

    def get(self) -> RayWorkerPool:
        if self.pool is None:
            self.pool = RayWorkerPool(ModelArgs(MODEL), self.dataset, self.cluster, workers=2)
        return self.pool

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.stop()
            self.pool = None


@pytest.fixture(scope="module")
def pool(ray_local: Cluster, sample: Dataset) -> Iterator[Pool]:
    holder = Pool(ray_local, sample)
    holder.get()
    yield holder
    holder.stop()


@pytest.fixture(scope="module")
def reference(pool: Pool, sample: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The single-process run (this process), while the pool's workers load their models."""
    out = tmp_path_factory.mktemp("single") / "run"
    run_inference(load_detector(MODEL), sample, out, FORMS, progress=False, limit=LIMIT, device="cpu")
    return out


def _assert_same_run(got: Path, ref: Path) -> None:
    for f in FORMS:
        data = (got / "predictions" / f"{f}.json").read_bytes()
        assert data == (ref / "predictions" / f"{f}.json").read_bytes(), f
    assert not list((got / "predictions").glob("*.partial.jsonl"))
    info, ref_info = (json.loads((p / "run.json").read_text()) for p in (got, ref))
    assert first_difference(ref_info, info, RUN_FIELDS) is None
    assert info["status"] == "complete" and info["n_images_evaluated"] == LIMIT


def test_ray_run_is_byte_identical_to_single_process(pool: Pool, sample: Dataset, reference: Path,
                                                     tmp_path: Path) -> None:  # fmt: skip
    pool.get().wait_ready()  # both workers up: both get chunks from the start
    out = tmp_path / "ray"
    info = run_ray_inference(ModelArgs(MODEL), sample, out, FORMS, pool.cluster, pool=pool.get(),
                             limit=LIMIT, progress=False).to_json()  # fmt: skip
    _assert_same_run(out, reference)
    assert RunDir(reference).predictions("orig")  # the comparison is not of two empty files
    ray = info["ray"]
    assert ray["workers"] == 2 and ray["nodes"] == ["127.0.0.1"] and ray["local"] is True
    assert sum(w["images"] for w in ray["per_worker"]) == LIMIT * len(FORMS)
    assert all(w["images"] > 0 for w in ray["per_worker"])  # both workers took part
    assert info["timings"]["model_load_s"] > 0


class _StopAfter:
    """A detector that is interrupted (Ctrl-C) after ``n`` images."""

    def __init__(self, inner, n: int) -> None:
        self.inner, self.left = inner, n

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def detect(self, image, prompts=None):
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return self.inner.detect(image, prompts)


def test_a_single_process_run_interrupted_is_finished_on_ray(pool: Pool, sample: Dataset, reference: Path,
                                                             tmp_path: Path) -> None:  # fmt: skip
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_inference(_StopAfter(load_detector(MODEL), 3), sample, out, FORMS, progress=False, limit=LIMIT,
                      device="cpu")  # fmt: skip
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    info = run_ray_inference(ModelArgs(MODEL), sample, out, FORMS, pool.cluster, pool=pool.get(),
                             limit=LIMIT, progress=False).to_json()  # fmt: skip
    _assert_same_run(out, reference)
    assert info["resumed"] == 1
    assert sum(w["images"] for w in info["ray"]["per_worker"]) < LIMIT * len(FORMS)  # only what was left


def test_cuda_on_a_cluster_without_gpu_is_a_usage_error(pool: Pool, repo_root: Path, tmp_path: Path,
                                                        capsys) -> None:  # fmt: skip
    rc = main(["infer", "--model", MODEL, "--dataset", str(repo_root / SAMPLE), "--out", str(tmp_path / "r"),
               "--ray", "--device", "cuda", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--device cuda but the Ray cluster has no GPU" in err and "\n" not in err


def _broken_copy(repo_root: Path, root: Path) -> tuple[Path, str]:
    """The sample dataset with its second image's file replaced by garbage."""
    shutil.copytree(repo_root / SAMPLE, root)
    name = sorted(json.loads((root / "annotations.json").read_text())["images"], key=lambda i: i["id"])[1]
    (root / name["file_name"]).write_bytes(b"not an image")
    return root, name["file_name"]


def test_errors_in_a_worker_end_the_run_with_one_line(pool: Pool, repo_root: Path, tmp_path: Path,
                                                      capsys) -> None:  # fmt: skip
    pool.stop()  # the CLI's own workers need the cluster's CPUs
    ds, broken = _broken_copy(repo_root, tmp_path / "ds")
    out = tmp_path / "run"
    common = ["infer", "--model", "test-instant", "--dataset", str(ds), "--out", str(out), "--ray",
              "--no-progress"]  # fmt: skip
    # an image that cannot be decoded (in the worker): exit 1, the file named, the run marked failed
    assert main([*common, "--workers", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert broken in err and "not a decodable image" in err
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    # a model the workers cannot build: their error, one line, its exit code
    assert main([*common, "--runtime", "tensorrt", "--overwrite"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "scripted test model runs in Python only" in err


def test_worker_killed_mid_chunk_completes_identically(pool: Pool, sample: Dataset, tmp_path: Path) -> None:
    # A model slower than the driver by far (250 ms an image), so that the worker killed when
    # its first image comes back is, whatever the machine's load, still inside its chunk.
    pool.stop()  # this test's workers need the cluster's CPUs
    slow = "test-slow-250ms"
    reference = tmp_path / "single"
    run_inference(load_detector(slow), sample, reference, FORMS, progress=False, limit=LIMIT, device="cpu")
    killed: list[int] = []

    def kill_first_producer(formulation: str, image_id: int, pid: int) -> None:
        if not killed:  # the first image of a 3-image chunk is back: its worker is on the next
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    out = tmp_path / "ray"
    info = run_ray_inference(ModelArgs(slow), sample, out, FORMS, pool.cluster, workers=2, limit=LIMIT,
                             chunk_size=3, progress=False,
                             on_record=kill_first_producer).to_json()  # fmt: skip
    assert killed
    _assert_same_run(out, reference)
    assert info["ray"]["worker_restarts"] == 1 and info["ray"]["images_retried"] >= 2
    assert sum(w["images"] for w in info["ray"]["per_worker"]) >= LIMIT * len(FORMS)


def test_sweep_on_ray_measures_latency_on_a_node_it_holds(pool: Pool, repo_root: Path, tmp_path: Path,
                                                          capsys) -> None:  # fmt: skip
    pool.stop()  # the latency task takes every CPU of the node
    out = tmp_path / "sweep"
    args = ["sweep", "--models", "test-instant,test-slow-2ms", "--dataset", str(repo_root / SAMPLE),
            "--out", str(out), "--limit", "4", "--latency-images", "2", "--warmup", "1", "--runs", "2",
            "--ray", "--workers", "2", "--no-progress"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    steps = {(s["model"], s["step"]): s for s in json.loads((out / "sweep.json").read_text())["steps"]}
    assert {s["status"] for s in steps.values()} == {"ran"}
    assert steps[("test-instant", "infer")]["where"] == "Ray: 2 worker(s) on 127.0.0.1"
    for model in ("test-instant", "test-slow-2ms"):
        latency = json.loads((out / "runs" / model / "latency.json").read_text())
        how = latency["isolation"]["how"]
        assert how.startswith("one Ray task holding every CPU (2) and GPU (0) of node 127.0.0.1")
        assert latency["dataset"]["path"] == str((repo_root / SAMPLE).resolve())
    slow = json.loads((out / "runs" / "test-slow-2ms" / "latency.json").read_text())
    assert slow["summary_ms"]["mean"] >= 2.0  # the scripted model's sleep is in every sample
    doc = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert "one Ray task holding every CPU (2)" in doc and "test-slow-2ms" in doc


def _cli(out: Path, repo_root: Path) -> list[str]:
    return [sys.executable, "-m", "probench", "infer", "--model", MODEL, "--dataset", str(repo_root / SAMPLE),
            "--out", str(out), "--formulations", ",".join(FORMS), "--limit", str(LIMIT),
            "--ray", "--workers", "2", "--no-progress"]  # fmt: skip


def test_driver_sigkill_then_same_command_resumes_identically(
    pool: Pool, ray_local: Cluster, reference: Path, repo_root: Path, tmp_path: Path, ros_env: dict
) -> None:
    pool.stop()  # the CLI's own workers need the cluster's two CPUs
    # Ray asks a driver given an explicit address to say that the cluster uses its token
    env = {**ros_env, "RAY_ADDRESS": ray_local.gcs_address, "RAY_AUTH_MODE": "token",
           "PYTHONPATH": str(repo_root / "src")}  # fmt: skip
    out = tmp_path / "ray"
    # the driver kills itself right after its 2nd record (probench.cache.crash), not when a timer fires
    killed = subprocess.run(_cli(out, repo_root), env=crash_env(env, "infer.record:2"), capture_output=True,
                            text=True, timeout=180)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    logs = [out / "predictions" / f"{f}.partial.jsonl" for f in FORMS]
    assert sum(p.read_bytes().count(b"\n") for p in logs if p.exists()) == 2  # both records kept
    assert json.loads((out / "run.json").read_text())["status"] == "running"  # killed: no chance to say
    assert not (out / "predictions" / "cat.json").exists()
    done = subprocess.run(_cli(out, repo_root), env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    _assert_same_run(out, reference)
    assert json.loads((out / "run.json").read_text())["resumed"] == 1
