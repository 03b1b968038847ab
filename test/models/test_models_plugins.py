"""Plugin models: the entry-point group ``probench.models``, ``--model package.module:factory``,
``probench models`` listing them (and broken ones in one line), and the worked example
plugin (examples/probench-example-plugin) through ``probench infer``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from helpers.plugin_env import install_example, write_distribution
from probench.errors import UsageError
from probench.models import plugins as plugin_mod
from probench.models.errors import ModelError, UnknownModelError
from probench.models.zoo import ZOO, check_model_name, load_detector, model_record, plugins, resolve

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "probench-sample"


def _clear() -> None:
    plugin_mod.discover.cache_clear()
    plugin_mod.one_off_spec.cache_clear()
    for mod in [m for m in sys.modules if m.startswith(("probench_example_plugin", "fake_plugin"))]:
        del sys.modules[mod]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example plugin installed into a folder on sys.path, plus broken plugins."""
    site = install_example(tmp_path / "site")
    (site / "fake_plugin.py").write_text(
        "from probench.models.spec import ModelSpec\n"
        "CLASH = ModelSpec(name='owlv2-b', paper_name='x', family='x', backend='x', checkpoint='',"
        " factory='fake_plugin:build')\n"
        "NOT_A_DETECTOR = ModelSpec(name='not-a-detector', paper_name='x', family='x', backend='x',"
        " checkpoint='', factory='fake_plugin:build')\n"
        "def build(spec, **kw):\n    return object()\n"
        "raise_on_import = None\n"
    )
    write_distribution(site, "broken-plugins", "2.0", {
        "missing": "no_such_module_for_probench:SPECS",
        "notspec": "fake_plugin:raise_on_import",
        "clash": "fake_plugin:CLASH",
        "bad": "fake_plugin:NOT_A_DETECTOR",
    })
    monkeypatch.syspath_prepend(str(site))
    _clear()
    yield site
    _clear()


def _env(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return env


def _probench(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "probench", *args], env=_env(site), capture_output=True,
                          text=True, timeout=300)


def test_discovery_lists_plugins_and_names_broken_ones(site: Path) -> None:
    found, broken = plugins()
    names = {m.spec.name: m for m in found}
    assert set(names) == {"example-colour", "not-a-detector"}
    assert names["example-colour"].distribution == "probench-example-plugin 0.1.0"
    lines = {p.entry_point.split(" =")[0]: p.line() for p in broken}
    assert set(lines) == {"missing", "notspec", "clash"}
    assert "ModuleNotFoundError" in lines["missing"] and "broken-plugins 2.0" in lines["missing"]
    assert "NoneType, not a probench.models.spec.ModelSpec" in lines["notspec"]
    assert "'owlv2-b' is already taken" in lines["clash"]
    assert all("\n" not in line for line in lines.values())
    assert resolve("owlv2-b")[0] is ZOO["owlv2-b"]  # a plugin never replaces a zoo model
    assert resolve("example-colour")[0].backend == "numpy"
    with pytest.raises(UnknownModelError, match="3 plugin\\(s\\) failed to load"):
        resolve("no-such-model")
    with pytest.raises(ModelError, match=r"returned object, not a probench\.models\.base\.BaseDetector"):
        load_detector("not-a-detector")


def test_example_plugin_detects_the_colour_it_is_asked_for(site: Path) -> None:
    det = load_detector("example-colour")
    assert det.model_info == model_record("example-colour")
    assert det.model_info["family"] == "example"
    # the summaries said "weights: " (empty) for a plugin: its factory is named as the source
    assert det.model_info["weights_source"] == "its factory's own (probench_example_plugin.detector:build)"
    image = np.full((60, 80, 3), 128, np.uint8)
    image[10:30, 20:50] = (210, 20, 25)  # a red rectangle on grey
    dets = det.detect(image, ["the red box", "a blue thing", "no colour here"])
    assert dets.xyxy.tolist() == [[20.0, 10.0, 50.0, 30.0]]
    assert dets.prompt_index.tolist() == [0]
    assert det.detect(image, ["a blue thing", "the red box"]).prompt_index.tolist() == [1]
    assert det.text_cache_stats()["hits"] == 2  # the base class's per-prompt cache at work
    with pytest.raises(UsageError, match="no weights"):
        load_detector("example-colour", random_weights=True)


def test_one_off_model_name(site: Path) -> None:
    spec, tiny = resolve("probench_example_plugin.detector:build")
    assert not tiny and spec.factory == "probench_example_plugin.detector:build" and spec.family == "plugin"
    det = load_detector("probench_example_plugin.detector:build")
    assert det.model_info is not None and det.model_info["name"] == "probench_example_plugin.detector:build"
    assert resolve("probench_example_plugin.specs:COLOUR")[0].name == "example-colour"  # a ModelSpec
    for bad, why in [("no_such_mod_xyz:build", "cannot import no_such_mod_xyz"),
                     ("probench_example_plugin.detector:nope", "has no attribute 'nope'"),
                     ("probench_example_plugin.detector:MAX_DISTANCE", "neither a ModelSpec nor a factory"),
                     ("a:b:c", "expected a zoo name or 'package.module:factory'")]:
        with pytest.raises(UnknownModelError, match=why):
            check_model_name(bad)


def test_probench_models_lists_the_plugin_and_keeps_the_zoo(site: Path) -> None:
    r = _probench(site, "models", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rows = {m["name"]: m for m in out["models"]}
    assert set(ZOO) < set(rows)
    assert rows["example-colour"]["source"] == "probench-example-plugin 0.1.0"
    assert rows["owlv2-b"]["source"] == "probench"
    assert len(out["plugin_problems"]) == 3
    r = _probench(site, "models")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    text = r.stdout.splitlines()
    assert any(line.startswith("example-colour") and "probench-example-plugin 0.1.0" in line for line in text)
    assert sum(line.startswith("plugin ") for line in text) == 3


def test_example_plugin_through_probench_infer(site: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = _probench(site, "infer", "--model", "example-colour", "--dataset", str(SAMPLE), "--out", str(out),
                  "--no-progress")
    assert r.returncode == 0, r.stderr
    info = json.loads((out / "run.json").read_text())
    assert info["model"]["name"] == "example-colour" and info["model"]["backend"] == "numpy"
    preds = json.loads((out / "predictions" / "orig.json").read_text())
    assert preds, "the sample's colour prompts (green eyes, orange dahlia, red pillars) find pixels"
    r = _probench(site, "score", "--run", str(out), "--dataset", str(SAMPLE))
    assert r.returncode == 0, r.stderr
    one_off = tmp_path / "one-off"
    r = _probench(site, "infer", "--model", "probench_example_plugin.detector:build", "--dataset",
                  str(SAMPLE), "--out", str(one_off), "--no-progress", "--formulations", "orig")
    assert r.returncode == 0, r.stderr
    assert json.loads((one_off / "predictions" / "orig.json").read_text()) == preds  # same detector
    r = _probench(site, "infer", "--model", "no_such_mod_xyz:build", "--dataset", str(SAMPLE), "--out",
                  str(tmp_path / "bad"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot import no_such_mod_xyz" in r.stderr
