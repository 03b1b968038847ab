"""Running ``probench node ...`` as a subprocess, and its one-line failures (shared by the
``probench node`` tests)."""

from __future__ import annotations

import subprocess
import sys


def node_cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "probench", "node", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit 1 with one stderr line, ``probench node: error: ...``, holding every word."""
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("probench node: error: "), proc.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]
