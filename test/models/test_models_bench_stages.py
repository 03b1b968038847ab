"""The stage benchmark and the frame-dataset maker (bench/) keep working: one tiny model,
one small frame, every column filled; the GPU check's box matching."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(autouse=True)
def bench_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))


def test_stage_benchmark_row(tmp_path: Path, capsys) -> None:
    import bench_stages

    out = tmp_path / "rows.json"
    assert bench_stages.main(["--models", "tiny-owlv2-b,tiny-yoloe-s", "--sizes", "96x64", "--runs", "1",
                              "--warmup", "0", "--stream", "2", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["model"] for r in rows] == ["tiny-owlv2-b", "tiny-yoloe-s"]
    for r in rows:
        for key in ("decode_ms", "floor_ms", "preprocess_dev_ms", "preprocess_ref_ms", "text_cold_ms",
                    "text_warm_ms", "forward_dev_ms", "postprocess_ref_ms", "total_dev_ms"):
            assert isinstance(r[key], float) and r[key] >= 0.0, key
        assert r["stream_encoder_calls"] == 0  # new combinations of known prompts
        assert 0.0 <= r["text_share"] < 1.0
    table = capsys.readouterr().out
    assert "| tiny-owlv2-b | 96x64 |" in table and "text warm" in table
    assert "tiny-owlv2-b 96x64: pre/floor" in table and "tiny-yoloe-s 96x64: pre/floor" in table
    assert "post/fwd" in table.split("tiny-yoloe-s 96x64:")[-1]


def test_targets_say_met_or_not() -> None:
    import bench_stages

    rows = [{"model": "tiny-owlv2-b", "frame": "1280x720", "pre_floor_least": 2.5, "post_fwd": 0.1},
            {"model": "tiny-yoloe-s", "frame": "640x480", "pre_floor_least": 1.5, "post_fwd": 0.3}]
    owl, yoloe = bench_stages.targets(rows)
    assert owl == "tiny-owlv2-b 1280x720: pre/floor 2.50 (target <= 2: NOT met)"
    assert yoloe == ("tiny-yoloe-s 640x480: pre/floor 1.50 (target <= 2: met); "
                     "post/fwd 0.30 (target <= 0.25: NOT met)")


def test_make_frames_gives_distinct_label_spaces(tmp_path: Path) -> None:
    import make_frames
    from probench.data.dataset import load_dataset

    root = make_frames.make_frames(tmp_path / "ds", size=(48, 64), n_images=8)
    ds = load_dataset(root)
    spaces = [tuple(sorted(ds.label_space(i))) for i in sorted(ds.images)]
    assert len(spaces) == 8 and len(set(spaces)) == 8
    assert all(3 <= len(s) <= 6 for s in spaces)
    assert ds.read_image(1).shape == (48, 64, 3)


def test_gpu_parity_fails_for_a_wrong_network_and_passes_the_same_one() -> None:
    """The GPU check's parity (bench/gpu_parity.py), its logic on the CPU: the same network
    on the same inputs gives 0 error and passes; a network whose one convolution is off by
    1% (a wrong kernel, a wrong weight) fails the fp32 tolerance, named by its output."""
    import numpy as np
    import torch

    import gpu_parity
    from probench.models.zoo import load_detector

    frame = np.random.default_rng(3).integers(0, 256, (96, 128, 3), dtype=np.uint8)
    prompts = ["a person", "a door"]

    def build(device: str, precision: str, off: float = 0.0):
        det = load_detector("tiny-yolo-world-s", device=device, precision=precision)
        if off:
            conv = next(m for m in gpu_parity.network(det).modules() if isinstance(m, torch.nn.Conv2d))
            with torch.no_grad():
                conv.weight.mul_(1.0 + off)
        return det

    [same] = gpu_parity.check_model(build, "tiny-yolo-world-s", "cpu", ["fp32"], frame, prompts)
    assert same["passed"] and same["raw_max_abs"] == 0.0 and same["pre_max_abs"] == 0.0
    assert same["calls"] == ["net"] and same["tensors_out"] > 3
    builds: list[str] = []

    def second_build_off(device: str, precision: str):  # built second: the "device" side
        builds.append(device)
        return build(device, precision, off=0.01 if len(builds) == 2 else 0.0)

    [wrong] = gpu_parity.check_model(second_build_off, "tiny-yolo-world-s", "cpu", ["fp32"], frame, prompts)
    assert not wrong["passed"] and wrong["raw_max_rel"] > gpu_parity.TOLERANCE["fp32"]
    assert wrong["pre_max_abs"] == 0.0  # the inputs are the same: the network is what differs


def test_gpu_parity_errors_per_tensor() -> None:
    import torch

    import gpu_parity

    ref = {"logits": torch.tensor([[1.0, -2.0], [4.0, float("-inf")]]), "ids": torch.tensor([1, 2])}
    same = gpu_parity.errors(ref, {k: v.clone() for k, v in ref.items()})
    assert same == [{"tensor": "logits", "max_abs": 0.0, "max_rel": 0.0}]  # -inf on both sides; ints skipped
    off = gpu_parity.errors(ref, {"logits": torch.tensor([[1.0, -2.0], [4.02, float("-inf")]])})
    assert off[0]["max_abs"] == pytest.approx(0.02, rel=1e-5)
    assert off[0]["max_rel"] == pytest.approx(0.005, rel=1e-5)
    nan = gpu_parity.errors(ref, {"logits": torch.tensor([[1.0, float("nan")], [4.0, float("-inf")]])})
    assert nan[0]["max_rel"] == float("inf")
    shape = gpu_parity.errors(ref, {"logits": torch.zeros(3)})
    assert shape[0]["max_rel"] == float("inf") and "shape" in shape[0]["note"]


@pytest.mark.parametrize(("cpu_rel", "passed"), [(0.05, True), (0.01, False), (None, False)])
def test_gpu_parity_fp16_limited(cpu_rel: float | None, passed: bool) -> None:
    """An fp16 row over its tolerance passes only where fp16 on the CPU is as far off (within
    4x); when the CPU cannot emulate it, the fixed tolerance stands."""
    import gpu_parity

    row = {"passed": False, "pre_passed": True, "raw_max_rel": 0.1}

    def cpu() -> dict[str, float]:
        if cpu_rel is None:
            raise RuntimeError("no fp16 kernel")
        return {"max_rel": cpu_rel}

    gpu_parity.fp16_limited(row, cpu)
    assert row["passed"] is passed
    assert ("cpu_fp16" in row) is (cpu_rel is None)


def test_gpu_check_dry_run_writes_every_section(tmp_path: Path, monkeypatch) -> None:
    """The whole check on the CPU with CUDA calls skipped, cut down to one tiny model and
    small frames: every section is written, none failed, the goals name what is missing,
    and a runtime this tree lacks is recorded as such."""
    import gpu_check

    monkeypatch.setattr(gpu_check, "FRAME", (96, 128))
    root, out = tmp_path / "data", tmp_path / "out"
    gpu_check.prepare(root)
    rc = gpu_check.run(root, out, dry_run=True, budget_s=600, models=["tiny-yoloe-s"],
                       runtimes=("no-such-runtime",))
    assert rc == 0
    data = json.loads((out / "gpu_check.json").read_text())
    for name, _share in gpu_check.SECTIONS:
        assert data[name]["status"] == "done", (name, data[name])
    parity = data["parity"]["rows"]
    assert [(r["model"], r["precision"], r["passed"]) for r in parity] == [("tiny-yoloe-s", "fp32", True)]
    eager = data["real fp16 eager"]["rows"][0]
    assert eager["model"] == "tiny-yoloe-s" and eager["frames"] == 2 and eager["p95_ms"] > 0
    assert eager["launches"] > 0 and eager["kernel_ms"] is None  # kernel time: CUDA only
    other = data["real fp16 onnxruntime/tensorrt"]["rows"]
    assert other == [{"model": "tiny-yoloe-s", "runtime": "no-such-runtime", "precision": "fp32",
                      "note": "not available in this tree"}]
    assert data["goals"] == [{"model": "tiny-yoloe-s", "verdict": "not measured: cut or not run"}]
    stage = data["ultralytics"]["rows"][0]
    assert stage["post_launches"] > 0 and stage["post_fwd"] > 0
    layouts = data["ultralytics"]["rows"][1]["layouts"]
    assert [lay["layout"].split()[0] for lay in layouts] == ["adapter", "nchw"]
    assert "## parity" in (out / "gpu_check.md").read_text()


def test_op_count_counts_host_syncs_and_work_per_stage() -> None:
    """The CPU proxy of bench/op_count.py: calls that wait for a GPU are counted as syncs
    (and attributed to the stage they run in), views are not counted as launches."""
    import torch

    import op_count

    class Model:
        def post(self, t: torch.Tensor) -> float:
            kept = t[t > 0.5]  # a boolean index: one sync
            return float(kept.sum()) + len(t.nonzero().tolist())  # float(), nonzero, tolist: three

        def run(self, t: torch.Tensor) -> float:
            v = (t * 2).view(-1)[:3]  # one launch; the views launch nothing
            return self.post(v + 1)

    m, t = Model(), torch.arange(8.0)
    counts = op_count.count_ops(lambda: m.run(t), device="cpu", calls=2, stages={"post": (m, "post")})
    assert counts["syncs"] == 4 and counts["stages"]["post"]["syncs"] == 4
    assert counts["kernel_ms"] is None
    assert 0 < counts["stages"]["post"]["launches"] < counts["launches"]
    assert counts["launches"] - counts["stages"]["post"]["launches"] == 2  # mul, add
    assert "post" not in vars(m)  # the stage's method is restored
