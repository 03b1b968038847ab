"""``probench ground`` on a bag made from a sequence dataset: each video's own prompts (and
its prompt change) when the command is given none, and the temporal metrics of its answers,
as ``probench eval`` prints them (ground/sequences.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.sequence_link import offline_temporal
from probench.bags.writer import write_bag
from probench.data.dataset import load_dataset
from probench.data.synthetic_sequences import write_sequence_dataset

MODEL = "helpers.sequence_link:build"  # the example plugin's colour rule, which finds the shapes


@pytest.fixture(scope="module")
def seq(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("groundseq")
    ds = write_sequence_dataset(root / "ds", 2, 24)
    write_bag(load_dataset(ds), root / "bag", compressed=False, rate_hz=10.0, progress=False)
    return ds, root / "bag"


def _summary(out: Path) -> dict:
    """The run's summary, as the output bag's metadata keeps it."""
    from ruamel.yaml import YAML

    meta = YAML(typ="safe").load((out / "metadata.yaml").read_text())
    return json.loads(meta["rosbag2_bagfile_information"]["custom_data"]["probench.ground.summary"])


def test_ground_uses_the_videos_prompts_and_prints_their_temporal_metrics(
        seq: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from probench.cli import main

    ds_path, bag = seq
    out = tmp_path / "out"
    args = ["ground", "--no-progress", "--bag", str(bag), "--model", MODEL, "--track", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "temporal: 2 videos" in printed and "orig " in printed, printed
    got = _summary(out)["temporal"]["by_formulation"]["orig"]
    assert got["identity"] == "track_id"  # the node's track ids, from the core
    # the frame-wise figures equal those of the same model run offline on the dataset's images
    offline = offline_temporal(ds_path)
    want = offline["by_formulation"]["orig"]
    for key in ("continuity", "flicker_per_100_frames", "prompt_change_latency_frames"):
        assert got[key] == pytest.approx(want[key]), key
    assert 0.0 < got["continuity"] <= 1.0


def test_a_prompt_of_its_own_overrides_the_videos(seq: tuple[Path, Path], tmp_path: Path) -> None:
    from probench.cli import main

    _, bag = seq
    out = tmp_path / "out"
    assert main(["ground", "--no-progress", "--bag", str(bag), "--model", MODEL, "--out", str(out),
                 "--prompt", "a purple elephant"]) == 0
    got = _summary(out)["temporal"]["by_formulation"]["orig"]
    assert got["continuity"] == 0.0  # nothing the data asks for was asked
