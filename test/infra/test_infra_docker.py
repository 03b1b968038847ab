"""The Docker recipe (not buildable here: no Docker) stays consistent with the package.

Static checks only: what the image installs and runs, and that its pins do not drift
from the venv's lock except where docker/requirements.txt says why.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

# Documented exceptions (docker/requirements.txt): NumPy 1.x for the apt ROS 2 messages.
DOCKER_ONLY_VERSIONS = {"numpy", "opencv-python"}


def _pins(path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"{path.name}: not an exact pin: {line!r}"
            out[name.lower()] = version
    return out


def test_dockerfile_uses_ros_image_apt_vision_msgs_and_launches_eval(repo_root):
    text = (repo_root / "docker" / "Dockerfile").read_text()
    assert re.search(r"^FROM ros:\$\{ROS_DISTRO\}-ros-base$", text, re.M)
    assert "ros-${ROS_DISTRO}-vision-msgs" in text
    assert "colcon build" in text
    assert 'CMD ["ros2", "launch", "probench", "eval.launch.py"]' in text
    # every ROS package that package.xml needs and ros-base lacks is installed from apt
    declared = {e.text for e in ET.parse(repo_root / "package.xml").getroot().iter("exec_depend")}
    for pkg in ("vision_msgs", "launch_ros", "diagnostic_msgs", "lifecycle_msgs"):
        assert pkg in declared
        assert f"ros-${{ROS_DISTRO}}-{pkg.replace('_', '-')}" in text, pkg
    assert (repo_root / "docker" / "entrypoint.sh").stat().st_mode & 0o111


def test_docker_pins_match_the_lock(repo_root):
    docker = _pins(repo_root / "docker" / "requirements.txt")
    lock = _pins(repo_root / "requirements.txt")
    assert docker["torch"] == "2.14.1" and any(name.startswith("tensorrt") for name in docker)
    assert not [name for name in docker if name.startswith("ros-")], "the image's ROS 2 comes from apt"
    drift = {n: (v, lock[n]) for n, v in docker.items()
             if n in lock and n not in DOCKER_ONLY_VERSIONS and lock[n] != v}
    assert not drift, f"docker/requirements.txt vs requirements.txt: {drift}"


def test_build_context_excludes_local_environments(repo_root):
    ignored = (repo_root / "docker" / "Dockerfile.dockerignore").read_text().split()
    for entry in (".venv", ".git", "build", "install", "log"):
        assert entry in ignored, entry
