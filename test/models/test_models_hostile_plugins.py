"""Plugins are contained (models.plugins.call_foreign; BaseDetector._checked and
Detections.from_arrays for their output): a factory that exits, is interrupted, has the
wrong signature, hangs or whose module hangs on import is one line and a non-zero exit; an
entry point that exits is one problem line of `probench models`; a detector's bad frame
(NaN or infinite box, score 7.5, prompt index 0.7 or beyond the prompts) fails that frame,
named, and is never emptied or clipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.hostile import one_line
from helpers.plugin_env import write_distribution
from probench.models.zoo import load_detector

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"

HOSTILE = '''
import sys, time
import numpy as np
from probench.detections import Detections
from probench.models.base import BaseDetector
from probench.models.spec import ModelSpec

def exits(spec, **kw):
    sys.exit(0)

def interrupted(spec, **kw):
    raise KeyboardInterrupt

def no_arguments():
    return None

def sleeps(spec, **kw):
    time.sleep(60)

def two_lines(spec, **kw):
    raise RuntimeError("first line\\nsecond line")

OUTPUTS = {
    "nan": ([[np.nan, 0, 5, 5]], [0.9], [0]),
    "inf": ([[0, 0, np.inf, 5]], [0.9], [0]),
    "score": ([[0, 0, 5, 5]], [7.5], [0]),
    "fraction": ([[0, 0, 5, 5]], [0.9], [0.7]),
    "beyond": ([[0, 0, 5, 5]], [0.9], [5]),
}

class Bad(BaseDetector):
    name = "hostile"
    def __init__(self, kind, **kw):
        super().__init__()
        self.kind = kind
    def _run(self, image, text_state):
        xyxy, scores, index = OUTPUTS[self.kind]
        return Detections.from_arrays(xyxy, scores, index, image_size=image.shape[:2])

def bad(kind):
    return lambda spec, **kw: Bad(kind)

nan, inf, score, fraction, beyond = (bad(k) for k in OUTPUTS)

class Many(BaseDetector):
    """200,000 boxes for the first prompt (random scores), 3 for the second."""
    name = "many"
    def _run(self, image, text_state):
        rng = np.random.default_rng(0)
        n = 200_000
        xy = rng.uniform(0, 4, (n + 3, 2))
        scores = rng.uniform(0, 1, n + 3)
        index = np.r_[np.zeros(n, np.int64), np.ones(3, np.int64)]
        return Detections.from_arrays(np.c_[xy, xy + 2], scores, index, image_size=image.shape[:2])

def many(spec, **kw):
    return Many()
SPEC_EXITS = None
'''


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "hostile_plugin.py").write_text(HOSTILE)
    (site / "hangs_on_import.py").write_text("import time\ntime.sleep(60)\n"
                                            "def build(spec, **kw):\n    pass\n")
    (site / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    write_distribution(site, "hostile-plugins", "1.0", {"exits": "exits_on_import:SPECS"})
    return site


def _probench(site: Path, *args: str, timeout_s: str = "600") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path]),
           "PROBENCH_PLUGIN_LOAD_TIMEOUT": timeout_s}
    env.pop("PROBENCH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "probench", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def _infer(site: Path, tmp_path: Path, model: str, **kw: str) -> subprocess.CompletedProcess[str]:
    return _probench(site, "infer", "--model", model, "--dataset", str(SAMPLE), "--out",
                     str(tmp_path / "run"), "--no-progress", "--formulations", "orig", **kw)


@pytest.mark.parametrize(("factory", "why"), [
    ("exits", "SystemExit: 0"),
    ("interrupted", "KeyboardInterrupt"),
    ("no_arguments", "TypeError: no_arguments() got an unexpected keyword argument"),
    ("two_lines", "RuntimeError: first line second line"),
])
def test_a_factory_that_exits_or_fails_is_one_line(site: Path, tmp_path: Path, factory: str,
                                                   why: str) -> None:
    r = _infer(site, tmp_path, f"hostile_plugin:{factory}")
    assert r.returncode == 1, r.stderr
    assert why in one_line(r.stderr)


def test_a_factory_that_hangs_meets_the_load_timeout(site: Path, tmp_path: Path) -> None:
    r = _infer(site, tmp_path, "hostile_plugin:sleeps", timeout_s="1")
    assert r.returncode == 1 and "did not return within 1 s (the plugin load timeout" in one_line(r.stderr)
    r = _infer(site, tmp_path, "hangs_on_import:build", timeout_s="1")
    line = one_line(r.stderr)
    assert r.returncode == 2 and "cannot import hangs_on_import: did not return within 1 s" in line


def test_an_entry_point_that_exits_is_a_listed_problem(site: Path) -> None:
    r = _probench(site, "models")
    assert r.returncode == 0, r.stderr
    assert "plugin exits = exits_on_import:SPECS (hostile-plugins 1.0): SystemExit: 0" in r.stdout + r.stderr


def test_a_standard_library_function_as_a_model_is_one_line(site: Path, tmp_path: Path) -> None:
    r = _infer(site, tmp_path, "os:system")
    assert r.returncode == 1 and "factory os:system: TypeError" in one_line(r.stderr)


@pytest.mark.parametrize(("kind", "why"), [
    ("nan", "1 of 1 boxes are not finite"),
    ("inf", "1 of 1 boxes are not finite"),
    ("score", "scores must lie in [0, 1], got 7.5"),
    ("fraction", "prompt indices must be integers, got 0.7"),
    ("beyond", "gave prompt index 5 for"),
])
def test_a_bad_frame_fails_named_never_emptied_or_clipped(site: Path, tmp_path: Path, kind: str,
                                                           why: str) -> None:
    r = _infer(site, tmp_path, f"hostile_plugin:{kind}")
    line = one_line(r.stderr)
    assert r.returncode == 1 and why in line and "failed on image" in line, line


def test_a_bad_frame_in_ground_names_the_frame(site: Path, tmp_path: Path) -> None:
    """`infer` named the image; `ground` said "internal error" and no frame. A frame the model
    fails on is failed (issue 36: the run goes on, as the node's does) and the run ends with
    exit 1 naming the first such frame and its error."""
    bag = SAMPLE.parents[1] / "bags" / "probench-sample"
    r = _probench(site, "ground", "--bag", str(bag), "--out", str(tmp_path / "g"), "--model",
                  "hostile_plugin:nan", "--prompt", "a cup")
    assert r.returncode == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "frame(s) failed" in last and "the first: " in last and "frame 0 (t=" in last, last
    assert "DetectionsError: 1 of 1 boxes are not finite" in last


def test_a_plugin_gets_at_most_100_boxes_per_prompt(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """200,000 boxes of one prompt were all stored (the contract says at most 100): the
    highest-scoring 100 per prompt are kept where every detector's output enters."""
    import numpy as np

    from probench.detections import MAX_PER_PROMPT

    monkeypatch.syspath_prepend(str(site))
    det = load_detector("hostile_plugin:many")
    out = det.detect(np.zeros((8, 8, 3), np.uint8), ["a cup", "a door"])
    first = out.scores[out.prompt_index == 0]
    assert len(first) == MAX_PER_PROMPT and int((out.prompt_index == 1).sum()) == 3
    rng = np.random.default_rng(0)
    rng.uniform(0, 4, (200_003, 2))
    given = rng.uniform(0, 1, 200_003)[:200_000]  # the plugin's scores of the first prompt
    assert sorted(first.tolist()) == sorted(np.sort(given)[-MAX_PER_PROMPT:].tolist())


def test_the_guards_hold_in_process(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same guards without the CLI: the node and `ground` build detectors this way."""
    import numpy as np

    from probench.detections import DetectionsError
    from probench.models import plugins
    from probench.models.plugins import PluginLoadError

    monkeypatch.syspath_prepend(str(site))
    plugins.one_off_spec.cache_clear()
    with pytest.raises(PluginLoadError, match="SystemExit"):
        load_detector("hostile_plugin:exits")
    det = load_detector("hostile_plugin:inf")
    with pytest.raises(DetectionsError, match="not finite"):
        det.detect(np.zeros((8, 8, 3), np.uint8), ["a cup"])
    plugins.one_off_spec.cache_clear()
