"""``--negatives K --negatives-seed S`` (data/negatives.py): a deterministic draw of each
image's absent queries of its domain, the same for bag, infer and eval; K = 0 changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers.infer_dataset import make_dataset
from probench.cache.identity import RunIdentity
from probench.cache.run import RunDir
from probench.data.dataset import Dataset, load_dataset
from probench.data.errors import DatasetError
from probench.data.negatives import (
    Negatives,
    domain_queries,
    draw_negatives,
    negatives_of,
    stable_image_hash,
    with_negatives,
)
from probench.models.infer import offline_identity, run_inference
from probench.models.zoo import load_detector

FORMS = ("orig", "cat", "tmpl")


def _coco() -> dict:
    """Two domains: indoor images see queries 1-6, urban ones 7-9; image i annotates query
    1 + i % 3 (indoor) and has label space [that query]."""
    images, anns = [], []
    for i in range(1, 9):
        indoor = i <= 5
        q = (1 + i % 3) if indoor else (7 + i % 3)
        images.append({"id": i, "file_name": f"{i}.png", "width": 50, "height": 50,
                       "domain": "indoor" if indoor else "urban", "query_ids": [q]})
        anns.append({"id": i, "image_id": i, "category_id": q, "bbox": [1, 1, 9, 9], "area": 81,
                     "iscrowd": 0})
    # image 1 asks 4, 5 and 6 too (no targets anywhere): they are indoor queries
    images[0]["query_ids"] = [2, 4, 5, 6]
    cats = [{"id": q, "name": f"q{q}", "prompts": {"orig": f"thing {q}"}} for q in range(1, 10)]
    return {"images": images, "categories": cats, "annotations": anns}


def test_only_absent_queries_of_the_images_domain_are_drawn() -> None:
    ds = Dataset.from_dict(_coco())
    domains = domain_queries(ds)
    assert domains == {"indoor": (1, 2, 3, 4, 5, 6), "urban": (7, 8, 9)}
    out = with_negatives(ds, Negatives(2, seed=7))
    for image_id, rec in ds.images.items():
        added = set(out.label_space(image_id)) - set(ds.label_space(image_id))
        annotated = {a.query_id for a in ds.annotations_by_image[image_id]}
        assert len(added) == 2, image_id  # every image has at least 2 candidates
        assert added <= set(domains[rec.domain]) and not added & annotated
        assert out.label_space(image_id)[: len(ds.label_space(image_id))] == ds.label_space(image_id)
    # the annotations and the content hash stay the source's (run.json records K and the seed beside it)
    assert out.content_hash == ds.content_hash and out.annotations is ds.annotations


def test_an_image_with_fewer_candidates_than_k_gets_them_all() -> None:
    ds = Dataset.from_dict(_coco())
    # urban image 6 annotates query 7 (7 + 6 % 3): candidates 8 and 9 only
    assert draw_negatives(ds, 6, Negatives(5, seed=1)) == (8, 9)


def test_the_draw_is_deterministic_and_seeded() -> None:
    ds = Dataset.from_dict(_coco())

    def spaces(seed: int) -> dict[int, tuple[int, ...]]:
        out = with_negatives(ds, Negatives(1, seed))
        return {i: out.label_space(i) for i in ds.images}

    assert spaces(3) == spaces(3)
    assert any(spaces(3) != spaces(s) for s in (4, 5))  # another seed, another draw
    # the per-image stream depends on a stable hash, not Python's hash() (salted per process)
    assert stable_image_hash(12) == int.from_bytes(
        __import__("hashlib").sha256(b"12").digest()[:8], "big")
    rng = np.random.default_rng([3, stable_image_hash(2)])
    candidates = np.array([1, 2, 3, 4, 5, 6])[[q not in (3,) for q in (1, 2, 3, 4, 5, 6)]]
    assert draw_negatives(ds, 2, Negatives(1, 3)) == (int(rng.choice(candidates, size=1, replace=False)[0]),)


def test_k_zero_is_the_dataset_itself_and_records_nothing() -> None:
    ds = Dataset.from_dict(_coco())
    assert with_negatives(ds, None) is ds
    model = {"name": "m"}
    plain = offline_identity(model, ds, device="cpu", precision="fp32")
    zero = offline_identity(model, ds, device="cpu", precision="fp32", negatives=None)
    assert isinstance(plain, RunIdentity) and plain.record() == zero.record()
    some = offline_identity(model, ds, device="cpu", precision="fp32", negatives=Negatives(2, 5))
    assert some.record()["settings"]["negatives"] == {"k": 2, "seed": 5}


def test_a_malformed_record_is_one_line() -> None:
    assert negatives_of({}, "t") is None and negatives_of({"negatives": {"k": 0, "seed": 1}}, "t") is None
    assert negatives_of({"negatives": {"k": 3, "seed": 1}}, "t") == Negatives(3, 1)
    for bad in ({"k": "3", "seed": 1}, {"k": 3}, [3, 1], {"k": True, "seed": 1}, {"k": 500, "seed": 1}):
        with pytest.raises(DatasetError) as e:
            negatives_of({"negatives": bad}, "t")
        assert "\n" not in str(e.value)


def test_infer_with_negatives_asks_them_records_them_and_scores_them(tmp_path: Path) -> None:
    from probench.cache.errors import RunMismatchError
    from probench.scoring.suite import score_run

    ds_path = make_dataset(tmp_path / "ds")
    ds = load_dataset(ds_path)
    det = load_detector("test-instant")
    plain = run_inference(det, ds, tmp_path / "plain", FORMS, progress=False)
    zero = run_inference(det, ds, tmp_path / "zero", FORMS, progress=False, negatives=None)
    for f in FORMS:  # K = 0: the same predictions, byte for byte, and the same identity
        assert (tmp_path / "plain" / "predictions" / f"{f}.json").read_bytes() == (
            tmp_path / "zero" / "predictions" / f"{f}.json").read_bytes()
    assert plain.settings == zero.settings and "negatives" not in plain.settings
    neg = Negatives(1, seed=2)
    info = run_inference(det, ds, tmp_path / "neg", FORMS, progress=False, negatives=neg)
    assert info.settings["negatives"] == {"k": 1, "seed": 2}
    asked = with_negatives(ds, neg)
    run = RunDir(tmp_path / "neg")
    for f in FORMS:
        pairs = {(r["image_id"], r["category_id"]) for r in run.predictions(f)}
        # the scripted model answers every pair asked
        assert pairs == {(i, q) for i in asked.images for q in asked.label_space(i)}
    added = sum(len(asked.label_space(i)) - len(ds.label_space(i)) for i in ds.images)
    assert added > 0
    m0 = score_run(ds, tmp_path / "plain")
    m1 = score_run(ds, tmp_path / "neg")  # the same dataset given: the run's negatives drawn again
    assert m0.absence is not None and m1.absence is not None
    n0 = m0.absence.by_formulation["orig"].n_negative_pairs
    assert m1.absence.by_formulation["orig"].n_negative_pairs == n0 + added
    # a resumed run with another K is refused, naming the field
    with pytest.raises(RunMismatchError, match=r"settings\.negatives"):
        run_inference(det, ds, tmp_path / "neg", FORMS, progress=False, negatives=Negatives(2, seed=2))
    with pytest.raises(RunMismatchError, match=r"settings\.negatives"):
        run_inference(det, ds, tmp_path / "neg", FORMS, progress=False)


def _image_dataset(root: Path) -> Path:
    import cv2

    (root / "images").mkdir(parents=True)
    coco = _coco()
    for im in coco["images"]:
        im["file_name"] = f"images/{im['id']}.png"
        cv2.imwrite(str(root / im["file_name"]), np.full((50, 50, 3), 10 * im["id"], np.uint8))
    (root / "annotations.json").write_text(json.dumps(coco))
    return root


def test_a_bag_holds_the_drawn_label_spaces_and_eval_can_ask_them_of_a_plain_bag(tmp_path: Path) -> None:
    from probench.bags.errors import BagError
    from probench.bags.reader import ProbenchBag
    from probench.bags.writer import write_bag

    ds = load_dataset(_image_dataset(tmp_path / "ds"))
    neg = Negatives(2, seed=9)
    asked = with_negatives(ds, neg)
    write_bag(ds, tmp_path / "neg.bag", progress=False, negatives=neg)
    write_bag(ds, tmp_path / "plain.bag", progress=False)

    def spaces(bag: ProbenchBag) -> dict[int, list[int]]:
        return {info["image_id"]: [q["query_id"] for q in info["label_space"]]
                for _, info in bag.frame_infos()}

    want = {i: list(asked.label_space(i)) for i in ds.images}
    with ProbenchBag(tmp_path / "neg.bag") as bag:
        assert bag.negatives == neg and bag.dataset.content_hash == ds.content_hash
        assert spaces(bag) == want
        bag.add_negatives(neg)  # the same: nothing to do
        with pytest.raises(BagError, match="--negatives 2 --negatives-seed 9"):
            bag.add_negatives(Negatives(1, seed=9))
    with ProbenchBag(tmp_path / "plain.bag") as bag:
        assert bag.negatives is None and "probench.negatives" not in bag.custom_data
        assert spaces(bag) == {i: list(ds.label_space(i)) for i in ds.images}
        bag.add_negatives(neg)  # eval --negatives on a bag made without: the same draw on read
        assert spaces(bag) == want and bag.negatives == neg


def test_eval_records_the_negatives_in_its_identity() -> None:
    from probench.realtime.eval_run import evaluator_negatives, ros_identity
    from probench.realtime.node_spec import EVALUATOR_PARAMS, GROUNDING_PARAMS

    evaluator = {**EVALUATOR_PARAMS.defaults(), "bag": "b", "out": "o"}
    assert evaluator_negatives(evaluator) is None  # the defaults: none
    grounding = GROUNDING_PARAMS.defaults()
    plain = ros_identity(evaluator, grounding, {"hash": "h"}, bag="b", compressed=False)
    assert "negatives" not in plain.record()["settings"]
    asked = evaluator_negatives({**evaluator, "negatives": 3, "negatives_seed": 4})
    assert asked == Negatives(3, 4)
    rec = ros_identity(evaluator, grounding, {"hash": "h"}, bag="b", compressed=False,
                       negatives=asked).record()
    assert rec["settings"]["negatives"] == {"k": 3, "seed": 4}


def test_the_three_commands_take_the_same_flags() -> None:
    import argparse

    from probench.bags.cli import add_arguments as bag_arguments
    from probench.models.cli_infer import add_arguments as infer_arguments
    from probench.ros.cli_eval import add_arguments as eval_arguments
    from probench.ros.cli_eval import options_from_args

    for add, required in ((bag_arguments, ["--dataset", "d", "--out", "o"]),
                          (infer_arguments, ["--model", "m", "--dataset", "d", "--out", "o"]),
                          (eval_arguments, ["--model", "m", "--bag", "b", "--out", "o"])):  # fmt: skip
        parser = argparse.ArgumentParser(exit_on_error=False)
        add(parser)
        args = parser.parse_args([*required, "--negatives", "3", "--negatives-seed", "7"])
        assert (args.negatives, args.negatives_seed) == (3, 7)
        assert parser.parse_args(required).negatives == 0  # the default: none
        with pytest.raises(argparse.ArgumentError, match=r"must be 0\.\.100, got 101"):
            parser.parse_args([*required, "--negatives", "101"])  # beyond the documented range
    options = options_from_args(args)
    assert (options.negatives, options.negatives_seed) == (3, 7)


def test_eval_parity_refuses_negatives() -> None:
    from probench.errors import UsageError
    from probench.ros.eval_command import EvalOptions

    with pytest.raises(UsageError, match="--parity does not take --negatives"):
        EvalOptions(model="m", bag=Path("b"), out=Path("o"), parity=True, dataset=Path("d"),
                    negatives=2).check()
