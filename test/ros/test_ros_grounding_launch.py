"""launch/grounding.launch.py: declared arguments and the node it describes.

`launch`/`launch_ros` are not installable here: fake modules that record what the launch
file builds are injected into sys.modules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.launch_fakes import run_launch
from probench.realtime.errors import ParameterValueError
from probench.realtime.node_spec import LAUNCH_ARGUMENTS, default_params_file

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "grounding.launch.py"


def _launch(monkeypatch: pytest.MonkeyPatch, **given: str) -> list:
    declared, actions, classes = run_launch(monkeypatch, LAUNCH_FILE, **given)
    assert [d.args[0] for d in declared] == ["model", "image_topic", "prompt", "device", "params_file"]
    assert [d.args[0] for d in declared] == list(LAUNCH_ARGUMENTS)
    assert all(d.kwargs["description"] for d in declared)
    # the node, after the Fast DDS profile's environment (test_ros_dds_profile.py checks that part)
    assert all(isinstance(a, classes["SetEnvironmentVariable"]) for a in actions[:-1])
    assert isinstance(actions[-1], classes["Node"])
    return [a.kwargs for a in actions if isinstance(a, classes["Node"])]


def test_defaults_take_everything_from_the_params_file(monkeypatch: pytest.MonkeyPatch) -> None:
    (node,) = _launch(monkeypatch)
    assert (node["package"], node["executable"], node["name"]) == ("probench", "grounding_node",
                                                                   "grounding_node")
    assert node["parameters"] == [str(default_params_file())]  # no overrides
    assert node["remappings"] == []


def test_arguments_become_overrides_and_remapping(monkeypatch: pytest.MonkeyPatch) -> None:
    (node,) = _launch(monkeypatch, model="owlv2-b", device="cuda:1", image_topic="/cam/image_raw",
                      prompt="a red backpack; a door handle ;", params_file="/etc/my.yaml")
    assert node["parameters"] == ["/etc/my.yaml", {
        "model": "owlv2-b", "device": "cuda:1", "prompts": ["a red backpack", "a door handle"]}]
    assert node["remappings"] == [("image", "/cam/image_raw"),
                                  ("image/compressed", "/cam/image_raw/compressed")]


def test_prompt_text_is_data(monkeypatch: pytest.MonkeyPatch) -> None:
    (node,) = _launch(monkeypatch, prompt="__import__('os').getcwd()")
    assert node["parameters"][1] == {"prompts": ["__import__('os').getcwd()"]}
    with pytest.raises(ParameterValueError, match="no target description"):
        _launch(monkeypatch, prompt=" ; ; ")
