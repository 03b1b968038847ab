"""The documented plugin install route (docs/MODELS.md#the-worked-example), its lines run as
written: a copy of the example installed with ``pip install --no-deps --target`` into a
folder outside the repository and the venv, and ``PYTHONPATH`` in the shell that uses it.
The plugin's models are then known to probench; the venv itself gains nothing, so the pin
check (test_infra_setup_script's "nothing unpinned") stays green in a shell without that
PYTHONPATH; and nothing is written into the repository (the route wrote ``plugins/`` and
pip's ``build/`` and ``*.egg-info`` there). Real pip, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.plugin_env import EXAMPLE

REPO = EXAMPLE.parents[1]

pytestmark = pytest.mark.timeout(240)

_DISTS = ("import importlib.metadata as md, json; "
          "print(json.dumps(sorted(d.metadata['Name'] for d in md.distributions())))")


def _env(plugins: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(([str(plugins)] if plugins else []) + paths)
    return env


def _documented_install() -> str:
    """MODELS.md's install lines of the worked example, up to the first ``probench`` one."""
    text = (REPO / "docs" / "MODELS.md").read_text(encoding="utf-8").split("### The worked example", 1)[1]
    lines = [line[4:] for line in text.splitlines() if line.startswith("    ")]
    return "\n".join(lines[: next(i for i, line in enumerate(lines) if line.startswith("probench "))])


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_plugin_beside_the_venv_is_found_and_the_venv_stays_locked(tmp_path) -> None:
    pip_offline = f"{sys.executable} -m pip install --no-index"
    script = _documented_install().replace(".venv/bin/pip install", pip_offline)
    assert "--target" in script and "$HOME" in script, script
    home = tmp_path / "home"
    before = _files(EXAMPLE)
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp_path)}
    pip = subprocess.run(["bash", "-ec", script + '\nprintf %s "$PYTHONPATH"'], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=180)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    plugins = Path(pip.stdout.splitlines()[-1])
    assert home in plugins.parents and (plugins / "probench_example_plugin").is_dir()
    assert _files(EXAMPLE) == before and not (REPO / "plugins").exists()  # nothing into the repository
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
