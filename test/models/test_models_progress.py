"""Progress bars only on a terminal, or with ``--progress``: ``infer``, ``latency`` and
``sweep`` write no bar into a log (stderr a pipe) by default, draw one there with
``--progress``, and draw one on a terminal (a pty) by default; ``--no-progress`` and
``--progress`` exclude each other."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)
SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def _args(command: str, out: Path) -> list[str]:
    common = ["--dataset", str(SAMPLE), "--out", str(out)]
    if command == "infer":
        return ["infer", "--model", "test-instant", "--limit", "2", *common]
    if command == "latency":
        return ["latency", "--model", "test-instant", "--images", "2", "--runs", "1", "--warmup", "0",
                *common]
    return ["sweep", "--models", "test-instant", "--limit", "2", "--no-latency", "--reference", "none",
            *common]


def _run(args: list[str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "probench", *args], capture_output=True, timeout=240)
    err = proc.stderr.decode(errors="replace")  # bytes: a bar's carriage returns kept as they are
    assert proc.returncode == 0, err
    return err


BAR = {"infer": "infer test-instant", "latency": "latency test-instant", "sweep": "infer test-instant"}


@pytest.mark.parametrize("command", ["infer", "latency", "sweep"])
def test_no_bar_in_a_log_unless_asked(command: str, tmp_path: Path) -> None:
    quiet = _run(_args(command, tmp_path / "a"))
    assert BAR[command] not in quiet and "\r" not in quiet, quiet
    shown = _run([*_args(command, tmp_path / "b"), "--progress"])
    assert BAR[command] in shown and "\r" in shown and "100%" in shown, shown
    never = _run([*_args(command, tmp_path / "c"), "--no-progress"])
    assert BAR[command] not in never


def test_a_bar_on_a_terminal_by_default(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal 100 wide
    chunks: list[bytes] = []

    def read() -> None:  # while the command runs: a pty's buffer is small, and lost at hang-up
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the writer side is gone
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "probench", *_args("infer", tmp_path / "t")],
                              stdout=subprocess.DEVNULL, stderr=slave, timeout=240)
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0 and BAR["infer"] in text and "100%" in text, text


def test_progress_flags_exclude_each_other() -> None:
    proc = subprocess.run([sys.executable, "-m", "probench", "infer", "--model", "test-instant", "--dataset",
                           str(SAMPLE), "--out", "x", "--progress", "--no-progress"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
