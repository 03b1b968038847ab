"""The example plugin (examples/probench-example-plugin) on the path with its entry-point
metadata, as ``pip install`` would leave it, without touching the shared environment: a
``.dist-info`` folder (METADATA + entry_points.txt written from the package's own
pyproject.toml) next to a copy of its sources in a temporary folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import tomllib

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "probench-example-plugin"


def write_distribution(site: Path, name: str, version: str, entry_points: dict[str, str],
                       group: str = "probench.models") -> Path:
    """A minimal installed distribution's metadata under ``site``."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = [f"[{group}]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return info


def install_example(site: Path) -> Path:
    """The example plugin 'installed' into ``site`` (put ``site`` on sys.path / PYTHONPATH)."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    shutil.copytree(EXAMPLE / "src" / "probench_example_plugin", site / "probench_example_plugin")
    write_distribution(site, project["name"], project["version"],
                       project["entry-points"]["probench.models"])
    return site
