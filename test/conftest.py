"""Shared test set-up for the whole suite.

The environment below is set at import time, before any test module can import rclpy:
DDS must stay on loopback on these machines, and no model hub is reachable (fail fast,
never wait on a network timeout). test/infra/test_infra_discovery_range.py checks it.

Fixtures for every room:
- ``repo_root``: the repository root (Path).
- ``ros_env``: an environment dict for subprocesses that start rclpy (LOCALHOST, offline,
  unbuffered, the venv's bin first on PATH).
- ``requires_vision_msgs``: use it in every test that needs the ROS 2 messages; when
  vision_msgs cannot be imported the test FAILS (never skips): the set-up always builds it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Set before anything imports rclpy (conftest.py is imported before the test modules).
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "YOLO_OFFLINE"):
    os.environ[_var] = "1"

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def ros_env() -> dict[str, str]:
    """Environment for a subprocess that starts rclpy (a copy; tests may add to it)."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["HF_HUB_OFFLINE"] = env["TRANSFORMERS_OFFLINE"] = env["YOLO_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    # The venv's console scripts (probench, grounding_node, ...) first, whoever started pytest.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@pytest.fixture(scope="session")
def requires_vision_msgs() -> None:
    """Fail (not skip) when vision_msgs does not import: the set-up always provides it."""
    try:
        import vision_msgs.msg  # noqa: F401
    except ImportError as exc:
        pytest.fail(
            f"vision_msgs does not import ({exc}); run `make setup` (it builds "
            "interfaces/vision_msgs into the venv) or install ros-$ROS_DISTRO-vision-msgs",
            pytrace=False,
        )
