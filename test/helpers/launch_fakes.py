"""Stand-ins for `launch` / `launch_ros` (not installable here), shared by the launch-file tests.

The fakes record their constructor arguments, so a test can read back exactly what a launch
file builds. Not a test module.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

CLASS_NAMES = (
    "LaunchDescription", "DeclareLaunchArgument", "OpaqueFunction", "RegisterEventHandler",
    "Shutdown", "OnProcessExit", "Node", "SetEnvironmentVariable",
)  # fmt: skip


class Recorder:
    def __init__(self, *args, **kwargs) -> None:
        self.args, self.kwargs = args, kwargs


class LaunchConfiguration:
    def __init__(self, name: str) -> None:
        self.name = name

    def perform(self, context: types.SimpleNamespace) -> str:
        return context.launch_configurations[self.name]


def install_fake_launch(monkeypatch: pytest.MonkeyPatch) -> dict[str, type]:
    """Put fake `launch`/`launch_ros` modules into sys.modules; returns the recording classes."""
    classes = {name: type(name, (Recorder,), {}) for name in CLASS_NAMES}
    mods = {
        "launch": {"LaunchDescription": classes["LaunchDescription"]},
        "launch.actions": {k: classes[k] for k in (
            "DeclareLaunchArgument", "OpaqueFunction", "RegisterEventHandler", "Shutdown",
            "SetEnvironmentVariable")},
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
    return classes


def load_launch_file(path: Path, module_name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_launch(
    monkeypatch: pytest.MonkeyPatch, path: Path, **given: str
) -> tuple[list, list, dict[str, type]]:
    """Load a launch file against the fakes and perform its OpaqueFunction with the declared
    defaults overridden by ``given``: (declared arguments, actions, recording classes)."""
    classes = install_fake_launch(monkeypatch)
    module = load_launch_file(path, path.name.replace(".", "_"))
    (entities,) = module.generate_launch_description().args
    declared = [e for e in entities if isinstance(e, classes["DeclareLaunchArgument"])]
    defaults = {d.args[0]: d.kwargs["default_value"] for d in declared}
    (opaque,) = [e for e in entities if isinstance(e, classes["OpaqueFunction"])]
    context = types.SimpleNamespace(launch_configurations={**defaults, **given})
    return declared, opaque.kwargs["function"](context), classes
