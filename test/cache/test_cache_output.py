"""The writer rule (probench.cache.output) for every output path a user names, one row per
command and case of the hostile sweep (issue 38): no link followed that the command did not
make, nothing written inside a run folder but by the run's own writer, no previous result
replaced without --overwrite (a report replaced whole), never a FIFO, device or folder in a
file's place, never a blocking open. Each refusal is exit 2 with one line, and what was
there is unchanged byte for byte."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.hostile import returns_within
from probench.cache.output import (
    OutputLinkError,
    OutputNotRegularError,
    OutputPathError,
    StagedFolder,
    check_output_file,
    check_output_folder,
    open_appendable,
    run_folder_of,
    write_output_bytes,
)
from probench.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links not followed) by relative path, with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _main(args: list[str], seconds: float = 120.0) -> object:
    """``main(args)``; a command that blocks on a path fails the test instead of hanging it."""
    return returns_within(lambda: main(args), seconds)


def _refused(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    return err


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two scored runs of the sample (test-instant), made by probench itself: RUNS/a, RUNS/b."""
    root = tmp_path_factory.mktemp("runs")
    for name in ("a", "b"):
        assert (
            main(["infer", "--model", "test-instant", "--dataset", str(SAMPLE), "--out", str(root / name)])
            == 0
        )
        assert (
            main(
                [
                    "score",
                    "--dataset",
                    str(SAMPLE),
                    "--run",
                    str(root / name),
                    "--bootstrap",
                    "0",
                    "--no-errors",
                    "--quiet",
                ]
            )
            == 0
        )
    return root


@pytest.fixture
def work(runs: Path, tmp_path: Path) -> Path:
    """A private copy of the two runs, in tmp_path (a, b), and an empty folder ``victim``."""
    for name in ("a", "b"):
        shutil.copytree(runs / name, tmp_path / name)
    (tmp_path / "victim").mkdir()
    return tmp_path


def _score(run: Path, *extra: str) -> list[str]:
    return [
        "score",
        "--dataset",
        str(SAMPLE),
        "--run",
        str(run),
        "--bootstrap",
        "0",
        "--no-errors",
        "--quiet",
        *extra,
    ]


# -- 1. never through a link the command did not make -----------------------------------------
# (command, whether --out names a folder (the link points at ``victim``) or a file (at victim/f))
LINKED: list[tuple[str, Callable[[Path, Path], list[str]], bool]] = [
    ("report", lambda w, out: ["report", str(w / "a"), "--out", str(out)], True),
    ("report --overwrite", lambda w, out: ["report", str(w / "a"), "--out", str(out), "--overwrite"], True),
    ("score", lambda w, out: _score(w / "a", "--out", str(out), "--overwrite"), False),
    (
        "compare",
        lambda w, out: [
            "compare",
            str(w / "a"),
            str(w / "b"),
            "--bootstrap",
            "0",
            "--out",
            str(out),
            "--overwrite",
        ],
        False,
    ),
    ("profile", lambda w, out: ["profile", str(w / "a"), "--out", str(out), "--overwrite"], False),
    (
        "infer",
        lambda w, out: ["infer", "--model", "test-instant", "--dataset", str(SAMPLE), "--out", str(out)],
        True,
    ),
    (
        "latency",
        lambda w, out: [
            "latency",
            "--model",
            "test-instant",
            "--dataset",
            str(SAMPLE),
            "--images",
            "2",
            "--warmup",
            "0",
            "--runs",
            "1",
            "--out",
            str(out),
        ],
        True,
    ),
    (
        "sweep",
        lambda w, out: ["sweep", "--models", "test-instant", "--dataset", str(SAMPLE), "--out", str(out)],
        True,
    ),
    ("bag", lambda w, out: ["bag", "--dataset", str(SAMPLE), "--out", str(out), "--quiet"], True),
    (  # refused before any node starts
        "eval",
        lambda w, out: [
            "eval",
            "--model",
            "test-instant",
            "--bag",
            str(SAMPLE.parents[1] / "bags" / "probench-sample"),
            "--out",
            str(out),
        ],
        True,
    ),
]


