"""The bundled real sample dataset (datasets/probench-sample) is complete and consistent."""

from __future__ import annotations

from pathlib import Path

import pytest

from probench.data import load_dataset
from probench.vocabulary import PROMPT_TYPES

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


@pytest.fixture(scope="module")
def sample():
    return load_dataset(SAMPLE)


def test_sample_loads_with_expected_size(sample):
    assert len(sample.images) == 10
    assert len(sample.queries) == 20
    assert len(sample.annotations) == 49
    # annotation ids are unique and every annotation names a known image and query
    assert len({a.id for a in sample.annotations}) == len(sample.annotations)
    for a in sample.annotations:
        assert a.image_id in sample.images
        assert a.query_id in sample.queries


def test_all_eight_prompt_types_present(sample):
    seen = {t for q in sample.queries.values() for t in q.prompt_types}
    assert seen == set(PROMPT_TYPES)


def test_prompts_follow_the_contract(sample):
    for q in sample.queries.values():
        assert q.prompts["tmpl"] == "a photo of " + q.prompts["orig"]
        assert q.prompts["cat"] and q.prompts["cat"] != q.prompts["tmpl"]
        assert set(q.coref) <= {"orig", "cat", "tmpl"} and q.coref
    # some queries declare that their cat form loses the referent
    assert any(set(q.coref) == {"orig", "tmpl"} for q in sample.queries.values())


def test_at_least_two_domains(sample):
    assert len({im.domain for im in sample.images.values()}) >= 2


def test_has_negative_label_space_pairs(sample):
    negatives = [
        (image_id, qid)
        for image_id in sample.images
        for qid in sample.label_space(image_id)
        if not any(a.query_id == qid for a in sample.annotations_by_image[image_id])
    ]
    assert len(negatives) >= 1
    # the negative-type query 14 is a negative pair on the image where the person wears a hat
    hopper = next(i for i, im in sample.images.items() if im.file_name.endswith("grace_hopper.jpg"))
    assert (hopper, 14) in negatives


def test_every_box_inside_its_image(sample):
    for a in sample.annotations:
        im = sample.images[a.image_id]
        x, y, w, h = a.bbox
        assert w > 0 and h > 0, a
        assert x >= 0 and y >= 0 and x + w <= im.width and y + h <= im.height, a
        assert 0 < a.area <= w * h + 1e-6, a
        assert a.iscrowd == 0


def test_images_decode_with_recorded_size(sample):
    for image_id, im in sample.images.items():
        rgb = sample.read_image(image_id)
        assert rgb.shape == (im.height, im.width, 3), im.file_name
        assert max(im.width, im.height) <= 640


def test_sample_is_small_enough_to_ship():
    total = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file())
    assert total < 1_500_000


@pytest.mark.slow  # imports scikit-image and scikit-learn (~5 s on 2 cores)
def test_build_script_reproduces_the_committed_annotations(tmp_path):
    """scripts/make_sample_dataset.py and the committed dataset agree (JPEG bytes may differ
    between libjpeg versions, so the images are compared by size only)."""
    pytest.importorskip("sklearn")
    pytest.importorskip("skimage")
    import importlib.util
    import json

    script = SAMPLE.parents[1] / "scripts" / "make_sample_dataset.py"
    spec = importlib.util.spec_from_file_location("make_sample_dataset", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    coco = mod.build(tmp_path / "rebuilt")
    committed = json.loads((SAMPLE / "annotations.json").read_text(encoding="utf-8"))
    assert coco == committed
    for im in committed["images"]:
        assert (tmp_path / "rebuilt" / im["file_name"]).stat().st_size > 0
