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


@pytest.mark.parametrize("args", [["--rate", "0"], ["--size", "10x10"], ["--size", "big"],
                                  ["--record", "x"], ["--depth-noise", "0.01"], ["--frames", "-1"],
                                  ["--depth", "--picture", "p.jpg"], ["--depth", "--depth-noise", "0.5"]])
def test_bad_values_are_usage_errors(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        synthetic_camera.main(args)
    assert done.value.code == 2 and "error:" in capsys.readouterr().err


def test_record_writes_a_bag_and_refuses_an_existing_folder(tmp_path, capsys) -> None:
    out = tmp_path / "rgbd"
    assert synthetic_camera.main(["--depth", "--record", str(out), "--frames", "3", "--size", "64x48"]) == 0
    said = capsys.readouterr().out
    assert f"wrote 3 RGB-D frames (64x48, 15 Hz) to {out}: /image, /depth/image_raw, " in said
    assert (out / "metadata.yaml").exists()
    assert synthetic_camera.main(["--depth", "--record", str(out), "--frames", "3"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("synthetic_camera: error: ") and "exists" in err[0]
