"""Lint failures fail the suite (and so CI): ruff with the repository's pyproject configuration."""

from __future__ import annotations

import subprocess
import sys


def test_ruff_check_is_clean(repo_root):
    paths = [p for p in ("src", "test", "bench", "launch") if (repo_root / p).exists()]
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *paths], cwd=repo_root,
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, f"ruff check {' '.join(paths)} failed:\n{out.stdout}{out.stderr}"
