"""`probench import mot`: MOT Challenge sequences + a prompts table as a sequence dataset."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from probench.cli import main
from probench.data.dataset import load_dataset


def _sequence(root: Path, name: str, n: int, gt: list[str]) -> None:
    seq = root / name
    (seq / "img1").mkdir(parents=True)
    (seq / "gt").mkdir()
    (seq / "seqinfo.ini").write_text(
        f"[Sequence]\nname={name}\nimDir=img1\nframeRate=5\nseqLength={n}\n"
        "imWidth=64\nimHeight=48\nimExt=.jpg\n"
    )
    for f in range(1, n + 1):
        cv2.imwrite(str(seq / "img1" / f"{f:06d}.jpg"), np.full((48, 64, 3), 20 * f, np.uint8))
    (seq / "gt" / "gt.txt").write_text("\n".join(gt) + "\n")


@pytest.fixture
def mot(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "MOT"
    # track 1 walks in from the left edge (clipped), track 2 is hidden on frame 3 (visibility 0.1),
    # a conf-0 row (not considered) and a class-7 row of track 3
    gt = [f"{f},1,{-10 + 8 * f},5,20,30,1,1,1.0" for f in range(1, 7)]
    gt += [f"{f},2,30,10,15,20,1,1,{0.1 if f == 3 else 0.9}" for f in range(1, 7)]
    gt += ["2,3,1,1,5,5,0,1,1.0", "4,3,40,20,10,10,1,7,1.0"]
    _sequence(root, "SEQ-01", 6, gt)
    _sequence(root, "SEQ-02", 4, [f"{f},5,2,2,30,30,1,1,1.0" for f in range(1, 5)])
    table = tmp_path / "prompts.csv"
    table.write_text(
        "sequence,track_id,orig,cat,prompt_types,coref,start_frame\n"
        "SEQ-01,1,the person entering from the left,person,relational,orig;tmpl,\n"
        "SEQ-01,2,the person standing still,person,state,,4\n"
        "SEQ-02,5,the big box,box,,,\n"
    )
    return root, table


def test_import_mot(mot: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root, table = mot
    out = tmp_path / "ds"
    assert (
        main(
            [
                "import",
                "mot",
                "--root",
                str(root),
                "--prompts",
                str(table),
                "--out",
                str(out),
                "--min-visibility",
                "0.5",
            ]
        )
        == 0
    )
    assert "10 images, 3 queries" in capsys.readouterr().out
    ds = load_dataset(out)  # valid, with its image files (symbolic links)
    v1, v2 = ds.videos[1], ds.videos[2]
    assert v1.name == "SEQ-01" and len(v1) == 6 and len(v2) == 4 and v1.timestamps[1] == pytest.approx(0.2)
    (change,) = v1.prompt_changes
    assert change.frame_index == 3 and change.query_ids == (2,)
    assert ds.label_space(v1.image_ids[0]) == (1,) and ds.label_space(v1.image_ids[3]) == (2,)
    q1 = [a for a in ds.annotations if a.query_id == 1]
    assert len(q1) == 3 and q1[0].bbox == (0.0, 5.0, 18.0, 30.0)  # frames 1-3, clipped at the left edge
    assert {a.image_id % 1_000_000 for a in ds.annotations if a.query_id == 2} == {4, 5, 6}
    assert len({a.track_id for a in ds.annotations}) == 3
    assert ds.queries[1].coref == ("orig", "tmpl") and ds.queries[1].prompts["tmpl"].startswith("a photo of")
    assert ds.read_image(v2.image_ids[0]).shape == (48, 64, 3)


def test_import_mot_names_every_problem(
    mot: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    root, table = mot
    table.write_text(
        "sequence,track_id,orig,start_frame\nSEQ-01,9,nobody,\nSEQ-03,1,x,\nSEQ-02,5,y,3\nSEQ-01,one,z,\n"
    )
    (root / "SEQ-01" / "gt" / "gt.txt").write_text("1,1,2,2,5,5,1,1,1\n7,1,2,2,5,5,1,1,1\nbad line\n")
    assert (
        main(["import", "mot", "--root", str(root), "--prompts", str(table), "--out", str(tmp_path / "ds")])
        == 1
    )
    lines = capsys.readouterr().out.splitlines()
    assert "prompts.csv line 5: 'track_id' and 'start_frame' must be integers" in lines
    assert "prompts.csv line 3: no sequence folder 'SEQ-03' under " + str(root) in lines
    assert (
        "prompts.csv: sequence 'SEQ-02' has no prompt set from frame 1 (its first start_frame is 3)" in lines
    )
    assert "SEQ-01/gt/gt.txt line 2: frame 7 is not in 1..6 (seqLength)" in lines
    assert any(line.startswith("SEQ-01/gt/gt.txt line 3: expected 'frame, id") for line in lines)
    assert "prompts.csv line 2: sequence 'SEQ-01' has no considered gt track 9" in lines
    assert not (tmp_path / "ds").exists()


def test_import_mot_bad_arguments(mot: tuple[Path, Path], tmp_path: Path) -> None:
    root, table = mot
    assert (
        main(
            [
                "import",
                "mot",
                "--root",
                str(tmp_path / "nope"),
                "--prompts",
                str(table),
                "--out",
                str(tmp_path / "ds"),
            ]
        )
        == 2
    )
    table.write_text("sequence,track,orig\n")
    assert (
        main(["import", "mot", "--root", str(root), "--prompts", str(table), "--out", str(tmp_path / "ds")])
        == 1
    )