@pytest.mark.parametrize(("name", "args", "folder"), LINKED, ids=[row[0] for row in LINKED])
def test_an_out_that_is_a_link_is_never_written_through(
    work: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    args: Callable[[Path, Path], list[str]],
    folder: bool,
) -> None:
    victim = work / "victim"
    if not folder:
        (victim / "f").write_bytes(b"precious")
    link = work / "link"
    link.symlink_to(victim if folder else victim / "f")
    before = _snapshot(victim)
    assert _main(args(work, link)) == 2
    _refused(capsys, str(link))
    assert _snapshot(victim) == before and sorted(p.name for p in victim.iterdir()) == sorted(before)


def test_ground_out_video_and_jsonl_that_are_links_are_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.camera_bags import write_camera_bag

    bag = write_camera_bag(work / "bag", n=2)
    (work / "victim" / "f").write_bytes(b"precious")
    link = work / "link"
    link.symlink_to(work / "victim")
    base = ["ground", "--bag", str(bag), "--model", "test-instant", "--prompt", "a cup", "--no-progress"]
    for extra in (["--out", str(link)], ["--out", str(work / "o"), "--jsonl", str(link / "f")]):
        file_link = work / "file_link"
        file_link.unlink(missing_ok=True)
        file_link.symlink_to(work / "victim" / "f")
        args = (
            [*base, *extra]
            if "--jsonl" not in extra
            else [*base, "--out", str(work / "o"), "--jsonl", str(file_link), "--overwrite"]
        )
        assert _main(args) == 2
        _refused(capsys, "symbolic link")
    assert _snapshot(work / "victim") == {"f": b"precious"} and not (work / "o").exists()


# -- 2. never inside a run folder but through the run's own writer ------------------------------
INSIDE: list[tuple[str, Callable[[Path], list[str]]]] = [
    (
        "compare --out B/run.json",
        lambda w: [
            "compare",
            str(w / "a"),
            str(w / "b"),
            "--bootstrap",
            "0",
            "--out",
            str(w / "b" / "run.json"),
            "--overwrite",
        ],
    ),
    (
        "compare --out A/metrics.json",
        lambda w: [
            "compare",
            str(w / "a"),
            str(w / "b"),
            "--bootstrap",
            "0",
            "--out",
            str(w / "a" / "metrics.json"),
            "--overwrite",
        ],
    ),
    (
        "score --out RUN/run.json",
        lambda w: _score(w / "a", "--out", str(w / "a" / "run.json"), "--overwrite"),
    ),
    (
        "score --out RUN/predictions/orig.json",
        lambda w: _score(w / "a", "--out", str(w / "a" / "predictions" / "orig.json"), "--overwrite"),
    ),
    (
        "score --out OTHER_RUN/metrics.json",
        lambda w: _score(w / "a", "--out", str(w / "b" / "metrics.json"), "--overwrite"),
    ),
    (
        "profile RUN --out RUN/metrics.json",
        lambda w: ["profile", str(w / "a"), "--out", str(w / "a" / "metrics.json"), "--overwrite"],
    ),
    ("report RUN --out RUN/report", lambda w: ["report", str(w / "a"), "--out", str(w / "a" / "report")]),
    ("report RUN --out RUN", lambda w: ["report", str(w / "a"), "--out", str(w / "a"), "--overwrite"]),
    (
        "infer --out RUN/inner",
        lambda w: [
            "infer",
            "--model",
            "test-instant",
            "--dataset",
            str(SAMPLE),
            "--out",
            str(w / "a" / "predictions" / "inner"),
        ],
    ),
    (
        "bag --out RUN/bag",
        lambda w: ["bag", "--dataset", str(SAMPLE), "--out", str(w / "a" / "bag"), "--quiet"],
    ),
]


