"""launch/grounding.launch.py: declared arguments and the node it describes.

`launch`/`launch_ros` are not installable here: fake modules that record what the launch
file builds are injected into sys.modules.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from probench.ros.errors import ParameterValueError
from probench.ros.node_spec import LAUNCH_ARGUMENTS, default_params_file

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "grounding.launch.py"


class _Recorder:
    def __init__(self, *args, **kwargs) -> None:
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration:
    def __init__(self, name: str) -> None:
        self.name = name

    def perform(self, context: types.SimpleNamespace) -> str:
        return context.launch_configurations[self.name]


def _launch(monkeypatch: pytest.MonkeyPatch, **given: str) -> list:
    classes = {n: type(n, (_Recorder,), {}) for n in (
        "LaunchDescription", "DeclareLaunchArgument", "OpaqueFunction", "Node")}
    mods = {
        "launch": {"LaunchDescription": classes["LaunchDescription"]},
        "launch.actions": {k: classes[k] for k in ("DeclareLaunchArgument", "OpaqueFunction")},
        "launch.substitutions": {"LaunchConfiguration": _LaunchConfiguration},
        "launch_ros": {},
        "launch_ros.actions": {"Node": classes["Node"]},
    }
    for name, attrs in mods.items():
        mod = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(mod, k, v)
        monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location("grounding_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (entities,) = module.generate_launch_description().args
    declared = [e for e in entities if isinstance(e, classes["DeclareLaunchArgument"])]
    assert [d.args[0] for d in declared] == ["model", "image_topic", "prompt", "device", "params_file"]
    assert [d.args[0] for d in declared] == list(LAUNCH_ARGUMENTS)
    assert all(d.kwargs["description"] for d in declared)
    defaults = {d.args[0]: d.kwargs["default_value"] for d in declared}
    (opaque,) = [e for e in entities if isinstance(e, classes["OpaqueFunction"])]
    context = types.SimpleNamespace(launch_configurations={**defaults, **given})
    actions = opaque.kwargs["function"](context)
    assert all(isinstance(a, classes["Node"]) for a in actions)
    return [a.kwargs for a in actions]


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
