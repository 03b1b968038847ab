"""Stand-ins for `launch` / `launch_ros` (not installable here), shared by the launch-file tests.

The fakes record their constructor arguments, so a test can read back exactly what a launch
file builds, and perform its substitutions as `ros2 launch` would: each ``Node``'s
``performed`` is the node description it amounts to for the given arguments, in the shape of
the graph tables' descriptions (params file, then the overrides if any; remappings that
move something). Not a test module.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
import yaml

CLASS_NAMES = (
    "LaunchDescription", "DeclareLaunchArgument", "RegisterEventHandler",
    "Shutdown", "OnProcessExit", "Node", "SetEnvironmentVariable",
)  # fmt: skip


class Recorder:
    def __init__(self, *args, **kwargs) -> None:
        self.args, self.kwargs = args, kwargs


class Substitution:
    """launch.Substitution: what probench.ros.launch_graph.FromGraph derives from."""

    def describe(self) -> str:
        raise NotImplementedError

    def perform(self, context: types.SimpleNamespace) -> str:
        raise NotImplementedError


class LaunchConfiguration(Substitution):
    def __init__(self, name: str) -> None:
        self.name = name

    def perform(self, context: types.SimpleNamespace) -> str:
        return context.launch_configurations[self.name]


def install_fake_launch(monkeypatch: pytest.MonkeyPatch) -> dict[str, type]:
    """Put fake `launch`/`launch_ros` modules into sys.modules; returns the recording classes."""
    classes = {name: type(name, (Recorder,), {}) for name in CLASS_NAMES}
    mods = {
        "launch": {"LaunchDescription": classes["LaunchDescription"], "Substitution": Substitution},
        "launch.actions": {k: classes[k] for k in (
            "DeclareLaunchArgument", "RegisterEventHandler", "Shutdown", "SetEnvironmentVariable")},
        "launch.substitution": {"Substitution": Substitution},
        "launch.event_handlers": {"OnProcessExit": classes["OnProcessExit"]},
        "launch.substitutions": {"LaunchConfiguration": LaunchConfiguration},
        "launch_ros": {},
        "launch_ros.actions": {"Node": classes["Node"]},
    }  # fmt: skip
    for name, attrs in mods.items():
        mod = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(mod, k, v)
        monkeypatch.setitem(sys.modules, name, mod)
    # imported afresh against these fakes (it derives from launch.Substitution), and forgotten after
    monkeypatch.delitem(sys.modules, "probench.ros.launch_graph", raising=False)
    return classes


def load_launch_file(path: Path, module_name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def perform(value: object, context: types.SimpleNamespace) -> str:
    """A substitution, a text, or a list of them, performed (as launch does)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Substitution):
        return value.perform(context)
    return "".join(perform(v, context) for v in value)  # type: ignore[attr-defined]


def performed_node(node: Recorder, context: types.SimpleNamespace) -> dict:
    """The node description a fake ``Node`` amounts to: its substitutions performed, the
    overrides' params file read back (and removed)."""
    desc = dict(node.kwargs)
    params_file, overrides_file = (Path(perform(p, context)) for p in desc["parameters"])
    overrides = yaml.safe_load(overrides_file.read_text(encoding="utf-8"))["/**"]["ros__parameters"]
    overrides_file.unlink()
    desc["parameters"] = [str(params_file), *([overrides] if overrides else [])]
    remaps = [(key, perform(target, context)) for key, target in desc["remappings"]]
    desc["remappings"] = [(key, target) for key, target in remaps if target != key]
    return desc


def run_launch(
    monkeypatch: pytest.MonkeyPatch, path: Path, **given: str
) -> tuple[list, list, dict[str, type]]:
    """Load a launch file against the fakes and perform each Node's substitutions with the
    declared defaults overridden by ``given`` (into ``node.performed``): (declared
    arguments, the other actions in order, recording classes)."""
    classes = install_fake_launch(monkeypatch)
    module = load_launch_file(path, path.name.replace(".", "_"))
    (entities,) = module.generate_launch_description().args
    declared = [e for e in entities if isinstance(e, classes["DeclareLaunchArgument"])]
    defaults = {d.args[0]: d.kwargs["default_value"] for d in declared}
    context = types.SimpleNamespace(launch_configurations={**defaults, **given})
    actions = [e for e in entities if not isinstance(e, classes["DeclareLaunchArgument"])]
    for node in actions:
        if isinstance(node, classes["Node"]):
            node.performed = performed_node(node, context)
    return declared, actions, classes
