"""`probench import mot`: MOT Challenge sequences + a prompts table as a sequence dataset."""

from __future__ import annotations

import os
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


# -- the reader rule and the hostile cases (issue 38): every input of the import is read
# through the bounded reader, never through a link out of --root, never blocking; every bad
# row is a named problem; a linked import is valid as written.
def _import(root: Path, table: Path, out: Path, *extra: str) -> int:
    return main(["import", "mot", "--root", str(root), "--prompts", str(table), "--out", str(out), *extra])


def _one_line_error(capsys: pytest.CaptureFixture, *words: str) -> str:
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    assert "root:x" not in out + err  # never an echo of a refused file's content
    return err


@pytest.mark.parametrize("name", ["gt/gt.txt", "seqinfo.ini"])
def test_a_link_out_of_root_is_not_read(mot: tuple[Path, Path], tmp_path: Path, capsys, name: str) -> None:
    root, table = mot
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/bin/false\n")
    target = root / "SEQ-01" / name
    target.unlink()
    target.symlink_to(secret)
    assert _import(root, table, tmp_path / "ds") == 1
    _one_line_error(capsys, "link out of --root")
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("name", ["gt/gt.txt", "seqinfo.ini", "prompts"])
def test_a_fifo_input_is_refused_at_once(mot: tuple[Path, Path], tmp_path: Path, capsys, name: str) -> None:
    from helpers.hostile import returns_within

    root, table = mot
    path = table if name == "prompts" else root / "SEQ-01" / name
    path.unlink()
    os.mkfifo(path)
    assert returns_within(lambda: _import(root, table, tmp_path / "ds")) == 1
    _one_line_error(capsys, "not a regular file")


def test_a_declared_length_is_bounded_by_the_frames_on_disk(mot: tuple[Path, Path], tmp_path: Path,
                                                           capsys) -> None:
    """A 120-byte seqinfo.ini with seqLength=1000000000 reached 4.2 GB in 30 s; now it is
    refused from the frames folder's listing, allocating nothing per declared frame."""
    import tracemalloc

    root, table = mot
    ini = root / "SEQ-01" / "seqinfo.ini"
    ini.write_text("[Sequence]\nname=SEQ-01\nimDir=img1\nframeRate=5\nseqLength=1000000000\n"
                   "imWidth=64\nimHeight=48\nimExt=.jpg\n")
    assert len(ini.read_bytes()) < 130
    tracemalloc.start()
    try:
        assert _import(root, table, tmp_path / "ds") == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _one_line_error(capsys, "seqLength is 1000000000", "holds 6 file(s)")
    assert peak < 20 * 2**20, peak  # the whole import's peak, in bytes: no per-frame record was built


GT_PROBLEMS = [
    ("1,1,2,2\n", "line 1: expected 'frame, id, x, y, w, h, conf[, class, visibility]', got 4 column(s)"),
    ("3.9,1,2,2,5,5,1,1,1\n", "line 1: frame and id must be whole numbers, got '3.9' and '1'"),
    ("3,1.5,2,2,5,5,1,1,1\n", "line 1: frame and id must be whole numbers, got '3' and '1.5'"),
]


@pytest.mark.parametrize(("gt", "problem"), GT_PROBLEMS, ids=["too few columns", "frame 3.9", "id 1.5"])
def test_bad_gt_rows_are_named(mot: tuple[Path, Path], tmp_path: Path, capsys, gt: str, problem: str) -> None:
    root, table = mot
    rows = "".join(f"{f},5,2,2,30,30,1,1,1.0\n" for f in range(1, 5))
    (root / "SEQ-02" / "gt" / "gt.txt").write_text(gt + rows)
    assert _import(root, table, tmp_path / "ds") == 1
    assert f"SEQ-02/gt/gt.txt {problem}" in capsys.readouterr().out.splitlines()
    assert not (tmp_path / "ds").exists()


def test_a_whole_float_frame_is_that_frame(mot: tuple[Path, Path], tmp_path: Path) -> None:
    root, table = mot
    rows = "".join(f"{f}.0,5.0,2,2,30,30,1,1,1.0\n" for f in range(1, 5))
    (root / "SEQ-02" / "gt" / "gt.txt").write_text(rows)
    assert _import(root, table, tmp_path / "ds") == 0
    ds = load_dataset(tmp_path / "ds")
    assert sorted(a.image_id % 1_000_000 for a in ds.annotations if a.query_id == 3) == [1, 2, 3, 4]


def test_text_that_is_not_utf8_or_a_huge_cell_is_one_line(mot: tuple[Path, Path], tmp_path: Path,
                                                          capsys) -> None:
    root, table = mot
    gt = root / "SEQ-02" / "gt" / "gt.txt"
    gt.write_bytes(b"1,5,2,2,30,30,1,1,1.0\n2,5,2,2,30,30,1,1,1.0 # caf\xe9\n")
    assert _import(root, table, tmp_path / "ds") == 1
    _one_line_error(capsys, "gt.txt", "not UTF-8 text (byte")
    gt.write_text("".join(f"{f},5,2,2,30,30,1,1,1.0\n" for f in range(1, 5)))
    table.write_text("sequence,track_id,orig\nSEQ-02,5," + "x" * 300_000 + "\n")
    assert _import(root, table, tmp_path / "ds") == 1
    _one_line_error(capsys, "prompts.csv line 2", "not a readable CSV row")


def test_a_linked_import_is_valid_and_its_sizes_are_checked(mot: tuple[Path, Path], tmp_path: Path,
                                                           capsys) -> None:
    root, table = mot
    assert _import(root, table, tmp_path / "ds") == 0  # linked (the default)
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "ds")]) == 0, capsys.readouterr()
    ini = root / "SEQ-02" / "seqinfo.ini"
    ini.write_text(ini.read_text().replace("imWidth=64", "imWidth=65"))
    assert _import(root, table, tmp_path / "ds2") == 1
    lines = capsys.readouterr().out.splitlines()
    wrong = "declared 65x48, but the file 'SEQ-02/img1/000001.jpg' is 64x48"
    assert any(wrong in line for line in lines), lines
    assert not (tmp_path / "ds2").exists()


def test_an_out_that_is_a_link_or_in_a_run_folder_is_refused(mot: tuple[Path, Path], tmp_path: Path,
                                                            capsys) -> None:
    root, table = mot
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "link").symlink_to(victim)
    assert _import(root, table, tmp_path / "link") == 2
    _one_line_error(capsys, "symbolic link")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    assert _import(root, table, tmp_path / "run" / "ds") == 2
    _one_line_error(capsys, "inside the run folder")
    assert list(victim.iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["run.json"]
