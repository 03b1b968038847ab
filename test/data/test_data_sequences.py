"""Sequence datasets: the optional video fields, their checks, the generator and the sample."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from probench.data.dataset import Dataset, load_dataset
from probench.data.sequences import PromptChange
from probench.data.synthetic_sequences import render_frame, sequence_coco, sequence_scene, visible_box
from probench.data.validate import validate_coco


def _video(
    n: int = 4, *, vid: int = 1, qids: list[int] | None = None, first_id: int = 1
) -> list[dict[str, Any]]:
    return [
        {
            "id": first_id + k,
            "file_name": f"f{first_id + k}.jpg",
            "width": 100,
            "height": 80,
            "video_id": vid,
            "frame_index": k,
            "timestamp": k / 10,
            "query_ids": list(qids or [1]),
        }
        for k in range(n)
    ]


def _coco(
    images: list[dict[str, Any]],
    annotations: list[dict[str, Any]] | None = None,
    videos: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "images": images,
        "categories": [
            {"id": 1, "name": "cup", "prompts": {"orig": "the red cup"}},
            {"id": 2, "name": "box", "prompts": {"orig": "the blue box"}},
        ],
        "annotations": annotations
        if annotations is not None
        else [
            {"id": 1 + k, "image_id": im["id"], "category_id": 1, "bbox": [10, 10, 20, 20], "track_id": 7}
            for k, im in enumerate(images)
        ],
    }
    if videos is not None:
        out["videos"] = videos
    return out


def _one(problems: list[str], *needles: str) -> None:
    assert len(problems) == 1, problems
    for n in needles:
        assert n in problems[0], problems


def test_a_clean_sequence_dataset_and_its_videos() -> None:
    coco = _coco(_video(4) + _video(3, vid=2, first_id=10, qids=[2]), videos=[{"id": 1, "name": "one"}])
    coco["annotations"] = [a for a in coco["annotations"] if a["image_id"] < 10]
    assert validate_coco(coco) == []
    ds = Dataset.from_dict(coco)
    assert list(ds.videos) == [1, 2]
    assert ds.videos[1].image_ids == (1, 2, 3, 4) and ds.videos[1].name == "one"
    assert ds.videos[2].name == "video 2" and ds.videos[2].timestamps == (0.0, 0.1, 0.2)
    assert ds.images[3].frame_index == 2 and ds.images[3].video_id == 1
    assert {a.track_id for a in ds.annotations} == {7}


def test_frames_must_be_unique_and_consecutive() -> None:
    ims = _video(4)
    ims[2]["frame_index"] = 1
    problems = validate_coco(_coco(ims))
    assert any("frame_index 1 is given twice (image 2 and image 3)" in p for p in problems), problems
    ims = _video(4)
    ims[3]["frame_index"] = 5
    _one(validate_coco(_coco(ims)), "video 1", "frame 3 is missing")
    ims = _video(2)
    del ims[1]["video_id"]
    _one(validate_coco(_coco(ims)), "image 2", "needs both 'video_id' and 'frame_index'")
    ims = _video(2)
    ims[1]["frame_index"] = -1
    assert any("'frame_index' must be a non-negative integer" in p for p in validate_coco(_coco(ims)))


def test_timestamps_increase() -> None:
    ims = _video(3)
    ims[2]["timestamp"] = 0.05
    _one(validate_coco(_coco(ims)), "video 1", "timestamps must increase")
    ims = _video(3)
    del ims[1]["timestamp"]
    _one(validate_coco(_coco(ims)), "'timestamp' is given on some frames only (2 of 3)")
    plain = _coco([{"id": 1, "file_name": "a.jpg", "width": 10, "height": 10, "timestamp": 1.0}], [])
    assert validate_coco(plain) == []  # not a sequence dataset: an unknown key, ignored as before


def test_a_track_is_in_one_video_under_one_query() -> None:
    coco = _coco(_video(2) + _video(2, vid=2, first_id=10))
    _one(validate_coco(coco), "track 7 is in video 2 and in video 1", "a track belongs to one video")
    coco = _coco(_video(2, qids=[1, 2]))
    coco["annotations"][1]["category_id"] = 2
    _one(validate_coco(coco), "annotation 2", "track 7 is under query 2 here and under query 1")
    coco = _coco(_video(2))
    coco["annotations"].append(
        {"id": 9, "image_id": 1, "category_id": 1, "bbox": [0, 0, 5, 5], "track_id": 7}
    )
    _one(validate_coco(coco), "annotation 9", "track 7 has two boxes on image 1")
    coco = _coco(_video(2))
    coco["annotations"][0]["track_id"] = "7"
    _one(validate_coco(coco), "annotation 1", "'track_id' must be an integer")
    plain = _coco([{"id": 1, "file_name": "a.jpg", "width": 100, "height": 80, "video_id": None}])
    _one(validate_coco(plain), "annotation 1", "not a frame of a video")


def test_query_ids_are_explicit_and_constant_unless_a_prompt_change_says() -> None:
    ims = _video(4)
    ims[2]["query_ids"] = [1, 2]
    _one(validate_coco(_coco(ims)), "image 3", "no prompt change is at this frame")
    ims = _video(3)
    del ims[1]["query_ids"]
    _one(validate_coco(_coco(ims)), "image 2", "needs an explicit 'query_ids'")
    # a prompt change at frame 2: from there on the set is [2]
    ims = _video(4)
    for im in ims[2:]:
        im["query_ids"] = [2]
    coco = _coco(ims, videos=[{"id": 1, "prompt_changes": [{"frame_index": 2, "query_ids": [2]}]}])
    coco["annotations"] = coco["annotations"][:2]
    assert validate_coco(coco) == []
    assert Dataset.from_dict(coco).videos[1].prompt_changes == (PromptChange(2, (2,)),)
    # ... and the frames must follow it
    coco["videos"][0]["prompt_changes"][0]["frame_index"] = 3
    _one(validate_coco(coco), "image 3", "differ from its video's")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            {"frame_index": 0, "query_ids": [2]},
            "'frame_index' must be an integer from 1 to the video's last frame",
        ),
        ({"frame_index": 9, "query_ids": [2]}, "'frame_index' must be an integer from 1"),
        ({"frame_index": 2, "query_ids": []}, "'query_ids' must be a non-empty list"),
        ({"frame_index": 2, "query_ids": [5]}, "names unknown query 5"),
        ("x", "must be an object {frame_index, query_ids}"),
    ],
)
def test_bad_prompt_changes(change: object, needle: str) -> None:
    ims = _video(4)
    problems = validate_coco(_coco(ims, videos=[{"id": 1, "prompt_changes": [change]}]))
    assert problems and needle in problems[0], problems


def test_bad_videos_list() -> None:
    _one(validate_coco(_coco(_video(2), videos=[{"id": 3}, {"id": 1}])), "video 3: no image has 'video_id' 3")
    _one(validate_coco(_coco(_video(2), videos={"id": 1})), "'videos' must be a list")  # type: ignore[arg-type]
    _one(validate_coco(_coco(_video(2), videos=[{"id": 1}, {"id": 1}])), "video 1: listed twice")


def test_a_plain_dataset_is_unchanged(repo_root: Path) -> None:
    """No video fields: no checks, no videos, and the hash of the file's canonical JSON."""
    ds = load_dataset(repo_root / "datasets" / "probench-sample")
    assert ds.videos == {}
    raw = json.loads((repo_root / "datasets" / "probench-sample" / "annotations.json").read_text())
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()
    assert ds.content_hash == "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert all(im.video_id is None for im in ds.images.values())


