"""The documented plugin install route (docs/MODELS.md#the-worked-example): ``pip install
--no-deps --target plugins ...`` beside the venv and ``PYTHONPATH`` in the shell that uses
it. The plugin's models are then known to probench, and the venv itself gains nothing, so
the pin check (test_infra_setup_script's "nothing unpinned") stays green in a shell without
that PYTHONPATH. Real pip, offline, from a copy of the example."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.plugin_env import EXAMPLE

pytestmark = pytest.mark.timeout(240)

_DISTS = ("import importlib.metadata as md, json; "
          "print(json.dumps(sorted(d.metadata['Name'] for d in md.distributions())))")


def _env(plugins: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(([str(plugins)] if plugins else []) + paths)
    return env


def test_plugin_beside_the_venv_is_found_and_the_venv_stays_locked(tmp_path) -> None:
    source = tmp_path / "example"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    plugins = tmp_path / "plugins"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(plugins), str(source)],
                         capture_output=True, text=True, timeout=180)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    models = subprocess.run([sys.executable, "-m", "probench", "models", "--json"], env=_env(plugins),
                            capture_output=True, text=True, timeout=120)
    assert models.returncode == 0, models.stderr
    assert "example-colour" in models.stdout and "probench-example-plugin" in models.stdout
    # the venv: unchanged (what the pin check reads, in a shell without the plugin path) ...
    without = json.loads(subprocess.run([sys.executable, "-c", _DISTS], env=_env(None), capture_output=True,
                                        text=True, timeout=60, check=True).stdout)
    assert "probench-example-plugin" not in without
    # ... while the shell with PYTHONPATH sees it (why make test runs in a shell without it)
    with_path = json.loads(subprocess.run([sys.executable, "-c", _DISTS], env=_env(plugins),
                                          capture_output=True, text=True, timeout=60, check=True).stdout)
    assert "probench-example-plugin" in with_path
    assert not (EXAMPLE / "build").exists()  # the example's own folder was not built in