@pytest.mark.parametrize(("name", "args"), INSIDE, ids=[row[0] for row in INSIDE])
def test_nothing_is_written_inside_a_run_folder_but_by_its_own_writer(
    work: Path, capsys: pytest.CaptureFixture[str], name: str, args: Callable[[Path], list[str]]
) -> None:
    before = {run: _snapshot(work / run) for run in ("a", "b")}
    assert _main(args(work)) == 2
    _refused(capsys, "inside the run folder")
    assert {run: _snapshot(work / run) for run in ("a", "b")} == before
    assert _main(_score(work / "a")) == 0  # the run still scores


def test_the_runs_own_metrics_are_rewritten_by_score(work: Path) -> None:
    metrics = work / "a" / "metrics.json"
    metrics.write_text("{}")
    assert _main(_score(work / "a")) == 0 and metrics.read_text() != "{}"
    metrics.write_text("{}")
    assert _main(_score(work / "a", "--out", str(metrics))) == 0 and metrics.read_text() != "{}"


# -- 3. never over a previous result without --overwrite; a report replaced whole --------------
def test_a_report_is_replaced_only_with_overwrite_and_whole(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = work / "report"
    assert _main(["report", str(work / "a"), "--out", str(out)]) == 0
    (out / "fig_failures_2.png").write_bytes(b"a stale gallery of an earlier report")
    before = _snapshot(out)
    capsys.readouterr()
    assert _main(["report", str(work / "a"), "--out", str(out)]) == 2
    _refused(capsys, "exists already", "--overwrite")
    assert _snapshot(out) == before
    assert _main(["report", str(work / "a"), "--out", str(out), "--overwrite"]) == 0
    assert (out / "report.md").is_file() and not (out / "fig_failures_2.png").exists()
    assert not [p for p in work.iterdir() if p.name.startswith(".report.partial-")]  # no stage left


def test_a_folder_that_is_not_a_report_is_never_replaced(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = work / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("x")
    assert _main(["report", str(work / "a"), "--out", str(mine), "--overwrite"]) == 2
    _refused(capsys, "not a report folder", "not replaced")
    assert _snapshot(mine) == {"thesis.tex": b"x"}


EXISTING: list[tuple[str, Callable[[Path, Path], list[str]]]] = [
    ("score", lambda w, out: _score(w / "a", "--out", str(out))),
    (
        "compare",
        lambda w, out: ["compare", str(w / "a"), str(w / "b"), "--bootstrap", "0", "--out", str(out)],
    ),
    ("profile", lambda w, out: ["profile", str(w / "a"), "--out", str(out)]),
]


@pytest.mark.parametrize(("name", "args"), EXISTING, ids=[row[0] for row in EXISTING])
def test_an_existing_file_is_replaced_only_with_overwrite(
    work: Path, capsys: pytest.CaptureFixture[str], name: str, args: Callable[[Path, Path], list[str]]
) -> None:
    out = work / "victim" / "result.json"
    out.write_bytes(b"an earlier result")
    assert _main(args(work, out)) == 2
    _refused(capsys, "exists already", "--overwrite")
    assert out.read_bytes() == b"an earlier result"
    assert _main([*args(work, out), "--overwrite"]) == 0
    assert out.read_bytes() != b"an earlier result"


# -- 4. never a FIFO, device or folder in a file's place; never a blocking open ----------------
@pytest.mark.parametrize(("name", "args"), EXISTING, ids=[row[0] for row in EXISTING])
@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_an_out_that_is_not_a_regular_file_is_refused_at_once(
    work: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    args: Callable[[Path, Path], list[str]],
    kind: str,
) -> None:
    out = work / "victim" / "out"
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "device":
        out = Path("/dev/null")
    else:
        out.mkdir()
    assert _main([*args(work, out), "--overwrite"], seconds=60) == 2  # a FIFO without a reader: no wait
    _refused(capsys, str(out), "folder" if kind == "folder" else "not a regular file")
    if kind == "fifo":
        assert os.path.exists(out) and not out.is_file()  # still the FIFO, nothing renamed over it


def test_a_report_out_that_is_a_fifo_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "fifo"
    os.mkfifo(out)
    assert _main(["report", str(work / "a"), "--out", str(out), "--overwrite"], seconds=60) == 2
    _refused(capsys, "not a folder")


# -- the module itself ----------------------------------------------------------------------
def test_the_rule_in_one_place(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    assert run_folder_of(tmp_path / "run" / "predictions" / "x.json") == (tmp_path / "run").resolve()
    assert run_folder_of(tmp_path / "elsewhere") is None
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "run")  # a link into a run folder is still inside it
    with pytest.raises(OutputPathError, match="inside the run folder"):
        check_output_file(link / "f.json")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputLinkError):
        write_output_bytes(dangling, b"x", overwrite=True)
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(OutputNotRegularError, match="is a folder"):
        check_output_file(tmp_path, overwrite=True)
    p = write_output_bytes(tmp_path / "new" / "f.json", b"1")
    assert p.read_bytes() == b"1"
    with pytest.raises(OutputPathError, match="exists already"):
        write_output_bytes(p, b"2")
    assert write_output_bytes(p, b"2", overwrite=True).read_bytes() == b"2"
    with pytest.raises(OutputPathError, match="exists already and is not a thing folder"):
        check_output_folder(tmp_path, what="thing", is_previous=lambda _: False, overwrite=True)


def test_a_staged_folder_is_moved_whole_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "out"

    def is_mine(p: Path) -> bool:
        return (p / "mark").is_file()

    staged = StagedFolder(out, what="thing", is_previous=is_mine)
    staged.path.mkdir()
    (staged.path / "mark").write_text("1")
    (staged.path / "old-only").write_text("x")
    assert staged.commit() == out and sorted(p.name for p in out.iterdir()) == ["mark", "old-only"]
    with pytest.raises(OutputPathError, match="exists already"):
        StagedFolder(out, what="thing", is_previous=is_mine)
    again = StagedFolder(out, what="thing", is_previous=is_mine, overwrite=True)
    again.path.mkdir()
    (again.path / "mark").write_text("2")
    again.abort()  # a failure half way: the old result stays
    assert (out / "mark").read_text() == "1"
    again = StagedFolder(out, what="thing", is_previous=is_mine, overwrite=True)
    again.path.mkdir()
    (again.path / "mark").write_text("2")
    again.commit()
    assert sorted(p.name for p in out.iterdir()) == ["mark"] and (out / "mark").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


HEADER = b'{"probench_thing": 1}\n'


def test_an_appendable_file_is_created_new_or_one_of_ours(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    fd = open_appendable(path, HEADER)
    os.write(fd, b'{"a": 1}\n')
    os.close(fd)
    fd = open_appendable(path, HEADER)  # ours: appended to
    os.write(fd, b'{"a": 2}\n')
    os.close(fd)
    assert path.read_bytes() == HEADER + b'{"a": 1}\n{"a": 2}\n'
    other = tmp_path / "notes.txt"
    other.write_bytes(b"root:x:0:0\n")
    empty = tmp_path / "empty"
    empty.touch()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    for bad, why in (
        (other, "is not a probench"),
        (empty, "is not a probench"),
        (fifo, "not a regular file"),
        (link, "symbolic link"),
        (Path("/dev/null"), "not a regular file"),
        (tmp_path / "run" / "t.jsonl", "inside the run folder"),
        (tmp_path / "no" / "t.jsonl", "not an existing folder"),
    ):
        with pytest.raises(OutputPathError, match=why):
            open_appendable(bad, HEADER, flag="trace_file")
    assert other.read_bytes() == b"root:x:0:0\n" and empty.read_bytes() == b""
    assert path.read_bytes() == HEADER + b'{"a": 1}\n{"a": 2}\n'
