"""The workspace builds with colcon (from PyPI) and its installed console scripts run.

The repository is copied (sources only) into tmp/ws/src, as a ROS 2 user would clone it;
interfaces/COLCON_IGNORE keeps the in-repo vision_msgs out of the build (the venv, like a
ROS 2 install, already provides vision_msgs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]

COPY = ["package.xml", "setup.py", "setup.cfg", "resource", "src", "launch", "config", "interfaces"]
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, repo_root):
    ws = tmp_path_factory.mktemp("ws")
    pkg = ws / "src" / "probench"
    pkg.mkdir(parents=True)
    for name in COPY:
        src = repo_root / name
        if src.is_dir():
            shutil.copytree(src, pkg / name, ignore=IGNORE)
        elif src.exists():
            shutil.copy2(src, pkg / name)
    return ws


def _env(ros_env: dict[str, str]) -> dict[str, str]:
    venv = sys.prefix
    env = dict(ros_env)
    # colcon's install/setup.sh chains onto AMENT_PREFIX_PATH: export the venv's prefix first
    env.update(AMENT_PREFIX_PATH=venv, CMAKE_PREFIX_PATH=venv)
    env["PATH"] = os.pathsep.join([str(Path(venv) / "bin"), env["PATH"]])
    env.pop("PYTHONPATH", None)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_colcon_build_and_installed_scripts_run(workspace, ros_env):
    env = _env(ros_env)
    build = _run([sys.executable, "-m", "colcon", "--log-base", "log", "build", "--symlink-install",
                  "--base-paths", "src", "--event-handlers", "console_direct-"], workspace, env, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    install = workspace / "install"
    lib = install / "probench" / "lib" / "probench"
    for script in ("probench", "grounding_node", "evaluator_node"):
        assert (lib / script).is_file(), f"console script {script} not installed in {lib}"
    share = install / "probench" / "share"
    assert (share / "ament_index" / "resource_index" / "packages" / "probench").is_file()
    assert (share / "probench" / "package.xml").is_file()
    # the Fast DDS profile the launch files apply (config/fastdds.xml) is installed with the YAMLs
    assert (share / "probench" / "config" / "fastdds.xml").is_file()
    assert (share / "probench" / "config" / "grounding.yaml").is_file()
    # only probench was built: the in-repo vision_msgs is COLCON_IGNOREd
    assert sorted(p.name for p in (workspace / "build").iterdir() if p.is_dir()) == ["probench"]
    assert not (install / "vision_msgs").exists()

    # As a user would: source the install, then run the installed script and resolve the
    # package through the ament index (what `ros2 run` / `ros2 launch` use).
    probe = (
        "import probench, vision_msgs.msg; "
        "from ament_index_python.packages import get_package_share_directory as share; "
        "print(probench.__file__); print(share('probench')); print(vision_msgs.__file__)"
    )
    shell = (
        f". {install}/setup.sh && {lib}/probench --help && {lib}/probench --version && "
        f"{sys.executable} -c \"{probe}\""
    )
    out = _run(["bash", "-c", shell], workspace, env)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("usage: probench")
    assert any(line.startswith("probench 0.1.0") for line in lines)
    probench_file, share_dir, vision_file = lines[-3:]
    assert probench_file.startswith(str(workspace)), "probench was not imported from the colcon workspace"
    assert share_dir == str(share / "probench")
    assert vision_file.startswith(sys.prefix), "vision_msgs must come from the environment, not the ws"
