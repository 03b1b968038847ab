"""The command line dispatches lazily: building a command's parser imports that command's
module only, and none of the heavy libraries (a fresh interpreter per check)."""

from __future__ import annotations

import json
import subprocess
import sys

from probench.cli import COMMANDS

HEAVY = ("torch", "rclpy", "transformers", "ultralytics", "cv2", "ray", "fastapi", "supervision", "trackers",
         "hotcoco", "pycocotools", "faster_coco_eval", "matplotlib", "rosbags")

_PROBE = """
import json, sys
from probench.cli import COMMANDS, build_parser
out = {}
for name in COMMANDS:
    before = set(sys.modules)
    build_parser(name)
    out[name] = sorted(m for m in set(sys.modules) - before if m.startswith("probench."))
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[1])))
print(json.dumps({"modules": out, "heavy": heavy, "numpy": "numpy" in sys.modules}))
"""


def _probe(code: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_building_every_parser_imports_no_heavy_library() -> None:
    got = _probe(_PROBE, json.dumps(HEAVY))
    assert got["heavy"] == []
    for name, (module, _) in COMMANDS.items():
        other = {m for _, (m, _) in COMMANDS.items() if m != module}
        assert not other & set(got["modules"][name]), (name, got["modules"][name])


def test_the_score_parser_needs_no_numpy() -> None:
    code = "import json, sys\nfrom probench.cli import build_parser\nbuild_parser('score')\n"
    code += "print(json.dumps({'numpy': 'numpy' in sys.modules}))"
    assert _probe(code) == {"numpy": False}


def test_the_import_help_names_every_importer() -> None:
    """`probench --help` said "(coco, refcoco)" after mot was added."""
    import argparse

    from probench.cli import build_parser

    parser, _ = build_parser("import")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    imports = next(a for a in sub.choices["import"]._actions if isinstance(a, argparse._SubParsersAction))
    assert set(imports.choices) == {"coco", "refcoco", "mot"}
    assert f"({', '.join(imports.choices)})" in COMMANDS["import"][1]


def test_no_progress_bar_reaches_a_pipe(tmp_path) -> None:
    """Commands run with their output piped (a log) print no bar: `report` of two runs and
    `bag` once drew theirs there (``report: loading runs: 0%|``)."""
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sample = root / "datasets" / "probench-sample"
    runs = []
    for name in ("a", "b"):
        run = tmp_path / name
        run.mkdir()
        (run / "run.json").write_text(json.dumps({"model": {"name": name}}))
        (run / "metrics.json").write_text(json.dumps({"map50": 0.5, "latency_ms": {"mean": 20.0}}))
        runs.append(str(run))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    bag = ["bag", "--dataset", str(sample), "--out", str(tmp_path / "bag"), "--compressed"]
    for args in (["report", *runs, "--out", str(tmp_path / "rep")], bag):
        # capture_output: both streams are pipes, as in a log
        done = subprocess.run([sys.executable, "-m", "probench", *args], capture_output=True, text=True,
                              env=env, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        both = done.stdout + done.stderr
        assert "\r" not in both and "%|" not in both and "it/s" not in both, both
