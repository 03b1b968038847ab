"""The bounded reader of files a user names (probench.files): regular files only (a FIFO
never hangs, a device is never read), a size cap checked before reading and while reading,
the JSON nesting cap, symbolic links refused where asked; every failure one line naming
the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from probench import files
from probench.errors import CheckFailed
from probench.files import UserFileError, open_user_file, read_user_bytes, read_user_json
from probench.jsonio import MAX_JSON_DEPTH, json_depth, loads


def _one_line(exc: pytest.ExceptionInfo[BaseException], path: Path) -> str:
    text = str(exc.value)
    assert "\n" not in text and str(path) in text, text
    return text


def test_a_regular_json_file_is_read(tmp_path: Path) -> None:
    p = tmp_path / "a.json"
    p.write_text('{"a": [1, 2.5, NaN]}')
    data = read_user_json(p)
    assert data["a"][:2] == [1, 2.5]
    assert issubclass(UserFileError, CheckFailed)


def test_a_fifo_is_refused_at_once_without_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "profile.json"
    os.mkfifo(fifo)
    done: list[BaseException] = []

    def read() -> None:
        try:
            read_user_json(fifo, what="profile")
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            done.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(20.0)  # a blocking open would never return: no writer ever comes
    if t.is_alive():  # unblock the reader so the test process can end
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("reading a FIFO hung")
    assert isinstance(done[0], UserFileError)
    assert "not a regular file" in str(done[0]) and str(fifo) in str(done[0])


def test_a_link_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "annotations.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(UserFileError) as exc:
        read_user_bytes(link, what="dataset", kind="annotations")
    assert "not a regular file" in _one_line(exc, link)


def test_a_folder_and_a_missing_file_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserFileError, match="is a folder") as exc:
        read_user_bytes(tmp_path)
    _one_line(exc, tmp_path)
    with pytest.raises(UserFileError, match="no such file") as exc:
        read_user_bytes(tmp_path / "nope.json")


def test_the_size_cap_refuses_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(files.SIZE_CAPS, "small", 100)
    p = tmp_path / "big.json"
    p.write_bytes(b" " * 101)
    with pytest.raises(UserFileError, match="over the 100 bytes limit") as exc:
        read_user_bytes(p)
    _one_line(exc, p)
    p.write_bytes(b" " * 99 + b"1")
    assert read_user_json(p) == 1  # at the cap: read


def test_a_file_growing_while_read_is_cut_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(files.SIZE_CAPS, "csv", 1000)
    p = tmp_path / "grow.csv"
    p.write_bytes(b"a" * 10)
    with open_user_file(p, kind="csv") as fh:
        p.write_bytes(b"a" * 5000)  # after the size check: as a writer appending meanwhile would
        with pytest.raises(UserFileError, match="grew past"):
            fh.read()
    monkeypatch.setitem(files.SIZE_CAPS, "csv", 1 << 40)
    with open_user_file(p, kind="csv") as fh:  # asking for 2**62 bytes (a pickle's length field)
        assert len(fh.read(1 << 62)) == 5000  # allocates no such buffer


def test_nesting_deeper_than_the_cap_is_one_line_on_both_parsers(tmp_path: Path) -> None:
    for doc in ("[" * 100_000 + "]" * 100_000,  # orjson refuses it; the standard library would recurse
                "[" * (MAX_JSON_DEPTH + 1) + "NaN" + "]" * (MAX_JSON_DEPTH + 1)):  # orjson refuses NaN
        p = tmp_path / "deep.json"
        p.write_text(doc)
        with pytest.raises(UserFileError, match=f"nested deeper than {MAX_JSON_DEPTH} levels") as exc:
            read_user_json(p, what="profile")
        _one_line(exc, p)
    ok = "[" * MAX_JSON_DEPTH + "NaN" + "]" * MAX_JSON_DEPTH  # at the cap, on the standard library's path
    assert json_depth(ok.encode()) == MAX_JSON_DEPTH
    assert loads(ok) is not None


def test_the_depth_scan_skips_brackets_in_strings() -> None:
    assert json_depth(b'["[[[\\"[", {"a": [1]}]') == 3
    assert json_depth(b'"]]]"') == 0
    with pytest.raises(json.JSONDecodeError, match="nested deeper"):
        loads("[" * 5000 + "NaN" + "]" * 5000)


def test_follow_false_refuses_a_symbolic_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    link = tmp_path / "run.json"
    link.symlink_to(target)
    assert read_user_json(link) == {}  # a file a user names may be a link to a regular file
    with pytest.raises(UserFileError, match="is a symbolic link") as exc:
        read_user_json(link, follow=False)
    _one_line(exc, link)


def test_reading_a_huge_sparse_file_costs_no_memory(tmp_path: Path) -> None:
    """A 64 GiB sparse file (no disk used) is refused from its size, in a process whose peak
    stays small."""
    p = tmp_path / "annotations.json"
    with open(p, "wb") as fh:
        fh.truncate(64 << 30)
    code = ("import sys\nfrom probench.files import read_user_bytes, UserFileError\n"
            "try:\n    read_user_bytes(sys.argv[1], kind='annotations')\nexcept UserFileError as e:\n"
            "    print(e)\nprint(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n")
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout.splitlines()
    assert "over the 2048 MiB limit" in out[0]
    assert int(out[1]) / 1024 < 500


def test_eval_params_file_linked_to_a_device_is_one_line(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A new case: `probench eval --params-file` (read before any node starts)."""
    from probench.cli import main

    link = tmp_path / "eval.yaml"
    link.symlink_to("/dev/zero")
    bag = Path(__file__).resolve().parents[1] / "bags" / "probench-sample"
    rc = main(["eval", "--model", "test-instant", "--bag", str(bag), "--out", str(tmp_path / "r"),
               "--params-file", str(link)])
    err = capsys.readouterr().err
    assert rc == 2 and "params file" in err and "not a regular file" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


