"""Type errors fail the suite (and so CI): mypy with the repository's pyproject configuration
([tool.mypy]: all of src/probench, strict where the rooms meet)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a cold run reads numpy's stubs and every module: ~10 s


def test_mypy_reports_no_error(repo_root):
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=repo_root, capture_output=True, text=True,
                         timeout=600, stdin=subprocess.DEVNULL)  # fmt: skip
    report = f"{out.stdout}{out.stderr}"
    assert out.returncode == 0, f"mypy (pyproject [tool.mypy]) failed:\n{report}"
    # A configuration that checks nothing must not pass: every module of the package is read.
    checked = re.search(r"no issues found in (\d+) source files?", out.stdout)
    n_modules = len(list((repo_root / "src" / "probench").rglob("*.py")))
    assert checked is not None and int(checked.group(1)) >= n_modules, report
