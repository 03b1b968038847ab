"""The stage benchmark and the frame-dataset maker (bench/) keep working: one tiny model,
one small frame, every column filled; the GPU check's box matching."""

from __future__ import annotations

import json
import sys
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


def test_gpu_check_box_matching() -> None:
    import numpy as np

    import gpu_check
    from probench.detections import Detections

    b = Detections.from_arrays(np.array([[0, 0, 10, 10], [5, 5, 20, 20]], float), np.array([0.9, 0.5]),
                               np.array([0, 1]), image_size=(30, 30))
    rec = gpu_check.boxes_record(b)
    assert gpu_check.match_fraction(rec, b) == (2, 2, 2)
    moved = dict(rec, xyxy=[[0, 0, 10, 11.0], [5, 5, 20, 20]])
    assert gpu_check.match_fraction(moved, b) == (1, 2, 2)
    assert "bench" in sys.modules["gpu_check"].__file__


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