# -- bounded work: a large sparse file (issue 38: a sparse 1.5 GB annotations.json reached 4.6 GB,
# then "internal error: MemoryError"); the measured proxy is tracemalloc's peak, never a clock
def test_a_sparse_json_file_is_refused_from_its_shape_before_a_byte_is_read(tmp_path: Path) -> None:
    import tracemalloc

    path = tmp_path / "annotations.json"
    with path.open("wb") as fh:
        fh.write(b'{"images": [], "categories": [], "annotations": []')
        fh.truncate(1 << 30)  # a GiB of holes: read as NUL bytes, which no JSON holds
    fd = os.open(path, os.O_RDONLY)
    try:
        if os.lseek(fd, 0, getattr(os, "SEEK_HOLE", os.SEEK_END)) >= path.stat().st_size:
            pytest.skip("this file system reports no holes (SEEK_HOLE)")
    finally:
        os.close(fd)
    tracemalloc.start()
    try:
        with pytest.raises(UserFileError, match="is a sparse file") as exc:
            read_user_json(path, what="dataset", kind="annotations")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _one_line(exc, path)
    assert peak < 1 << 20, peak  # nothing of the GiB was read


def test_a_file_of_nul_bytes_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """Written out (no holes): refused at its first NUL byte, without orjson's buffer (about
    16 bytes per input byte) or the standard library's decoded copies."""
    import tracemalloc

    from probench.jsonio import parse

    data = b'{"images": []' + bytes(8 << 20) + b"}"
    tracemalloc.start()
    try:
        with pytest.raises(json.JSONDecodeError, match="a NUL byte, which no JSON text holds: line 1 col"):
            parse(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # not a copy of the 8 MiB
    assert parse(b'{"a": NaN}')[0]["a"] != 0  # the standard library still reads what orjson refuses


def test_validate_names_a_sparse_annotations_file_in_one_line(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from probench.cli import main

    ds = tmp_path / "ds"
    ds.mkdir()
    with (ds / "annotations.json").open("wb") as fh:
        fh.write(b"{")
        fh.truncate(64 << 20)
    assert main(["validate", str(ds)]) == 1
    out, err = capsys.readouterr()
    said = (out + err).strip()
    assert len(said.splitlines()) == 1 and "Traceback" not in said, said
    assert "is a sparse file" in said or "NUL byte" in said, said  # (a file system without holes: NUL)
