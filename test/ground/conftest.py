"""``ground``: the ``probench ground`` command run in this process (helpers: helpers/camera_bags.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def ground(capsys: pytest.CaptureFixture[str]):
    """``ground(*args) -> (exit code, stdout, stderr)``: the CLI in this process (argparse's
    usage errors, an integer flag out of range, exit 2 too)."""
    from helpers.cli_exit import exit_code

    def run(*args: object) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = exit_code(["ground", "--no-progress", *(str(a) for a in args)])
        out, err = capsys.readouterr()
        return rc, out, err

    return run