def test_the_generator_is_deterministic_and_has_what_it_promises() -> None:
    coco = sequence_coco(2, 40)
    assert coco == sequence_coco(2, 40) and coco != sequence_coco(2, 40, seed=1)
    assert validate_coco(coco) == []
    ds = Dataset.from_dict(copy.deepcopy(coco))
    (change,) = ds.videos[1].prompt_changes
    assert 20 <= change.frame_index < 39
    for vid, video in ds.videos.items():
        tracks: dict[int, set[int]] = {}
        for k, iid in enumerate(video.image_ids):
            for a in ds.annotations_by_image[iid]:
                tracks.setdefault(int(a.track_id or 0), set()).add(k)
        for frames in tracks.values():  # each target is lost for a while (occluded or out of the image)
            assert len(frames) < max(frames) - min(frames) + 1, (vid, sorted(frames))
    assert {q.coref for q in ds.queries.values()} == {("orig", "tmpl"), ("orig", "cat", "tmpl")}
    # why a target is not visible: behind the pillar (inside the image) or out of the image
    hidden, left = 0, 0
    for v in (0, 1):
        scene = sequence_scene(v, n_frames=40)
        for obj in scene.objects[:2]:
            for f in range(40):
                if visible_box(scene, obj, f) is None:
                    x, _ = obj.corner(f)
                    inside = x >= 0 and x + obj.size <= scene.width
                    hidden += inside
                    left += x + obj.size <= 0 or x >= scene.width
    assert hidden > 0 and left > 0


def test_the_committed_sample_is_up_to_date(repo_root: Path) -> None:
    """datasets/probench-sequences is scripts/make_sample_sequences.py's output."""
    folder = repo_root / "datasets" / "probench-sequences"
    committed = json.loads((folder / "annotations.json").read_text())
    assert committed == sequence_coco(4, 60, fps=10.0), (
        "rebuild it: see datasets/probench-sequences/README.md"
    )
    ds = load_dataset(folder)
    assert len(ds.images) == 240 and len(ds.videos) == 4
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert total < 1_500_000  # stays small
    for vid in (1, 3):  # JPEG frames of the rendering (JPEG's loss only)
        scene = sequence_scene(vid - 1, n_frames=60)
        for k in (0, 31, 59):
            pix = ds.read_image(ds.videos[vid].image_ids[k]).astype(float)
            assert np.abs(pix - render_frame(scene, k)).mean() < 4.0
