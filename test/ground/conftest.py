"""``ground``: the ``probench ground`` command run in this process (helpers: helpers/camera_bags.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def ground(capsys: pytest.CaptureFixture[str]):
    """``ground(*args) -> (exit code, stdout, stderr)``: the CLI in this process."""
    from probench.cli import main

    def run(*args: object) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = main(["ground", "--no-progress", *(str(a) for a in args)])
        out, err = capsys.readouterr()
        return rc, out, err

    return run
