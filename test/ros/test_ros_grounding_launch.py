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
    return [a.performed for a in actions if isinstance(a, classes["Node"])]


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


def test_the_launch_file_is_declarative(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `ros2 launch --show-args` / `--print` read: arguments and a Node whose parameters
    and remappings are substitutions of them, no function run at launch time."""
    from helpers.launch_fakes import Substitution

    _, actions, classes = run_launch(monkeypatch, LAUNCH_FILE)
    kinds = {type(a).__name__ for a in actions}
    assert kinds <= {"SetEnvironmentVariable", "Node"}
    (node,) = [a for a in actions if isinstance(a, classes["Node"])]
    assert all(isinstance(p, Substitution) for p in node.kwargs["parameters"])
    assert all(isinstance(t, Substitution) for _, t in node.kwargs["remappings"])
    assert "grounding graph" in node.kwargs["parameters"][1].describe()


def test_the_overrides_file_gives_the_node_typed_values(requires_vision_msgs, ros_env) -> None:
    """rcl reads the overrides file FromGraph writes: a number-like model stays a string,
    prompts stay a list of strings (unicode, quotes and all)."""
    import json
    import subprocess
    import sys

    from helpers.grounding_harness import fresh_domain
    from probench.ros.launch_graph import node_parameters

    values = {name: default for name, (default, _) in LAUNCH_ARGUMENTS.items()}
    values.update(model="123", prompt="eine Tür; the driver's \"seat\"")
    path = node_parameters("grounding", 0, "overrides", "", values)
    code = (
        "import json, sys, rclpy; from rclpy.context import Context; c = Context();"
        "rclpy.init(args=['x', '--ros-args', '--params-file', sys.argv[1]], context=c);"
        "n = rclpy.create_node('grounding_node', context=c,"
        " automatically_declare_parameters_from_overrides=True);"
        "print(json.dumps({k: p.value for k, p in n.get_parameters_by_prefix('').items()"
        " if k in ('model', 'prompts')}))"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=60,
                             env={**ros_env, "ROS_DOMAIN_ID": str(fresh_domain())})
    finally:
        Path(path).unlink()
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "model": "123", "prompts": ["eine Tür", "the driver's \"seat\""]}
