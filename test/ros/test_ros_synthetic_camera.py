"""The synthetic camera's command line: its --help says whole sentences, bad values are one
usage line."""

from __future__ import annotations

import pytest

from probench.ros import synthetic_camera


def test_help_is_whole(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        synthetic_camera.main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("A synthetic camera: publishes sensor_msgs/Image (rgb8) at a fixed rate, for trying the "
            "grounding node and probench console without a camera, and for their tests.") in text
    assert "--no-fastdds-profile" in text


@pytest.mark.parametrize("args", [["--rate", "0"], ["--size", "10x10"], ["--size", "big"]])
def test_bad_values_are_usage_errors(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        synthetic_camera.main(args)
    assert done.value.code == 2 and "error:" in capsys.readouterr().err
