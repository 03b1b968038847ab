"""``probench eval --parity``'s comparison (issue 18): the node's core (the real FrameWorker,
the node's decode of the bag's bytes) answering with tiny-owlv2, against the same detector
run offline on the dataset's files. The DDS path itself: test/ros/test_ros_eval_e2e.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.fake_link import FakeGroundingLink
from probench.realtime.eval_parity import attribute, match_boxes, parity_check
from probench.realtime.node_spec import EvaluatorConfig

pytestmark = pytest.mark.timeout(300)

GROUNDING = {"model": "tiny-owlv2", "device": "cpu", "precision": "fp32", "weights": "",
             "score_threshold": 0.0, "max_detections": 10000, "preprocess": "device"}


@pytest.fixture(scope="module")
def detector():
    from probench.models.zoo import load_detector

    return load_detector("tiny-owlv2")


def _replay(bag: Path, out: Path, detector, formulations: list[str]) -> None:
    from probench.realtime.eval_run import run_evaluation

    cfg = EvaluatorConfig(bag=str(bag), out=str(out), mode="as-fast-as-answered", rate_hz=30.0,
                          formulations=formulations, answer_timeout=30.0, startup_timeout=10.0, budget_ms=0.0,
                          warmup_frames=1, grounding_node="/grounding_node", overwrite=False)
    link = FakeGroundingLink(detector=detector)
    try:
        run_evaluation(link, cfg)
    finally:
        link.close()


def test_the_sample_agrees_exactly_with_the_offline_path(repo_root: Path, tmp_path: Path, detector) -> None:
    run = tmp_path / "run"
    _replay(repo_root / "bags" / "probench-sample", run, detector, ["orig", "cat", "tmpl"])
    p = parity_check(run, repo_root / "bags" / "probench-sample", repo_root / "datasets" / "probench-sample",
                     GROUNDING)
    assert p["boxes"]["ros"] > 0 and p["boxes"]["ros"] == p["boxes"]["offline"] == p["boxes"]["matched"]
    assert p["match_share"] == 1.0 and p["agree_exactly"] and p["cause"] == "none"
    assert p["map50"]["difference"] == 0.0 and set(p["by_formulation"]) == {"orig", "cat", "tmpl"}
    assert p["pixels"]["identical"] == 10  # the bag holds the JPEG files' own bytes
    assert json.loads((run / "parity.json").read_text()) == p


def test_a_lossy_bag_differs_and_the_decode_is_named(repo_root: Path, tmp_path: Path, detector) -> None:
    """The sample as PNG files, bagged as JPEG quality 30: the node sees other pixels."""
    import cv2

    from probench.bags.writer import write_bag
    from probench.data.dataset import load_dataset

    ds = tmp_path / "png"
    shutil.copytree(repo_root / "datasets" / "probench-sample", ds)
    coco = json.loads((ds / "annotations.json").read_text())
    for im in coco["images"]:
        src = ds / im["file_name"]
        png = src.with_suffix(".png")
        cv2.imwrite(str(png), cv2.imread(str(src), cv2.IMREAD_COLOR))
        src.unlink()
        im["file_name"] = str(Path(im["file_name"]).with_suffix(".png"))
    (ds / "annotations.json").write_text(json.dumps(coco))
    write_bag(load_dataset(ds), tmp_path / "bag", compressed=True, jpeg_quality=30, progress=False)
    run = tmp_path / "run"
    _replay(tmp_path / "bag", run, detector, ["orig"])
    p = parity_check(run, tmp_path / "bag", ds, GROUNDING)
    assert p["match_share"] < 1.0 and not p["agree_exactly"]
    assert p["match_share_with_bag_pixels"] == 1.0  # the detector agrees on the same pixels
    assert p["cause"] == "decode" and "PNG" in p["cause_text"]
    assert p["pixels"]["different"] == 10 and p["pixels"]["max_abs_diff"] > 0


def test_box_matching_rules() -> None:
    a = [{"image_id": 1, "category_id": 2, "bbox": [0, 0, 100, 100], "score": 0.5}]
    same = [{"image_id": 1, "category_id": 2, "bbox": [0, 0, 100, 100.2], "score": 0.5005}]
    assert match_boxes(a, same)["share"] == 1.0
    moved = [{"image_id": 1, "category_id": 2, "bbox": [2, 0, 100, 100], "score": 0.5}]  # IoU 0.98
    assert match_boxes(a, moved)["share"] == 0.0
    rescored = [{"image_id": 1, "category_id": 2, "bbox": [0, 0, 100, 100], "score": 0.502}]
    assert match_boxes(a, rescored)["share"] == 0.0
    other_query = [{"image_id": 1, "category_id": 3, "bbox": [0, 0, 100, 100], "score": 0.5}]
    assert match_boxes(a, other_query)["share"] == 0.0
    assert match_boxes([], [])["share"] == 1.0


def test_the_cause_is_attributed_from_the_evidence() -> None:
    pixels = {"images": 4, "identical": 0, "channels_swapped": 4, "different": 0, "max_abs_diff": 0.0}
    assert attribute(0.4, 1.0, pixels, "raw rgb8 (Image)", ["PNG"])[0] == "colour encoding"
    assert attribute(0.4, 0.4, pixels, "raw rgb8 (Image)", ["PNG"])[0] == "detector input"
    assert attribute(1.0, 1.0, pixels, "raw rgb8 (Image)", ["PNG"])[0] == "none"
